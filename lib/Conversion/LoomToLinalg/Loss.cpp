//===- Loss.cpp - Softmax cross-entropy -----------------------------------===//
//
// The mean loss over the first `num_classes` columns of the logits, and its
// gradient, from per-row maxima and sums of exponentials.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::lowering;

namespace {
/// Per row of [N, V] logits (the first `classes` columns): the maximum and
/// the sum of exp(x - max).
struct SoftmaxStats {
  Value logits, max, sumExp;
};
SoftmaxStats softmaxStats(Lowering &L, Value logits2, int64_t classes) {
  auto shape = cast<RankedTensorType>(logits2.getType()).getShape();
  int64_t n = shape[0];
  Value x = logits2;
  if (classes < shape[1])
    x = tensor::ExtractSliceOp::create(
        L.b, L.loc, logits2,
        ArrayRef<OpFoldResult>{L.b.getIndexAttr(0), L.b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{L.b.getIndexAttr(n), L.b.getIndexAttr(classes)},
        ArrayRef<OpFoldResult>{L.b.getIndexAttr(1), L.b.getIndexAttr(1)});
  Value max =
      L.generic(x, L.filled({n}, -INFINITY), {L.map(2, {0, 1}), L.map(2, {0})},
                {kPar, kRed}, [&](OpBuilder &nb, Location l, ValueRange a) {
                  linalg::YieldOp::create(nb, l, runningMax(nb, l, a[0], a[1]));
                })[0];
  Value sumExp = L.rowSum({x, max}, n, [&](OpBuilder &nb, ValueRange a) {
    return math::ExpOp::create(nb, L.loc,
                               arith::SubFOp::create(nb, L.loc, a[0], a[1]))
        .getResult();
  });
  return {x, max, sumExp};
}

/// softmaxStats' statistics from the runtime (loom.softmax_stats), reading
/// the logits as stored: `op`'s bf16 or f16 logits, not the copy widened
/// for the loops (`logits2`, its rows, which the result keeps for the
/// loops that read the logits too).
template <typename OpTy>
SoftmaxStats runtimeSoftmaxStats(Lowering &L, OpTy op, Value logits2,
                                 int64_t classes) {
  Value stored = logits2;
  // An exact widening: bf16 or f16 to f32, unscaled.
  auto widened = op.getLogits().template getDefiningOp<ConvertOp>();
  if (widened && !widened.getScale() &&
      getElementTypeOrSelf(widened.getType()).isF32() &&
      isa<BFloat16Type, Float16Type>(
          getElementTypeOrSelf(widened.getInput().getType())))
    if (Value narrow = L.lowered(widened.getInput()))
      stored = L.rows(narrow);
  int64_t n = cast<RankedTensorType>(logits2.getType()).getDimSize(0);
  auto type = RankedTensorType::get({n}, L.b.getF32Type());
  auto stats = SoftmaxStatsOp::create(L.b, L.loc, type, type, stored,
                                      L.b.getI64IntegerAttr(classes));
  return {logits2, stats.getMax(), stats.getSumExp()};
}

/// A row statistic of this rank's part of the logits summed or maximized
/// over the group that shares the vocabulary.
template <typename OpTy>
Value overGroup(Lowering &L, OpTy op, Value local, shard::ReductionKind kind) {
  return shard::AllReduceOp::create(
      L.b, L.loc, local.getType(), op.getGridAttr(), op.getGridAxesAttr(),
      local, shard::ReductionKindAttr::get(L.ctx, kind));
}

/// The softmax statistics of whole rows whose columns the ranks of a group
/// share (vocabulary parallelism): this rank holds [N, V / ranks] logits
/// from column `start` on. The maxima and the sums of exp(x - max) of the
/// columns below `classes` are all-reduced over the group.
template <typename OpTy>
SoftmaxStats partSoftmaxStats(Lowering &L, OpTy op, Value logits2,
                              Value start) {
  int64_t n = cast<RankedTensorType>(logits2.getType()).getDimSize(0);
  Value classes =
      arith::ConstantIndexOp::create(L.b, L.loc, op.getNumClasses());
  auto isClass = [&](OpBuilder &nb, Location l) {
    Value v = arith::AddIOp::create(nb, l, start, L.index(nb, 1));
    return arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ult, v, classes);
  };
  Value localMax = L.generic(
      logits2, L.filled({n}, -INFINITY), {L.map(2, {0, 1}), L.map(2, {0})},
      {kPar, kRed}, [&](OpBuilder &nb, Location l, ValueRange a) {
        linalg::YieldOp::create(
            nb, l,
            arith::SelectOp::create(nb, l, isClass(nb, l),
                                    runningMax(nb, l, a[0], a[1]), a[1])
                .getResult());
      })[0];
  Value max = overGroup(L, op, localMax, shard::ReductionKind::Max);
  Value localSum =
      L.rowSum({logits2, max}, n, [&](OpBuilder &nb, ValueRange a) {
        Value e = math::ExpOp::create(
            nb, L.loc, arith::SubFOp::create(nb, L.loc, a[0], a[1]));
        return arith::SelectOp::create(nb, L.loc, isClass(nb, L.loc), e,
                                       L.f32(nb, 0.0))
            .getResult();
      });
  return {logits2, max, overGroup(L, op, localSum, shard::ReductionKind::Sum)};
}

/// Each row's target logit, from the one rank whose part of the vocabulary
/// holds the target's column, summed over the group.
Value partTargetLogits(Lowering &L, CrossEntropyOp op, Value logits2,
                       Value targets, Value start) {
  auto shape = cast<RankedTensorType>(logits2.getType()).getShape();
  AffineMap row = L.map(1, {0});
  Value local =
      L.generic(targets, L.empty({shape[0]}), {row, row}, {kPar},
                [&](OpBuilder &nb, Location l, ValueRange a) {
                  auto [held, column] =
                      L.indexInPart(nb, L.toIndex(nb, a[0]), start, shape[1]);
                  Value x = tensor::ExtractOp::create(
                      nb, l, logits2, ValueRange{L.index(nb, 0), column});
                  linalg::YieldOp::create(
                      nb, l,
                      arith::SelectOp::create(nb, l, held, x, L.f32(nb, 0.0))
                          .getResult());
                })[0];
  return overGroup(L, op, local, shard::ReductionKind::Sum);
}

/// The loss's statistics of whole rows: the runtime's or loops.
template <typename OpTy>
SoftmaxStats wholeRowStats(Lowering &L, OpTy op, Value logits2, bool runtime) {
  return runtime ? runtimeSoftmaxStats(L, op, logits2, op.getNumClasses())
                 : softmaxStats(L, logits2, op.getNumClasses());
}

struct CrossEntropyLowering : LoomPattern<CrossEntropyOp> {
  CrossEntropyLowering(MLIRContext *context, bool runtime)
      : LoomPattern(context), runtime(runtime) {}
  bool runtime;
  SmallVector<Value> lower(CrossEntropyOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    Value logits = L.rows(adaptor.getLogits());
    Value targets = L.flatten(adaptor.getTargets());
    int64_t n = cast<RankedTensorType>(logits.getType()).getDimSize(0);
    double invN = 1.0 / static_cast<double>(n);
    Value init = L.filled({}, 0.0);
    AffineMap row = L.map(1, {0});
    if (Value start = adaptor.getVocabStart()) {
      SoftmaxStats s = partSoftmaxStats(L, op, logits, start);
      Value targetLogits = partTargetLogits(L, op, logits, targets, start);
      return {L.generic(
          {s.max, s.sumExp, targetLogits}, init,
          {row, row, row, AffineMap::get(1, 0, {}, L.ctx)}, {kRed},
          [&](OpBuilder &nb, Location l, ValueRange a) {
            Value lse = arith::AddFOp::create(
                nb, l, math::LogOp::create(nb, l, a[1]), a[0]);
            Value term = arith::SubFOp::create(nb, l, lse, a[2]);
            Value scaled = arith::MulFOp::create(nb, l, term, L.f32(nb, invN));
            linalg::YieldOp::create(
                nb, l, arith::AddFOp::create(nb, l, a[3], scaled).getResult());
          })[0]};
    }
    SoftmaxStats s = wholeRowStats(L, op, logits, runtime);
    return {L.generic(
        {s.max, s.sumExp, targets}, init,
        {row, row, row, AffineMap::get(1, 0, {}, L.ctx)}, {kRed},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value x = tensor::ExtractOp::create(
              nb, l, logits, ValueRange{L.index(nb, 0), L.toIndex(nb, a[2])});
          Value lse = arith::AddFOp::create(
              nb, l, math::LogOp::create(nb, l, a[1]), a[0]);
          Value term = arith::SubFOp::create(nb, l, lse, x);
          Value scaled = arith::MulFOp::create(nb, l, term, L.f32(nb, invN));
          linalg::YieldOp::create(
              nb, l, arith::AddFOp::create(nb, l, a[3], scaled).getResult());
        })[0]};
  }
};

