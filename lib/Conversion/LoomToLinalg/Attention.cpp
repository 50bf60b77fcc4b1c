//===- Attention.cpp - Causal multi-head attention ------------------------===//
//
// One linalg.matmul per (batch, head) on strided views for the five
// contractions, and generics for the causal softmax and its gradient; the
// rotary position embedding of the queries and keys as a generic.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include <cmath>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::lowering;

namespace {
/// Query, key and value views [B, T, NH, hs] of a fused [B, T, 3C] tensor.
struct Heads {
  Value q, k, v;
  int64_t batch, seq, heads, headDim;
};
/// Where part `which` (0: queries, 1: keys, 2: values) of a fused
/// [B, T, 3, NH, hs] tensor lies.
struct QkvPart {
  SmallVector<OpFoldResult> offsets, sizes, strides;
  QkvPart(OpBuilder &b, int64_t which, int64_t batch, int64_t seq,
          int64_t heads, int64_t headDim)
      : offsets(5, b.getIndexAttr(0)),
        sizes({b.getIndexAttr(batch), b.getIndexAttr(seq), b.getIndexAttr(1),
               b.getIndexAttr(heads), b.getIndexAttr(headDim)}),
        strides(5, b.getIndexAttr(1)) {
    offsets[2] = b.getIndexAttr(which);
  }
};

Heads splitHeads(Lowering &L, Value qkv, int64_t numHeads) {
  auto shape = cast<RankedTensorType>(qkv.getType()).getShape();
  Heads h{{}, {}, {}, shape[0], shape[1], numHeads, shape[2] / 3 / numHeads};
  auto type5 =
      RankedTensorType::get({h.batch, h.seq, 3, h.heads, h.headDim}, L.f32());
  Value qkv5 = tensor::ExpandShapeOp::create(
      L.b, L.loc, type5, qkv,
      ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3, 4}});
  auto type4 =
      RankedTensorType::get({h.batch, h.seq, h.heads, h.headDim}, L.f32());
  auto slice = [&](int64_t which) -> Value {
    QkvPart part(L.b, which, h.batch, h.seq, h.heads, h.headDim);
    return tensor::ExtractSliceOp::create(L.b, L.loc, type4, qkv5, part.offsets,
                                          part.sizes, part.strides);
  };
  h.q = slice(0);
  h.k = slice(1);
  h.v = slice(2);
  return h;
}

/// How a 4-d attention tensor holds the matrix of one (batch, head) pair:
/// [B, T, NH, D] tensors (queries, keys, values, outputs) hold a T x D matrix
/// at [b, :, h, :]; [B, NH, T, T] tensors (scores, probabilities) a T x T
/// matrix at [b, h, :, :].
enum class HeadLayout { TokensFirst, HeadsFirst };

/// The 2-d matrix of head `head` of batch `batch` in `t`.
SmallVector<OpFoldResult> headOffsets(OpBuilder &b, HeadLayout layout,
                                      Value batch, Value head) {
  OpFoldResult zero = b.getIndexAttr(0);
  if (layout == HeadLayout::HeadsFirst)
    return {batch, head, zero, zero};
  return {batch, zero, head, zero};
}
SmallVector<OpFoldResult> headSizes(OpBuilder &b, HeadLayout layout,
                                    ArrayRef<int64_t> shape) {
  if (layout == HeadLayout::HeadsFirst)
    return {b.getIndexAttr(1), b.getIndexAttr(1), b.getIndexAttr(shape[2]),
            b.getIndexAttr(shape[3])};
  return {b.getIndexAttr(1), b.getIndexAttr(shape[1]), b.getIndexAttr(1),
          b.getIndexAttr(shape[3])};
}

/// One attention operand: a 4-d tensor, how it holds each head's matrix,
/// and whether the product reads that matrix transposed.
struct HeadOperand {
  Value tensor;
  HeadLayout layout;
  bool transposed = false;
};

