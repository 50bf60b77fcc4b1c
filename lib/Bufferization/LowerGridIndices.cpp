//===- LowerGridIndices.cpp - The loom-lower-grid-indices pass ------------===//

#include "loom/Bufferization/Collectives.h"
#include "loom/Bufferization/Passes.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMLOWERGRIDINDICES
#include "loom/Bufferization/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
struct LowerGridIndicesPass
    : public loom::impl::LoomLowerGridIndicesBase<LowerGridIndicesPass> {
  void runOnOperation() override {
    SmallVector<shard::ProcessMultiIndexOp> queries;
    getOperation().walk(
        [&](shard::ProcessMultiIndexOp op) { queries.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (shard::ProcessMultiIndexOp op : queries) {
      rewriter.setInsertionPoint(op);
      FailureOr<Value> rank = buildGroupRank(rewriter, op);
      if (failed(rank))
        return signalPassFailure();
      rewriter.replaceOp(op, *rank);
    }
  }
};
} // namespace
