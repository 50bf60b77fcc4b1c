//===- LayerNorm.cpp - Layer and root-mean-square normalization -----------===//
//
// Row statistics as reductions, the normalization and its gradient as
// generics over [rows, width] views.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::lowering;

namespace {
/// Row statistics of layer normalization: per row the mean and
/// 1 / sqrt(var + eps), both [N].
struct RowStats {
  Value mean, rstd;
};
RowStats layerNormStats(Lowering &L, Value x, double epsilon) {
  auto shape = cast<RankedTensorType>(x.getType()).getShape();
  int64_t n = shape[0];
  double invC = 1.0 / static_cast<double>(shape[1]);
  Value sum = L.rowSum(x, n, [](OpBuilder &, ValueRange a) { return a[0]; });
  Value centered = L.rowSum({x, sum}, n, [&](OpBuilder &nb, ValueRange a) {
    Value mean = arith::MulFOp::create(nb, L.loc, a[1], L.f32(nb, invC));
    Value d = arith::SubFOp::create(nb, L.loc, a[0], mean);
    return arith::MulFOp::create(nb, L.loc, d, d).getResult();
  });
  Value mean = L.generic(
      sum, L.empty({n}), {L.identity(1), L.identity(1)}, {kPar},
      [&](OpBuilder &nb, Location l, ValueRange a) {
        linalg::YieldOp::create(
            nb, l,
            arith::MulFOp::create(nb, l, a[0], L.f32(nb, invC)).getResult());
      })[0];
  Value rstd = L.generic(
      centered, L.empty({n}), {L.identity(1), L.identity(1)}, {kPar},
      [&](OpBuilder &nb, Location l, ValueRange a) {
        Value var = arith::MulFOp::create(nb, l, a[0], L.f32(nb, invC));
        Value s = math::SqrtOp::create(
            nb, l, arith::AddFOp::create(nb, l, var, L.f32(nb, epsilon)));
        linalg::YieldOp::create(
            nb, l, arith::DivFOp::create(nb, l, L.f32(nb, 1.0), s).getResult());
      })[0];
  return {mean, rstd};
}

struct LayerNormLowering : LoomPattern<LayerNormOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(LayerNormOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    Value x = L.rows(adaptor.getInput());
    auto shape = cast<RankedTensorType>(x.getType()).getShape();
    RowStats stats = layerNormStats(L, x, op.getEpsilon().convertToDouble());
    AffineMap all = L.map(2, {0, 1}), row = L.map(2, {0}), col = L.map(2, {1});
    Value y = L.generic(
        {x, stats.mean, stats.rstd, adaptor.getWeight(), adaptor.getBias()},
        L.empty(shape), {all, row, row, col, col, all}, {kPar, kPar},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value xhat = arith::MulFOp::create(
              nb, l, arith::SubFOp::create(nb, l, a[0], a[1]), a[2]);
          Value scaled = arith::MulFOp::create(nb, l, xhat, a[3]);
          linalg::YieldOp::create(
              nb, l, arith::AddFOp::create(nb, l, scaled, a[4]).getResult());
        })[0];
    return {L.unrows(y, op.getResult().getType()),
            L.unflatten(stats.mean, op.getMean().getType()),
            L.unflatten(stats.rstd, op.getRstd().getType())};
  }
};

