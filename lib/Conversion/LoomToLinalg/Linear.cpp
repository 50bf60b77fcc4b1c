//===- Linear.cpp - Linear layers -----------------------------------------===//
//
// Products as linalg.matmul with the weight read transposed, which
// loom-matmul-to-blas turns into GEMM calls, and the bias added after.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::lowering;

namespace {
struct LinearLowering : LoomPattern<LinearOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(LinearOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    Value x = L.rows(adaptor.getInput());
    int64_t m = cast<RankedTensorType>(x.getType()).getDimSize(0);
    int64_t n = op.getWeight().getType().getDimSize(0);
    Value y = L.unrows(L.matmul(x, adaptor.getWeight(), L.zeros({m, n}),
                                /*transposeA=*/false, /*transposeB=*/true),
                       op.getType());
    Value bias = adaptor.getBias();
    if (!bias)
      return {y};
    // The bias is added to the product in the output's shape, not read by
    // the GEMM as its initial output: the loop that reads the output next
    // (its rounding to bf16, the GELU) takes the add in, and the GEMM
    // overwrites its output rather than reading a broadcast bias back.
    unsigned rank = op.getType().getRank();
    return {L.generic(
        {y, bias}, y,
        {L.identity(rank), L.map(rank, {rank - 1}), L.identity(rank)},
        SmallVector<IteratorType>(rank, kPar),
        [&](OpBuilder &nb, Location l, ValueRange a) {
          linalg::YieldOp::create(
              nb, l, arith::AddFOp::create(nb, l, a[0], a[1]).getResult());
        })[0]};
  }
};

struct LinearGradLowering : LoomPattern<LinearGradOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(LinearGradOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    Value dy = L.rows(adaptor.getGrad());
    Value x = L.rows(adaptor.getInput());
    auto xShape = cast<RankedTensorType>(x.getType()).getShape();
    auto wShape = op.getWeight().getType().getShape();
    Value dx = L.matmul(dy, adaptor.getWeight(), L.zeros(xShape), false, false);
    Value dw = L.matmul(dy, x, L.zeros(wShape), true, false);
    SmallVector<Value> results = {L.unrows(dx, adaptor.getInput().getType()),
                                  dw};
    if (op.getBiasGrad())
      results.push_back(L.columnSums(dy));
    return results;
  }
};

} // namespace

void mlir::loom::populateLoomLinearToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LinearLowering, LinearGradLowering>(patterns.getContext());
}