/// For every (batch, head) pair, the product of the two operands' matrices
/// accumulated into the matching matrix of `init`. Each product is a
/// linalg.matmul on strided 2-d views, which become one batched GEMM of the
/// runtime: a single 5-d contraction would run as generated loops that
/// stride through memory along the reduction.
Value perHeadMatmul(Lowering &L, const Heads &h, HeadOperand lhs,
                    HeadOperand rhs, Value init, HeadLayout initLayout) {
  OpBuilder &b = L.b;
  Location loc = L.loc;
  // The pairs are independent: an scf.forall over (batch, head), each
  // iteration writing its own slice of `init` in place, which
  // loom-matmul-to-blas makes one batched GEMM.
  auto loop = scf::ForallOp::create(
      b, loc,
      ArrayRef<OpFoldResult>{b.getIndexAttr(h.batch), b.getIndexAttr(h.heads)},
      ValueRange{init}, /*mapping=*/std::nullopt);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value batch = loop.getInductionVar(0);
  Value head = loop.getInductionVar(1);
  SmallVector<OpFoldResult> unit(4, b.getIndexAttr(1));
  auto matrix = [&](Value t, HeadLayout layout) -> Value {
    auto type = cast<RankedTensorType>(t.getType());
    auto shape = type.getShape();
    int64_t rows = layout == HeadLayout::HeadsFirst ? shape[2] : shape[1];
    return tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({rows, shape[3]}, L.f32()), t,
        headOffsets(b, layout, batch, head), headSizes(b, layout, shape), unit);
  };
  Value acc = loop.getRegionIterArgs()[0];
  Value product =
      L.matmul(matrix(lhs.tensor, lhs.layout), matrix(rhs.tensor, rhs.layout),
               matrix(acc, initLayout), lhs.transposed, rhs.transposed);
  b.setInsertionPointToStart(loop.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(
      b, loc, product, acc, headOffsets(b, initLayout, batch, head),
      headSizes(b, initLayout,
                cast<RankedTensorType>(acc.getType()).getShape()),
      unit);
  return loop.getResult(0);
}

/// out[b, i, h, d] = sum_j lhs(b, h, i, j) * rhs[b, j, h, d], where lhs is
/// indexed [b, h, i, j] or, with `transposeLhs`, [b, h, j, i]. The products
/// of attention with its probabilities and their gradients all have this
/// form.
Value headContract(Lowering &L, Value lhs, Value rhs, bool transposeLhs,
                   const Heads &h) {
  return perHeadMatmul(L, h, {lhs, HeadLayout::HeadsFirst, transposeLhs},
                       {rhs, HeadLayout::TokensFirst},
                       L.zeros({h.batch, h.seq, h.heads, h.headDim}),
                       HeadLayout::TokensFirst);
}

/// scores[b, h, t, s] = sum_d lhs[b, t, h, d] rhs[b, s, h, d]: query-key
/// scores, and the gradient of the probabilities from the output's.
Value headScores(Lowering &L, Value lhs, Value rhs, const Heads &h) {
  return perHeadMatmul(L, h, {lhs, HeadLayout::TokensFirst},
                       {rhs, HeadLayout::TokensFirst, /*transposed=*/true},
                       L.zeros({h.batch, h.heads, h.seq, h.seq}),
                       HeadLayout::HeadsFirst);
}

/// Whether key (dimension 3) is at or before query (dimension 2) of an
/// attention generic's iteration.
Value isCausal(Lowering &L, OpBuilder &nb) {
  return arith::CmpIOp::create(nb, L.loc, arith::CmpIPredicate::ule,
                               L.index(nb, 3), L.index(nb, 2));
}