struct LayerNormGradLowering : LoomPattern<LayerNormGradOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(LayerNormGradOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    Value x = L.rows(adaptor.getInput());
    Value dy = L.rows(adaptor.getGrad());
    auto shape = cast<RankedTensorType>(x.getType()).getShape();
    int64_t n = shape[0], c = shape[1];
    // The forward pass's statistics: two passes over the input fewer.
    RowStats stats = {L.flatten(adaptor.getMean()),
                      L.flatten(adaptor.getRstd())};
    AffineMap all = L.map(2, {0, 1}), row = L.map(2, {0}), col = L.map(2, {1});
    // xhat = (x - mean) * rstd and dxhat = dy * weight are computed again in
    // each loop that reads them, from operands it reads anyway or reads
    // once a row: cheaper than writing them as f32 tensors and reading them
    // back (on a GPU, from bf16 activations, a third of the bytes).
    Value mean = stats.mean, rstd = stats.rstd, weight = adaptor.getWeight();
    auto normalize = [&](OpBuilder &nb, Location l, Value xv, Value m,
                         Value r) {
      return arith::MulFOp::create(nb, l, arith::SubFOp::create(nb, l, xv, m),
                                   r)
          .getResult();
    };
    // Weight and bias gradients: column sums; loop dimensions (n, c).
    ValueRange params =
        L.generic({dy, x, mean, rstd}, ValueRange{L.zeros({c}), L.zeros({c})},
                  {all, all, row, row, col, col}, {kRed, kPar},
                  [&](OpBuilder &nb, Location l, ValueRange a) {
                    Value xhat = normalize(nb, l, a[1], a[2], a[3]);
                    Value dw = arith::AddFOp::create(
                        nb, l, a[4], arith::MulFOp::create(nb, l, a[0], xhat));
                    Value db = arith::AddFOp::create(nb, l, a[5], a[0]);
                    linalg::YieldOp::create(nb, l, ValueRange{dw, db});
                  });
    // Each row's sums of dxhat and of dxhat * xhat, in one pass (on a GPU,
    // one kernel): loop dimensions (n, c).
    ValueRange rowSums = L.generic(
        {dy, weight, x, mean, rstd}, ValueRange{L.zeros({n}), L.zeros({n})},
        {all, col, all, row, row, row, row}, {kPar, kRed},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value dxhat = arith::MulFOp::create(nb, l, a[0], a[1]);
          Value xhat = normalize(nb, l, a[2], a[3], a[4]);
          Value d = arith::AddFOp::create(nb, l, a[5], dxhat);
          Value dx = arith::AddFOp::create(
              nb, l, a[6], arith::MulFOp::create(nb, l, dxhat, xhat));
          linalg::YieldOp::create(nb, l, ValueRange{d, dx});
        });
    Value sumD = rowSums[0], sumDX = rowSums[1];
    double invC = 1.0 / static_cast<double>(c);
    Value dx =
        L.generic({dy, weight, x, mean, rstd, sumD, sumDX}, L.empty(shape),
                  {all, col, all, row, row, row, row, all}, {kPar, kPar},
                  [&](OpBuilder &nb, Location l, ValueRange a) {
                    Value dxhat = arith::MulFOp::create(nb, l, a[0], a[1]);
                    Value xhat = normalize(nb, l, a[2], a[3], a[4]);
                    Value k = L.f32(nb, invC);
                    Value t = arith::SubFOp::create(
                        nb, l, dxhat, arith::MulFOp::create(nb, l, a[5], k));
                    Value u = arith::MulFOp::create(
                        nb, l, xhat, arith::MulFOp::create(nb, l, a[6], k));
                    linalg::YieldOp::create(
                        nb, l,
                        arith::MulFOp::create(
                            nb, l, arith::SubFOp::create(nb, l, t, u), a[4])
                            .getResult());
                  })[0];
    return {L.unrows(dx, adaptor.getInput().getType()), params[0], params[1]};
  }
};

