//===- Optimizer.cpp - Optimizer updates and norms ------------------------===//
//
// AdamW and SGD as one elementwise generic per parameter (a skipped update
// selects the values it read); the sum of squares of the global gradient
// norm as the sums of rows of every gradient, then one reduction of them
// all.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::lowering;

namespace {
/// The sum of squares of the rows of each input as a [rows, width] view,
/// then of all those partial sums, in the inputs' order: the rows are
/// independent (in parallel, each accumulated in registers), the result
/// does not depend on how many threads add them, and sums of a few
/// thousand terms lose less to rounding than one of millions. The partial
/// sums lie side by side in one vector, which one reduction adds up.
struct SumSquaresLowering : LoomPattern<SumSquaresOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(SumSquaresOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    SmallVector<Value> partials;
    int64_t total = 0;
    for (Value x : adaptor.getInputs()) {
      auto type = cast<RankedTensorType>(x.getType());
      if (type.getRank() == 0)
        x = tensor::ExpandShapeOp::create(
            L.b, L.loc, RankedTensorType::get({1, 1}, L.f32()), x,
            ArrayRef<ReassociationIndices>{});
      else if (type.getRank() == 1)
        x = tensor::ExpandShapeOp::create(
            L.b, L.loc, RankedTensorType::get({1, type.getDimSize(0)}, L.f32()),
            x, ArrayRef<ReassociationIndices>{{0, 1}});
      else
        x = L.rows(x);
      int64_t rows = cast<RankedTensorType>(x.getType()).getDimSize(0);
      partials.push_back(L.rowSum(x, rows, [&](OpBuilder &nb, ValueRange a) {
        return arith::MulFOp::create(nb, L.loc, a[0], a[0]).getResult();
      }));
      total += rows;
    }
    Value all = partials.front();
    if (partials.size() > 1) {
      all = L.empty({total});
      int64_t offset = 0;
      for (Value partial : partials) {
        int64_t rows = cast<RankedTensorType>(partial.getType()).getDimSize(0);
        all = tensor::InsertSliceOp::create(
            L.b, L.loc, partial, all,
            ArrayRef<OpFoldResult>{L.b.getIndexAttr(offset)},
            ArrayRef<OpFoldResult>{L.b.getIndexAttr(rows)},
            ArrayRef<OpFoldResult>{L.b.getIndexAttr(1)});
        offset += rows;
      }
    }
    return {L.generic(all, L.filled({}, 0.0),
                      {L.identity(1), AffineMap::get(1, 0, {}, L.ctx)}, {kRed},
                      sumBody)[0]};
  }
};

/// The values an update yields: `updated`, or where the skip condition
/// `skip` (an i1, null for none) holds, the `old` ones it read.
SmallVector<Value> unlessSkipped(OpBuilder &nb, Location l, Value skip,
                                 ValueRange updated, ValueRange old) {
  SmallVector<Value> results(updated);
  if (skip)
    for (auto [result, before] : llvm::zip(results, old))
      result = arith::SelectOp::create(nb, l, skip, before, result);
  return results;
}

/// The skip condition of an update, read once outside its loops.
Value skipCondition(Lowering &L, Value skip) {
  return skip ? tensor::ExtractOp::create(L.b, L.loc, skip, ValueRange{})
                    .getResult()
              : Value();
}

struct AdamWLowering : LoomPattern<AdamWOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(AdamWOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    OpBuilder &b = L.b;
    Location loc = L.loc;
    auto scalar = [&](Value t) -> Value {
      return tensor::ExtractOp::create(b, loc, t, ValueRange{});
    };
    Value lr = scalar(adaptor.getLr()), step = scalar(adaptor.getStep()),
          gradScale = scalar(adaptor.getGradScale());
    double beta1 = op.getBeta1().convertToDouble();
    double beta2 = op.getBeta2().convertToDouble();
    double eps = op.getEpsilon().convertToDouble();
    double decay = op.getWeightDecay().convertToDouble();
    auto correction = [&](double beta) -> Value {
      Value pow = math::PowFOp::create(b, loc, L.f32(b, beta), step);
      return arith::SubFOp::create(b, loc, L.f32(b, 1.0), pow);
    };
    Value c1 = correction(beta1), c2 = correction(beta2);
    Value skip = skipCondition(L, adaptor.getSkip());
    ValueRange r = L.elementwise(
        adaptor.getGrad(),
        ValueRange{adaptor.getParam(), adaptor.getM(), adaptor.getV()},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value g = arith::MulFOp::create(nb, l, a[0], gradScale);
          Value m = arith::AddFOp::create(
              nb, l, arith::MulFOp::create(nb, l, a[2], L.f32(nb, beta1)),
              arith::MulFOp::create(nb, l, g, L.f32(nb, 1.0 - beta1)));
          Value v = arith::AddFOp::create(
              nb, l, arith::MulFOp::create(nb, l, a[3], L.f32(nb, beta2)),
              arith::MulFOp::create(nb, l, arith::MulFOp::create(nb, l, g, g),
                                    L.f32(nb, 1.0 - beta2)));
          Value mhat = arith::DivFOp::create(nb, l, m, c1);
          Value vhat = arith::DivFOp::create(nb, l, v, c2);
          Value denom = arith::AddFOp::create(
              nb, l, math::SqrtOp::create(nb, l, vhat), L.f32(nb, eps));
          Value update = arith::AddFOp::create(
              nb, l, arith::DivFOp::create(nb, l, mhat, denom),
              arith::MulFOp::create(nb, l, a[1], L.f32(nb, decay)));
          Value p = arith::SubFOp::create(
              nb, l, a[1], arith::MulFOp::create(nb, l, lr, update));
          linalg::YieldOp::create(
              nb, l, unlessSkipped(nb, l, skip, {p, m, v}, a.slice(1, 3)));
        });
    return {r[0], r[1], r[2]};
  }
};

struct SGDLowering : LoomPattern<SGDOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(SGDOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    OpBuilder &b = L.b;
    Value lr =
        tensor::ExtractOp::create(b, L.loc, adaptor.getLr(), ValueRange{});
    Value gradScale = tensor::ExtractOp::create(
        b, L.loc, adaptor.getGradScale(), ValueRange{});
    Value skip = skipCondition(L, adaptor.getSkip());
    double momentum = op.getMomentum().convertToDouble();
    double decay = op.getWeightDecay().convertToDouble();
    ValueRange r = L.elementwise(
        adaptor.getGrad(),
        ValueRange{adaptor.getParam(), adaptor.getMomentumBuffer()},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value g = arith::AddFOp::create(
              nb, l, arith::MulFOp::create(nb, l, a[0], gradScale),
              arith::MulFOp::create(nb, l, a[1], L.f32(nb, decay)));
          Value buf = arith::AddFOp::create(
              nb, l, arith::MulFOp::create(nb, l, a[2], L.f32(nb, momentum)),
              g);
          Value p = arith::SubFOp::create(
              nb, l, a[1], arith::MulFOp::create(nb, l, lr, buf));
          linalg::YieldOp::create(
              nb, l, unlessSkipped(nb, l, skip, {p, buf}, a.slice(1, 2)));
        });
    return {r[0], r[1]};
  }
};

} // namespace

void mlir::loom::populateLoomOptimizerToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<SumSquaresLowering, AdamWLowering, SGDLowering>(
      patterns.getContext());
}