/// Each query's log-sum-exp of its scaled causal `scores` [B, NH, T, T]:
/// [B, NH, T].
Value logSumExp(Lowering &L, const Heads &h, Value scores) {
  int64_t B = h.batch, NH = h.heads, T = h.seq;
  double scale = 1.0 / std::sqrt(static_cast<double>(h.headDim));
  AffineMap all4 = L.identity(4), rows4 = L.map(4, {0, 1, 2});
  Value max = L.generic(
      scores, L.filled({B, NH, T}, -INFINITY), {all4, rows4},
      {kPar, kPar, kPar, kRed}, [&](OpBuilder &nb, Location l, ValueRange a) {
        // Masking the score rather than the running maximum keeps the
        // reduction a plain maximum, which vectorizes.
        Value masked = arith::SelectOp::create(nb, l, isCausal(L, nb), a[0],
                                               L.f32(nb, -INFINITY));
        linalg::YieldOp::create(nb, l, runningMax(nb, l, masked, a[1]));
      })[0];
  Value sums = L.generic(
      {scores, max}, L.zeros({B, NH, T}), {all4, rows4, rows4},
      {kPar, kPar, kPar, kRed}, [&](OpBuilder &nb, Location l, ValueRange a) {
        Value d = arith::SubFOp::create(nb, l, a[0], a[1]);
        Value e = math::ExpOp::create(
            nb, l, arith::MulFOp::create(nb, l, d, L.f32(nb, scale)));
        Value masked =
            arith::SelectOp::create(nb, l, isCausal(L, nb), e, L.f32(nb, 0.0));
        linalg::YieldOp::create(
            nb, l, arith::AddFOp::create(nb, l, a[2], masked).getResult());
      })[0];
  AffineMap rows3 = L.identity(3);
  return L.generic(
      {max, sums}, L.empty({B, NH, T}), {rows3, rows3, rows3},
      {kPar, kPar, kPar}, [&](OpBuilder &nb, Location l, ValueRange a) {
        Value scaled = arith::MulFOp::create(nb, l, a[0], L.f32(nb, scale));
        Value log = math::LogOp::create(nb, l, a[1]);
        linalg::YieldOp::create(
            nb, l, arith::AddFOp::create(nb, l, scaled, log).getResult());
      })[0];
}

/// Causal attention probabilities P [B, NH, T, T] from the scores and each
/// query's log-sum-exp: exp(scale * score - lse), zero above the diagonal.
/// The forward and the backward pass both compute them so, so that the
/// gradient is the one of the probabilities the output was made of.
Value attentionProbs(Lowering &L, const Heads &h, Value scores, Value lse) {
  int64_t B = h.batch, NH = h.heads, T = h.seq;
  double scale = 1.0 / std::sqrt(static_cast<double>(h.headDim));
  AffineMap all4 = L.identity(4), rows4 = L.map(4, {0, 1, 2});
  return L.generic(
      {scores, lse}, L.empty({B, NH, T, T}), {all4, rows4, all4},
      {kPar, kPar, kPar, kPar}, [&](OpBuilder &nb, Location l, ValueRange a) {
        Value scaled = arith::MulFOp::create(nb, l, a[0], L.f32(nb, scale));
        Value e = math::ExpOp::create(
            nb, l, arith::SubFOp::create(nb, l, scaled, a[1]));
        linalg::YieldOp::create(
            nb, l,
            arith::SelectOp::create(nb, l, isCausal(L, nb), e, L.f32(nb, 0.0))
                .getResult());
      })[0];
}

struct CausalAttentionLowering : LoomPattern<CausalAttentionOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(CausalAttentionOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    Heads h = splitHeads(L, adaptor.getQkv(), op.getNumHeads());
    Value scores = headScores(L, h.q, h.k, h);
    Value lse = logSumExp(L, h, scores);
    Value probs = attentionProbs(L, h, scores, lse);
    Value y4 = headContract(L, probs, h.v, /*transposeLhs=*/false, h);
    return {tensor::CollapseShapeOp::create(
                L.b, L.loc, op.getResult().getType(), y4,
                ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}}),
            lse};
  }
};