struct CrossEntropyGradLowering : LoomPattern<CrossEntropyGradOp> {
  CrossEntropyGradLowering(MLIRContext *context, bool runtime)
      : LoomPattern(context), runtime(runtime) {}
  bool runtime;
  SmallVector<Value> lower(CrossEntropyGradOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    Value logits = L.rows(adaptor.getLogits());
    Value targets = L.flatten(adaptor.getTargets());
    auto shape = cast<RankedTensorType>(logits.getType()).getShape();
    int64_t classes = op.getNumClasses();
    Value start = adaptor.getVocabStart();
    SoftmaxStats s = start ? partSoftmaxStats(L, op, logits, start)
                           : wholeRowStats(L, op, logits, runtime);
    Value dloss =
        tensor::ExtractOp::create(L.b, L.loc, adaptor.getGrad(), ValueRange{});
    Value factor = arith::MulFOp::create(
        L.b, L.loc, dloss, L.f32(L.b, 1.0 / static_cast<double>(shape[0])));
    AffineMap all = L.map(2, {0, 1}), row = L.map(2, {0});
    // The gradient is written over the logits, each element from the one
    // it replaces (read as the generic's output), which bufferization does
    // in place where nothing reads the logits later (the loss is the
    // step's last use of them): at GPT-2's vocabulary the logits are the
    // largest tensor of the step, and a second one of their size would be
    // its peak.
    Value dlogits = L.generic(
        {s.max, s.sumExp, targets}, logits, {row, row, row, all}, {kPar, kPar},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          // The column's index in the whole vocabulary.
          Value v = L.index(nb, 1);
          if (start)
            v = arith::AddIOp::create(nb, l, start, v);
          Value p = arith::DivFOp::create(
              nb, l,
              math::ExpOp::create(nb, l,
                                  arith::SubFOp::create(nb, l, a[3], a[0])),
              a[1]);
          Value isTarget = arith::CmpIOp::create(
              nb, l, arith::CmpIPredicate::eq, v, L.toIndex(nb, a[2]));
          Value hot = arith::SelectOp::create(nb, l, isTarget, L.f32(nb, 1.0),
                                              L.f32(nb, 0.0));
          Value g = arith::MulFOp::create(
              nb, l, arith::SubFOp::create(nb, l, p, hot), factor);
          Value real = arith::CmpIOp::create(
              nb, l, arith::CmpIPredicate::ult, v,
              arith::ConstantIndexOp::create(nb, l, classes));
          linalg::YieldOp::create(
              nb, l,
              arith::SelectOp::create(nb, l, real, g, L.f32(nb, 0.0))
                  .getResult());
        })[0];
    return {L.unrows(dlogits, op.getType())};
  }
};

} // namespace

void mlir::loom::populateLoomLossToLinalgPatterns(RewritePatternSet &patterns,
                                                  bool runtimeSoftmaxStats) {
  patterns.add<CrossEntropyLowering, CrossEntropyGradLowering>(
      patterns.getContext(), runtimeSoftmaxStats);
}
