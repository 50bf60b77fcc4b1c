//===- Linear.cpp - Linear layers -----------------------------------------===//
//
// Products as linalg.matmul with the weight read transposed, which
// loom-matmul-to-blas turns into SGEMM calls.
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
    Value init;
    if (Value bias = adaptor.getBias())
      init =
          L.generic(bias, L.empty({m, n}), {L.map(2, {1}), L.map(2, {0, 1})},
                    {kPar, kPar}, [&](OpBuilder &nb, Location l, ValueRange a) {
                      linalg::YieldOp::create(nb, l, a[0]);
                    })[0];
    else
      init = L.zeros({m, n});
    Value y = L.matmul(x, adaptor.getWeight(), init, /*transposeA=*/false,
                       /*transposeB=*/true);
    return {L.unrows(y, op.getType())};
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