struct CausalAttentionGradLowering : LoomPattern<CausalAttentionGradOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(CausalAttentionGradOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    Heads h = splitHeads(L, adaptor.getQkv(), op.getNumHeads());
    int64_t B = h.batch, NH = h.heads, T = h.seq;
    double scale = 1.0 / std::sqrt(static_cast<double>(h.headDim));
    Value probs =
        attentionProbs(L, h, headScores(L, h.q, h.k, h), adaptor.getLse());
    auto type4 = RankedTensorType::get({B, T, NH, h.headDim}, L.f32());
    Value dy = tensor::ExpandShapeOp::create(
        L.b, L.loc, type4, adaptor.getGrad(),
        ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}});
    Value dv = headContract(L, probs, dy, /*transposeLhs=*/true, h);
    Value dprobs = headScores(L, dy, h.v, h);
    AffineMap all4 = L.identity(4), rows4 = L.map(4, {0, 1, 2});
    Value rowDot =
        L.generic({probs, dprobs}, L.zeros({B, NH, T}), {all4, all4, rows4},
                  {kPar, kPar, kPar, kRed}, multiplyAccumulateBody)[0];
    // Softmax backward, with the score scale folded in.
    Value dscores = L.generic(
        {probs, dprobs, rowDot}, L.empty({B, NH, T, T}),
        {all4, all4, rows4, all4}, {kPar, kPar, kPar, kPar},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value d = arith::SubFOp::create(nb, l, a[1], a[2]);
          Value g = arith::MulFOp::create(nb, l, a[0], d);
          linalg::YieldOp::create(
              nb, l,
              arith::MulFOp::create(nb, l, g, L.f32(nb, scale)).getResult());
        })[0];
    Value dq = headContract(L, dscores, h.k, /*transposeLhs=*/false, h);
    Value dk = headContract(L, dscores, h.q, /*transposeLhs=*/true, h);

    auto type5 = RankedTensorType::get({B, T, 3, NH, h.headDim}, L.f32());
    Value dqkv = tensor::EmptyOp::create(L.b, L.loc, type5.getShape(), L.f32());
    SmallVector<Value> parts = {dq, dk, dv};
    for (auto [which, grad] : llvm::enumerate(parts)) {
      QkvPart part(L.b, which, B, T, NH, h.headDim);
      dqkv = tensor::InsertSliceOp::create(L.b, L.loc, grad, dqkv, part.offsets,
                                           part.sizes, part.strides);
    }
    return {tensor::CollapseShapeOp::create(
        L.b, L.loc, op.getQkvGrad().getType(), dqkv,
        ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3, 4}})};
  }
};

/// The sizes of grouped-query attention's tensors: batch B, sequence T, G
/// key/value groups of R query heads each, head width D, from the grouped
/// [B, T, G (R + 2) D] type.
struct GroupSizes {
  int64_t B, T, G, R, D;
  GroupSizes(RankedTensorType grouped, int64_t numHeads, int64_t kvHeads)
      : B(grouped.getDimSize(0)), T(grouped.getDimSize(1)), G(kvHeads),
        R(numHeads / kvHeads), D(grouped.getDimSize(2) / (G * (R + 2))) {}
};

