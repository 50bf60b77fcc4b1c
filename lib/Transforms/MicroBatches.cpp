//===- MicroBatches.cpp - The loom-micro-batches pass ---------------------===//
//
// The importer describes the step over the global batch; what one rank runs
// at a time is one micro-batch of its replica's share. Changing the batch
// dimension of @forward's inputs and letting every type follow is all it
// takes: loom ops infer their result types from their operands.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"
#include "loom/Transforms/Passes.h"
#include "loom/Transforms/TypeRefinement.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMMICROBATCHES
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
struct MicroBatchesPass
    : public loom::impl::LoomMicroBatchesBase<MicroBatchesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan))
      return signalPassFailure();
    auto training =
        module->getAttrOfType<TrainingAttr>(LoomDialect::getTrainingAttrName());
    auto forward = module.lookupSymbol<func::FuncOp>(
        LoomDialect::getForwardFunctionName());
    if (!training || !forward || forward.isExternal()) {
      module.emitError() << "expected a '" << LoomDialect::getTrainingAttrName()
                         << "' attribute and a function @"
                         << LoomDialect::getForwardFunctionName();
      return signalPassFailure();
    }
    int64_t replicas = plan->dp;
    int64_t count = plan->microBatches;
    int64_t batch = training.getBatch();
    // The verifier has checked that the plan splits the batch evenly.
    int64_t rows = batch / (replicas * count);

    bool changed = false;
    for (BlockArgument argument : forward.getArguments()) {
      if (!forward.getArgAttr(argument.getArgNumber(),
                              LoomDialect::getInputAttrName()))
        continue;
      auto type = dyn_cast<RankedTensorType>(argument.getType());
      if (!type || type.getRank() == 0)
        continue;
      int64_t current = type.getDimSize(0);
      if (current == rows)
        continue;
      if (current != batch) {
        forward.emitOpError()
            << "input #" << argument.getArgNumber() << " has " << current
            << " sequences: neither the global batch of " << batch
            << " nor one micro-batch of " << rows
            << " (dp * micro_batches = " << replicas << " * " << count << ")";
        return signalPassFailure();
      }
      SmallVector<int64_t> shape(type.getShape());
      shape[0] = rows;
      argument.setType(type.clone(shape));
      changed = true;
    }
    if (changed && failed(refineTypes(forward)))
      return signalPassFailure();
  }
};
} // namespace