struct RmsNormLowering : LoomPattern<RmsNormOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(RmsNormOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    Value x = L.rows(adaptor.getInput());
    auto shape = cast<RankedTensorType>(x.getType()).getShape();
    int64_t n = shape[0];
    double invC = 1.0 / static_cast<double>(shape[1]);
    double epsilon = op.getEpsilon().convertToDouble();
    Value squares = L.rowSum(x, n, [&](OpBuilder &nb, ValueRange a) {
      return arith::MulFOp::create(nb, L.loc, a[0], a[0]).getResult();
    });
    Value rstd = L.elementwise(squares, [&](OpBuilder &nb, Location l,
                                            ValueRange a) {
      Value meanSquare = arith::MulFOp::create(nb, l, a[0], L.f32(nb, invC));
      Value s = math::SqrtOp::create(
          nb, l, arith::AddFOp::create(nb, l, meanSquare, L.f32(nb, epsilon)));
      linalg::YieldOp::create(
          nb, l, arith::DivFOp::create(nb, l, L.f32(nb, 1.0), s).getResult());
    });
    AffineMap all = L.map(2, {0, 1}), row = L.map(2, {0}), col = L.map(2, {1});
    // (x * rstd) * weight, in Hugging Face's order of rounding.
    Value y = L.generic(
        {x, rstd, adaptor.getWeight()}, L.empty(shape), {all, row, col, all},
        {kPar, kPar}, [&](OpBuilder &nb, Location l, ValueRange a) {
          Value xhat = arith::MulFOp::create(nb, l, a[0], a[1]);
          linalg::YieldOp::create(
              nb, l, arith::MulFOp::create(nb, l, xhat, a[2]).getResult());
        })[0];
    return {L.unrows(y, op.getResult().getType()),
            L.unflatten(rstd, op.getRstd().getType())};
  }
};

struct RmsNormGradLowering : LoomPattern<RmsNormGradOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(RmsNormGradOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    Value x = L.rows(adaptor.getInput());
    Value dy = L.rows(adaptor.getGrad());
    Value rstd = L.flatten(adaptor.getRstd()), weight = adaptor.getWeight();
    auto shape = cast<RankedTensorType>(x.getType()).getShape();
    int64_t n = shape[0], c = shape[1];
    AffineMap all = L.map(2, {0, 1}), row = L.map(2, {0}), col = L.map(2, {1});
    // Weight gradient: the column sums of dy * x * rstd; loop dimensions
    // (n, c).
    Value dw = L.generic(
        {dy, x, rstd}, L.zeros({c}), {all, all, row, col}, {kRed, kPar},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value xhat = arith::MulFOp::create(nb, l, a[1], a[2]);
          linalg::YieldOp::create(
              nb, l,
              arith::AddFOp::create(nb, l, a[3],
                                    arith::MulFOp::create(nb, l, a[0], xhat))
                  .getResult());
        })[0];
    // Each row's sum of dy * weight * x.
    Value sums = L.generic(
        {dy, weight, x}, L.zeros({n}), {all, col, all, row}, {kPar, kRed},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value dxhat = arith::MulFOp::create(nb, l, a[0], a[1]);
          linalg::YieldOp::create(
              nb, l,
              arith::AddFOp::create(nb, l, a[3],
                                    arith::MulFOp::create(nb, l, dxhat, a[2]))
                  .getResult());
        })[0];
    // dx = rstd * (dy * weight) - x * rstd^3 * sum / C.
    double invC = 1.0 / static_cast<double>(c);
    Value dx = L.generic(
        {dy, weight, x, rstd, sums}, L.empty(shape),
        {all, col, all, row, row, all}, {kPar, kPar},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value r = a[3];
          Value dxhat = arith::MulFOp::create(nb, l, a[0], a[1]);
          Value r3 = arith::MulFOp::create(nb, l, r,
                                           arith::MulFOp::create(nb, l, r, r));
          Value k = arith::MulFOp::create(
              nb, l, arith::MulFOp::create(nb, l, a[4], r3), L.f32(nb, invC));
          linalg::YieldOp::create(
              nb, l,
              arith::SubFOp::create(nb, l,
                                    arith::MulFOp::create(nb, l, dxhat, r),
                                    arith::MulFOp::create(nb, l, a[2], k))
                  .getResult());
        })[0];
    return {L.unrows(dx, adaptor.getInput().getType()), dw};
  }
};

} // namespace

void mlir::loom::populateLoomLayerNormToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LayerNormLowering, LayerNormGradLowering, RmsNormLowering,
               RmsNormGradLowering>(patterns.getContext());
}