/// Every head's queries, keys and values [B, T, 3, G, R, D] from the groups
/// [B, T, G, R + 2, D]: the queries moved, each group's key and value read
/// once for each of its R query heads.
struct GroupQkvLowering : LoomPattern<GroupQkvOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(GroupQkvOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    // Named, not bound: the loops' bodies capture them.
    GroupSizes sizes(op.getQkv().getType(), op.getNumHeads(), op.getKvHeads());
    int64_t B = sizes.B, T = sizes.T, G = sizes.G, R = sizes.R, D = sizes.D;
    auto groupedType = RankedTensorType::get({B, T, G, R + 2, D}, L.f32());
    ReassociationIndices groupedLead[] = {{0}, {1}, {2, 3, 4}};
    Value grouped = tensor::ExpandShapeOp::create(
        L.b, L.loc, groupedType, adaptor.getQkv(), groupedLead);
    // Loop dimensions (b, t, part, g, j, d); the queries' head j of group
    // g, and the group's key (head R) or value (head R + 1).
    auto at = [&](std::optional<int64_t> head) {
      SmallVector<AffineExpr> exprs;
      for (unsigned d : {0u, 1u, 3u})
        exprs.push_back(getAffineDimExpr(d, L.ctx));
      exprs.push_back(head ? getAffineConstantExpr(*head, L.ctx)
                           : getAffineDimExpr(4, L.ctx));
      exprs.push_back(getAffineDimExpr(5, L.ctx));
      return AffineMap::get(6, 0, exprs, L.ctx);
    };
    // The queries' heads alone, so that j's range is theirs.
    auto b = [&](int64_t v) -> OpFoldResult { return L.b.getIndexAttr(v); };
    Value queries = tensor::ExtractSliceOp::create(
        L.b, L.loc, grouped,
        ArrayRef<OpFoldResult>{b(0), b(0), b(0), b(0), b(0)},
        ArrayRef<OpFoldResult>{b(B), b(T), b(G), b(R), b(D)},
        ArrayRef<OpFoldResult>{b(1), b(1), b(1), b(1), b(1)});
    Value all = L.generic(
        {queries, grouped, grouped}, L.empty({B, T, 3, G, R, D}),
        {at(std::nullopt), at(R), at(R + 1), L.identity(6)},
        SmallVector<IteratorType>(6, kPar),
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value part = L.index(nb, 2);
          auto is = [&](int64_t which) {
            return arith::CmpIOp::create(
                nb, l, arith::CmpIPredicate::eq, part,
                arith::ConstantIndexOp::create(nb, l, which));
          };
          Value kv = arith::SelectOp::create(nb, l, is(1), a[1], a[2]);
          linalg::YieldOp::create(
              nb, l,
              arith::SelectOp::create(nb, l, is(0), a[0], kv).getResult());
        })[0];
    ReassociationIndices lead[] = {{0}, {1}, {2, 3, 4, 5}};
    return {tensor::CollapseShapeOp::create(L.b, L.loc, all, lead)};
  }
};

/// The groups' cotangents [B, T, G, R + 2, D]: the queries' moved back, each
/// group's key and value cotangents summed over its R query heads (loop
/// dimension j, a reduction that the queries' rows take at j = 0 only).
struct GroupQkvGradLowering : LoomPattern<GroupQkvGradOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(GroupQkvGradOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    GroupSizes sizes(op.getQkvGrad().getType(), op.getNumHeads(),
                     op.getKvHeads());
    int64_t B = sizes.B, T = sizes.T, G = sizes.G, R = sizes.R, D = sizes.D;
    auto allType = RankedTensorType::get({B, T, 3, G, R, D}, L.f32());
    ReassociationIndices allLead[] = {{0}, {1}, {2, 3, 4, 5}};
    Value all = tensor::ExpandShapeOp::create(L.b, L.loc, allType,
                                              adaptor.getGrad(), allLead);
    // Loop dimensions (b, t, g, s, d, j): slot s of group g.
    // The queries' cotangents at (b, t, g, j, d) give the loops j's range;
    // the body reads the element it needs itself.
    AffineMap queryAt = AffineMap::get(
        6, 0,
        {getAffineDimExpr(0, L.ctx), getAffineDimExpr(1, L.ctx),
         getAffineConstantExpr(0, L.ctx), getAffineDimExpr(2, L.ctx),
         getAffineDimExpr(5, L.ctx), getAffineDimExpr(4, L.ctx)},
        L.ctx);
    Value sums = L.generic(
        all, L.zeros({B, T, G, R + 2, D}), {queryAt, L.map(6, {0, 1, 2, 3, 4})},
        {kPar, kPar, kPar, kPar, kPar, kRed},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value s = L.index(nb, 3), j = L.index(nb, 5);
          auto constant = [&](int64_t v) {
            return arith::ConstantIndexOp::create(nb, l, v);
          };
          Value isQuery = arith::CmpIOp::create(
              nb, l, arith::CmpIPredicate::ult, s, constant(R));
          Value part = arith::SelectOp::create(
              nb, l, isQuery, constant(0),
              arith::SubIOp::create(nb, l, s, constant(R - 1)));
          Value head = arith::SelectOp::create(nb, l, isQuery, s, j);
          Value v = tensor::ExtractOp::create(
              nb, l, all,
              ValueRange{L.index(nb, 0), L.index(nb, 1), part, L.index(nb, 2),
                         head, L.index(nb, 4)});
          Value counted = arith::OrIOp::create(
              nb, l,
              arith::CmpIOp::create(nb, l, arith::CmpIPredicate::uge, s,
                                    constant(R)),
              arith::CmpIOp::create(nb, l, arith::CmpIPredicate::eq, j,
                                    constant(0)));
          Value term =
              arith::SelectOp::create(nb, l, counted, v, L.f32(nb, 0.0));
          linalg::YieldOp::create(
              nb, l, arith::AddFOp::create(nb, l, a[1], term).getResult());
        })[0];
    ReassociationIndices lead[] = {{0}, {1}, {2, 3, 4}};
    return {tensor::CollapseShapeOp::create(L.b, L.loc, sums, lead)};
  }
};

/// Rotates the queries and keys of each head, channel j with channel
/// j + D/2, through a view [B, T, 3, NH, 2, D/2] of the fused tensor (or
/// [B, T, G, R + 2, 2, D/2] of the grouped one) whose fifth dimension
/// picks the half of the head.
struct RotaryLowering : LoomPattern<RotaryOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(RotaryOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    auto shape = op.getType().getShape();
    int64_t B = shape[0], T = shape[1], NH = op.getNumHeads();
    std::optional<int64_t> kvHeads = op.getKvHeads();
    int64_t D = shape[2] / getQkvRowHeads(NH, kvHeads), half = D / 2;
    // The view's dimensions 2 and 3, and where in them the values lie:
    // part 2 of every head's, or slot R + 1 of each group.
    int64_t outer = kvHeads ? *kvHeads : 3;
    int64_t inner = kvHeads ? NH / *kvHeads + 2 : NH;
    unsigned valueDim = kvHeads ? 3 : 2;
    int64_t valueAt = kvHeads ? inner - 1 : 2;
    auto viewType =
        RankedTensorType::get({B, T, outer, inner, 2, half}, L.f32());
    ReassociationIndices lead[] = {{0}, {1}, {2, 3, 4, 5}};
    Value x = tensor::ExpandShapeOp::create(L.b, L.loc, viewType,
                                            adaptor.getQkv(), lead);
    auto [cosines, sines] = angleTables(L, op, T, D);
    // Loop dimensions (b, t, part, head, half, j), or (b, t, group, slot,
    // half, j).
    auto halfMap = [&](int64_t which) {
      SmallVector<AffineExpr> exprs;
      for (unsigned d = 0; d < 6; ++d)
        exprs.push_back(d == 4 ? getAffineConstantExpr(which, L.ctx)
                               : getAffineDimExpr(d, L.ctx));
      return AffineMap::get(6, 0, exprs, L.ctx);
    };
    AffineMap angle = L.map(6, {1, 5});
    Value rotated = L.generic(
        {x, x, cosines, sines}, L.empty(viewType.getShape()),
        {halfMap(0), halfMap(1), angle, angle, L.identity(6)},
        SmallVector<IteratorType>(6, kPar),
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value first = a[0], second = a[1], c = a[2], s = a[3];
          if (op.getInverse())
            s = arith::NegFOp::create(nb, l, s);
          Value isFirst = arith::CmpIOp::create(
              nb, l, arith::CmpIPredicate::eq, L.index(nb, 4),
              arith::ConstantIndexOp::create(nb, l, 0));
          // (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin).
          Value turnedFirst = arith::SubFOp::create(
              nb, l, arith::MulFOp::create(nb, l, first, c),
              arith::MulFOp::create(nb, l, second, s));
          Value turnedSecond = arith::AddFOp::create(
              nb, l, arith::MulFOp::create(nb, l, second, c),
              arith::MulFOp::create(nb, l, first, s));
          Value turned = arith::SelectOp::create(nb, l, isFirst, turnedFirst,
                                                 turnedSecond);
          Value kept = arith::SelectOp::create(nb, l, isFirst, first, second);
          Value isValue = arith::CmpIOp::create(
              nb, l, arith::CmpIPredicate::eq, L.index(nb, valueDim),
              arith::ConstantIndexOp::create(nb, l, valueAt));
          linalg::YieldOp::create(
              nb, l,
              arith::SelectOp::create(nb, l, isValue, kept, turned)
                  .getResult());
        })[0];
    return {tensor::CollapseShapeOp::create(L.b, L.loc, rotated, lead)};
  }

  /// Llama 3's scaled frequency (Hugging Face's rope_type "llama3"), each
  /// step in f32 as it computes it: by wavelength 2 pi / f, kept below
  /// context / high, divided by the factor above context / low, and in
  /// between blended by s = (context / wavelength - low) / (high - low)
  /// into (1 - s) f / factor + s f.
  static Value scaleLlama3(OpBuilder &nb, Location l, Lowering &L,
                           Value frequency, ArrayRef<double> scaling) {
    double factor = scaling[0], low = scaling[1], high = scaling[2],
           context = scaling[3];
    auto f32 = [&](double v) { return L.f32(nb, v); };
    Value wavelength = arith::DivFOp::create(nb, l, f32(2 * M_PI), frequency);
    Value divided = arith::DivFOp::create(nb, l, frequency, f32(factor));
    Value longWave = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OGT,
                                           wavelength, f32(context / low));
    Value shortWave = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OLT,
                                            wavelength, f32(context / high));
    Value kept = arith::SelectOp::create(nb, l, longWave, divided, frequency);
    Value smooth = arith::DivFOp::create(
        nb, l,
        arith::SubFOp::create(
            nb, l, arith::DivFOp::create(nb, l, f32(context), wavelength),
            f32(low)),
        f32(high - low));
    Value blended = arith::AddFOp::create(
        nb, l,
        arith::DivFOp::create(
            nb, l,
            arith::MulFOp::create(
                nb, l, arith::SubFOp::create(nb, l, f32(1.0), smooth), kept),
            f32(factor)),
        arith::MulFOp::create(nb, l, smooth, kept));
    Value medium = arith::AndIOp::create(
        nb, l, arith::XOrIOp::create(nb, l, longWave, trueValue(nb, l)),
        arith::XOrIOp::create(nb, l, shortWave, trueValue(nb, l)));
    return arith::SelectOp::create(nb, l, medium, blended, kept);
  }
  static Value trueValue(OpBuilder &nb, Location l) {
    return arith::ConstantOp::create(nb, l, nb.getBoolAttr(true));
  }

  /// The cosines and sines [T, D/2] of the angles t * theta^(-2j/D), each
  /// step in f32 as Hugging Face computes them, so that the rotations
  /// match its to rounding.
  static std::pair<Value, Value> angleTables(Lowering &L, RotaryOp op,
                                             int64_t T, int64_t D) {
    float theta = static_cast<float>(op.getTheta().convertToDouble());
    ValueRange tables = L.generic(
        {}, ValueRange{L.empty({T, D / 2}), L.empty({T, D / 2})},
        {L.identity(2), L.identity(2)}, {kPar, kPar},
        [&](OpBuilder &nb, Location l, ValueRange) {
          auto toF32 = [&](Value index) -> Value {
            Value i64 =
                arith::IndexCastOp::create(nb, l, nb.getI64Type(), index);
            return arith::SIToFPOp::create(nb, l, nb.getF32Type(), i64);
          };
          Value position = toF32(L.index(nb, 0));
          Value twoJ = arith::MulFOp::create(nb, l, toF32(L.index(nb, 1)),
                                             L.f32(nb, 2.0));
          Value exponent = arith::DivFOp::create(
              nb, l, twoJ, L.f32(nb, static_cast<double>(D)));
          Value power = math::PowFOp::create(nb, l, L.f32(nb, theta), exponent);
          Value frequency = arith::DivFOp::create(nb, l, L.f32(nb, 1.0), power);
          if (std::optional<ArrayRef<double>> scaling = op.getLlama3Scaling())
            frequency = scaleLlama3(nb, l, L, frequency, *scaling);
          Value angle = arith::MulFOp::create(nb, l, position, frequency);
          linalg::YieldOp::create(
              nb, l,
              ValueRange{math::CosOp::create(nb, l, angle),
                         math::SinOp::create(nb, l, angle)});
        });
    return {tables[0], tables[1]};
  }
};

} // namespace

bool mlir::loom::isFusedAttention(Operation *op, int64_t maxHeadDim,
                                  bool groupedHeads) {
  Value qkv;
  int64_t numHeads;
  std::optional<int64_t> kvHeads;
  if (auto forward = dyn_cast<CausalAttentionOp>(op)) {
    qkv = forward.getQkv();
    numHeads = forward.getNumHeads();
    kvHeads = forward.getKvHeads();
  } else if (auto grad = dyn_cast<CausalAttentionGradOp>(op)) {
    qkv = grad.getQkv();
    numHeads = grad.getNumHeads();
    kvHeads = grad.getKvHeads();
  } else {
    return false;
  }
  if (kvHeads && !groupedHeads)
    return false;
  Type element = cast<RankedTensorType>(qkv.getType()).getElementType();
  if (!(element.isF32() || element.isBF16() || element.isF16()))
    return false;
  // The kernels take every tensor but the f32 statistics in one type.
  auto statistics = cast<WideStatisticsOpInterface>(op);
  auto storedIn = [&](Value value) {
    return cast<RankedTensorType>(value.getType()).getElementType() == element;
  };
  for (OpOperand &operand : op->getOpOperands())
    if (!statistics.isWideOperand(operand.getOperandNumber()) &&
        !storedIn(operand.get()))
      return false;
  for (OpResult result : op->getResults())
    if (!statistics.isWideResult(result.getResultNumber()) && !storedIn(result))
      return false;
  auto shape = cast<RankedTensorType>(qkv.getType()).getShape();
  int64_t rowHeads = getQkvRowHeads(numHeads, kvHeads);
  if (shape.size() != 3 || shape[2] % rowHeads != 0)
    return false;
  int64_t headDim = shape[2] / rowHeads;
  return maxHeadDim <= 0 || headDim <= maxHeadDim;
}

void mlir::loom::expandGroupedAttention(
    Operation *root, llvm::function_ref<bool(Operation *)> keep) {
  SmallVector<Operation *> grouped;
  auto isGrouped = [](Operation *op) {
    if (auto forward = dyn_cast<CausalAttentionOp>(op))
      return forward.getKvHeads().has_value();
    if (auto grad = dyn_cast<CausalAttentionGradOp>(op))
      return grad.getKvHeads().has_value();
    return false;
  };
  root->walk([&](Operation *op) {
    if (isGrouped(op) && !keep(op))
      grouped.push_back(op);
  });
  IRRewriter b(root->getContext());
  for (Operation *op : grouped) {
    b.setInsertionPoint(op);
    Location loc = op->getLoc();
    auto expand = [&](Value qkv, IntegerAttr heads, IntegerAttr kvHeads) {
      return GroupQkvOp::create(b, loc, qkv, heads, kvHeads).getResult();
    };
    if (auto forward = dyn_cast<CausalAttentionOp>(op)) {
      Value all = expand(forward.getQkv(), forward.getNumHeadsAttr(),
                         forward.getKvHeadsAttr());
      b.replaceOp(op, CausalAttentionOp::create(b, loc, all,
                                                forward.getNumHeadsAttr(),
                                                /*kv_heads=*/nullptr));
      continue;
    }
    auto grad = cast<CausalAttentionGradOp>(op);
    Value all =
        expand(grad.getQkv(), grad.getNumHeadsAttr(), grad.getKvHeadsAttr());
    Value dall = CausalAttentionGradOp::create(
        b, loc, all.getType(), grad.getGrad(), all, grad.getOut(),
        grad.getLse(), grad.getNumHeadsAttr(), grad.getQuerySumsAttr(),
        /*kv_heads=*/nullptr);
    b.replaceOp(op, GroupQkvGradOp::create(b, loc, dall, grad.getNumHeadsAttr(),
                                           grad.getKvHeadsAttr()));
  }
}

void mlir::loom::populateLoomAttentionToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<CausalAttentionLowering, CausalAttentionGradLowering,
               GroupQkvLowering, GroupQkvGradLowering, RotaryLowering>(
      patterns.getContext());
}
