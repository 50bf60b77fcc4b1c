//===- LoomToLinalg.cpp - The loom-lower-to-linalg pass -------------------===//
//
// Rewrites every loom op into upstream ops on tensors: linalg.matmul for the
// matrix products (later calls into BLAS), linalg.generic for everything
// else, tensor reshapes and slices for the views between them, and one
// scf.for for the embedding table's scatter-add. Bufferization and the
// lowering to loops and LLVM are upstream from here on.
//
// Row-wise ops work on [rows, width] views of their operands, obtained with
// free tensor.collapse_shape ops, so that each pattern handles one rank.
//
//===----------------------------------------------------------------------===//

#include "Loom/LoomDialect.h"
#include "loom/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMLOWERTOLINALG
#include "loom/Conversion/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
using utils::IteratorType;
constexpr IteratorType kPar = IteratorType::parallel;
constexpr IteratorType kRed = IteratorType::reduction;
using BodyFn = function_ref<void(OpBuilder &, Location, ValueRange)>;

/// Body of a generic yielding the sum of its two block arguments: an
/// elementwise add, or a sum reduction into the output.
void sumBody(OpBuilder &nb, Location l, ValueRange a) {
  linalg::YieldOp::create(nb, l,
                          arith::AddFOp::create(nb, l, a[0], a[1]).getResult());
}

/// Body of a generic accumulating the product of its two inputs into the
/// output: the contractions of attention.
void multiplyAccumulateBody(OpBuilder &nb, Location l, ValueRange a) {
  Value p = arith::MulFOp::create(nb, l, a[0], a[1]);
  linalg::YieldOp::create(nb, l,
                          arith::AddFOp::create(nb, l, a[2], p).getResult());
}

/// Builds the upstream ops that replace one loom op. All values are f32
/// tensors with static shapes, which the ops' verifiers guarantee once the
/// pass has checked the element types.
class Lowering {
public:
  Lowering(OpBuilder &b, Location loc) : b(b), loc(loc), ctx(b.getContext()) {}

  Type f32() { return b.getF32Type(); }
  Value f32(OpBuilder &nb, double v) {
    return arith::ConstantOp::create(nb, loc, nb.getF32FloatAttr(v));
  }

  Value empty(ArrayRef<int64_t> shape) {
    return tensor::EmptyOp::create(b, loc, shape, f32());
  }
  Value filled(ArrayRef<int64_t> shape, double value) {
    return linalg::FillOp::create(b, loc, ValueRange{f32(b, value)},
                                  ValueRange{empty(shape)})
        .getResult(0);
  }
  Value zeros(ArrayRef<int64_t> shape) { return filled(shape, 0.0); }

  /// An affine map over `numDims` loop dimensions selecting `dims`.
  AffineMap map(unsigned numDims, ArrayRef<unsigned> dims) {
    SmallVector<AffineExpr> exprs;
    for (unsigned d : dims)
      exprs.push_back(getAffineDimExpr(d, ctx));
    return AffineMap::get(numDims, 0, exprs, ctx);
  }
  AffineMap identity(unsigned rank) {
    return AffineMap::getMultiDimIdentityMap(rank, ctx);
  }

  ValueRange generic(ValueRange ins, ValueRange outs, ArrayRef<AffineMap> maps,
                     ArrayRef<IteratorType> iterators, BodyFn body) {
    SmallVector<Type> types;
    for (Value out : outs)
      types.push_back(out.getType());
    return linalg::GenericOp::create(b, loc, types, ins, outs, maps, iterators,
                                     body)
        .getResults();
  }

  /// Elementwise `body` over operands of one shape, into a new tensor.
  Value elementwise(ValueRange ins, BodyFn body) {
    auto type = cast<RankedTensorType>(ins.front().getType());
    SmallVector<AffineMap> maps(ins.size() + 1, identity(type.getRank()));
    SmallVector<IteratorType> iterators(type.getRank(), kPar);
    return generic(ins, empty(type.getShape()), maps, iterators, body)[0];
  }

  /// [d0, ..., dn-1, C] -> [d0 * ... * dn-1, C]; a rank-1 value is kept.
  Value rows(Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getRank() <= 2)
      return v;
    ReassociationIndices lead;
    for (int64_t i = 0; i + 1 < type.getRank(); ++i)
      lead.push_back(i);
    return tensor::CollapseShapeOp::create(
        b, loc, v, ArrayRef<ReassociationIndices>{lead, {type.getRank() - 1}});
  }
  /// The inverse of rows(): the [N, C] value back to `type`.
  Value unrows(Value v, Type type) {
    auto target = cast<RankedTensorType>(type);
    if (target.getRank() <= 2)
      return v;
    ReassociationIndices lead;
    for (int64_t i = 0; i + 1 < target.getRank(); ++i)
      lead.push_back(i);
    return tensor::ExpandShapeOp::create(
        b, loc, target, v,
        ArrayRef<ReassociationIndices>{lead, {target.getRank() - 1}});
  }
  /// Flattens all dimensions of an integer [B, T] tensor.
  Value flatten(Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    ReassociationIndices all;
    for (int64_t i = 0; i < type.getRank(); ++i)
      all.push_back(i);
    return tensor::CollapseShapeOp::create(b, loc, v,
                                           ArrayRef<ReassociationIndices>{all});
  }

  /// C = A · B over 2-d tensors, where `transposeA`/`transposeB` read the
  /// operand as stored transposed; accumulates into `init`.
  Value matmul(Value a, Value bMat, Value init, bool transposeA,
               bool transposeB) {
    // Loop dimensions (m, n, k).
    AffineMap aMap = transposeA ? map(3, {2, 0}) : map(3, {0, 2});
    AffineMap bMap = transposeB ? map(3, {1, 2}) : map(3, {2, 1});
    SmallVector<Attribute> maps = {AffineMapAttr::get(aMap),
                                   AffineMapAttr::get(bMap),
                                   AffineMapAttr::get(map(3, {0, 1}))};
    return linalg::MatmulOp::create(
               b, loc, TypeRange{init.getType()}, ValueRange{a, bMat},
               ValueRange{init},
               {b.getNamedAttr("indexing_maps", b.getArrayAttr(maps))})
        .getResult(0);
  }

  /// Sum over the last dimension of an [N, C] value, of `term(x...)`.
  Value rowSum(ValueRange ins, int64_t n,
               function_ref<Value(OpBuilder &, ValueRange)> term) {
    SmallVector<AffineMap> maps;
    for (Value in : ins)
      maps.push_back(cast<RankedTensorType>(in.getType()).getRank() == 2
                         ? map(2, {0, 1})
                         : map(2, {0}));
    maps.push_back(map(2, {0}));
    return generic(
        ins, zeros({n}), maps, {kPar, kRed},
        [&](OpBuilder &nb, Location l, ValueRange args) {
          Value t = term(nb, args.drop_back());
          linalg::YieldOp::create(
              nb, l, arith::AddFOp::create(nb, l, args.back(), t).getResult());
        })[0];
  }

  Value index(OpBuilder &nb, unsigned dim) {
    return linalg::IndexOp::create(nb, loc, dim);
  }
  Value toIndex(OpBuilder &nb, Value i32) {
    return arith::IndexCastOp::create(nb, loc, nb.getIndexType(), i32);
  }

  OpBuilder &b;
  Location loc;
  MLIRContext *ctx;
};

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
  Value max = L.generic(
      x, L.filled({n}, -INFINITY), {L.map(2, {0, 1}), L.map(2, {0})},
      {kPar, kRed}, [&](OpBuilder &nb, Location l, ValueRange a) {
        linalg::YieldOp::create(
            nb, l, arith::MaximumFOp::create(nb, l, a[0], a[1]).getResult());
      })[0];
  Value sumExp = L.rowSum({x, max}, n, [&](OpBuilder &nb, ValueRange a) {
    return math::ExpOp::create(nb, L.loc,
                               arith::SubFOp::create(nb, L.loc, a[0], a[1]))
        .getResult();
  });
  return {x, max, sumExp};
}

/// Query, key and value views [B, T, NH, hs] of a fused [B, T, 3C] tensor.
struct Heads {
  Value q, k, v;
  int64_t batch, seq, heads, headDim;
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
    SmallVector<OpFoldResult> offsets(5, L.b.getIndexAttr(0));
    offsets[2] = L.b.getIndexAttr(which);
    SmallVector<OpFoldResult> sizes = {
        L.b.getIndexAttr(h.batch), L.b.getIndexAttr(h.seq), L.b.getIndexAttr(1),
        L.b.getIndexAttr(h.heads), L.b.getIndexAttr(h.headDim)};
    SmallVector<OpFoldResult> strides(5, L.b.getIndexAttr(1));
    return tensor::ExtractSliceOp::create(L.b, L.loc, type4, qkv5, offsets,
                                          sizes, strides);
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
/// linalg.matmul on strided 2-d views, which becomes one BLAS call: a single
/// 5-d contraction would run as generated loops that stride through memory
/// along the reduction.
Value perHeadMatmul(Lowering &L, const Heads &h, HeadOperand lhs,
                    HeadOperand rhs, Value init, HeadLayout initLayout) {
  OpBuilder &b = L.b;
  Location loc = L.loc;
  auto c = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value heads = c(h.heads);
  auto loop = scf::ForOp::create(b, loc, c(0), c(h.batch * h.heads), c(1),
                                 ValueRange{init});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value iv = loop.getInductionVar();
  Value batch = arith::DivUIOp::create(b, loc, iv, heads);
  Value head = arith::RemUIOp::create(b, loc, iv, heads);
  SmallVector<OpFoldResult> unit(4, b.getIndexAttr(1));
  auto matrix = [&](Value t, HeadLayout layout) -> Value {
    auto type = cast<RankedTensorType>(t.getType());
    auto shape = type.getShape();
    int64_t rows = layout == HeadLayout::HeadsFirst ? shape[2] : shape[1];
    return tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({rows, shape[3]}, L.f32()), t,
        headOffsets(b, layout, batch, head),
        headSizes(b, layout, shape), unit);
  };
  Value acc = loop.getRegionIterArgs()[0];
  Value product =
      L.matmul(matrix(lhs.tensor, lhs.layout), matrix(rhs.tensor, rhs.layout),
               matrix(acc, initLayout), lhs.transposed, rhs.transposed);
  Value updated = tensor::InsertSliceOp::create(
      b, loc, product, acc, headOffsets(b, initLayout, batch, head),
      headSizes(b, initLayout,
                cast<RankedTensorType>(acc.getType()).getShape()),
      unit);
  scf::YieldOp::create(b, loc, updated);
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

/// Causal attention probabilities P [B, NH, T, T] (zero above the diagonal).
Value attentionProbs(Lowering &L, const Heads &h) {
  int64_t B = h.batch, NH = h.heads, T = h.seq;
  double scale = 1.0 / std::sqrt(static_cast<double>(h.headDim));
  Value scores = headScores(L, h.q, h.k, h);
  auto causal = [&](OpBuilder &nb) {
    return arith::CmpIOp::create(nb, L.loc, arith::CmpIPredicate::ule,
                                 L.index(nb, 3), L.index(nb, 2));
  };
  AffineMap all4 = L.identity(4), rows4 = L.map(4, {0, 1, 2});
  Value max = L.generic(
      scores, L.filled({B, NH, T}, -INFINITY), {all4, rows4},
      {kPar, kPar, kPar, kRed}, [&](OpBuilder &nb, Location l, ValueRange a) {
        Value m = arith::MaximumFOp::create(nb, l, a[0], a[1]);
        linalg::YieldOp::create(
            nb, l,
            arith::SelectOp::create(nb, l, causal(nb), m, a[1]).getResult());
      })[0];
  Value exps = L.generic(
      {scores, max}, L.empty({B, NH, T, T}), {all4, rows4, all4},
      {kPar, kPar, kPar, kPar}, [&](OpBuilder &nb, Location l, ValueRange a) {
        Value d = arith::SubFOp::create(nb, l, a[0], a[1]);
        Value e = math::ExpOp::create(
            nb, l, arith::MulFOp::create(nb, l, d, L.f32(nb, scale)));
        linalg::YieldOp::create(
            nb, l,
            arith::SelectOp::create(nb, l, causal(nb), e, L.f32(nb, 0.0))
                .getResult());
      })[0];
  Value sums = L.generic(exps, L.zeros({B, NH, T}), {all4, rows4},
                         {kPar, kPar, kPar, kRed}, sumBody)[0];
  return L.generic(
      {exps, sums}, L.empty({B, NH, T, T}), {all4, rows4, all4},
      {kPar, kPar, kPar, kPar}, [&](OpBuilder &nb, Location l, ValueRange a) {
        linalg::YieldOp::create(
            nb, l, arith::DivFOp::create(nb, l, a[0], a[1]).getResult());
      })[0];
}

/// GPT-2's GELU and its derivative, on scalars.
constexpr double kGeluC = 0.044715;
Value geluInner(OpBuilder &nb, Lowering &L, Value x) {
  const double s = std::sqrt(2.0 / M_PI);
  Value x3 = arith::MulFOp::create(nb, L.loc, x,
                                   arith::MulFOp::create(nb, L.loc, x, x));
  Value u = arith::AddFOp::create(
      nb, L.loc, x, arith::MulFOp::create(nb, L.loc, x3, L.f32(nb, kGeluC)));
  return math::TanhOp::create(
      nb, L.loc, arith::MulFOp::create(nb, L.loc, u, L.f32(nb, s)));
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

template <typename OpTy> struct LoomPattern : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const final {
    Lowering L(rewriter, op.getLoc());
    SmallVector<Value> results = lower(op, L);
    rewriter.replaceOp(op, results);
    return success();
  }
  virtual SmallVector<Value> lower(OpTy op, Lowering &L) const = 0;
};

struct EmbeddingLowering : LoomPattern<EmbeddingOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(EmbeddingOp op, Lowering &L) const override {
    auto shape = op.getType().getShape();
    Value wte = op.getWte();
    // The first T rows of the position table.
    Value wpe = op.getWpe();
    if (op.getWpe().getType().getDimSize(0) != shape[1])
      wpe = tensor::ExtractSliceOp::create(
          L.b, L.loc, wpe,
          ArrayRef<OpFoldResult>{L.b.getIndexAttr(0), L.b.getIndexAttr(0)},
          ArrayRef<OpFoldResult>{L.b.getIndexAttr(shape[1]),
                                 L.b.getIndexAttr(shape[2])},
          ArrayRef<OpFoldResult>{L.b.getIndexAttr(1), L.b.getIndexAttr(1)});
    // Loop dimensions (b, t, c).
    return {L.generic(
        {op.getTokens(), wpe}, L.empty(shape),
        {L.map(3, {0, 1}), L.map(3, {1, 2}), L.identity(3)}, {kPar, kPar, kPar},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value row = L.toIndex(nb, a[0]);
          Value w = tensor::ExtractOp::create(nb, l, wte,
                                              ValueRange{row, L.index(nb, 2)});
          linalg::YieldOp::create(
              nb, l, arith::AddFOp::create(nb, l, w, a[1]).getResult());
        })[0]};
  }
};

struct EmbeddingGradLowering : LoomPattern<EmbeddingGradOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(EmbeddingGradOp op, Lowering &L) const override {
    auto gradShape = cast<RankedTensorType>(op.getGrad().getType()).getShape();
    int64_t T = gradShape[1], C = gradShape[2];
    auto wpeShape = op.getWpeGrad().getType().getShape();
    // Position gradient: the batch sum; loop dimensions (b, t, c).
    Value wpe = L.generic(op.getGrad(), L.zeros({T, C}),
                          {L.identity(3), L.map(3, {1, 2})}, {kRed, kPar, kPar},
                          sumBody)[0];
    if (wpeShape[0] > T)
      wpe = tensor::InsertSliceOp::create(
          L.b, L.loc, wpe, L.zeros(wpeShape),
          ArrayRef<OpFoldResult>{L.b.getIndexAttr(0), L.b.getIndexAttr(0)},
          ArrayRef<OpFoldResult>{L.b.getIndexAttr(T), L.b.getIndexAttr(C)},
          ArrayRef<OpFoldResult>{L.b.getIndexAttr(1), L.b.getIndexAttr(1)});

    // Token gradient: a scatter-add of rows, in token order so that the
    // result is deterministic.
    Value grad2 = L.rows(op.getGrad());
    Value tokens = L.flatten(op.getTokens());
    int64_t n = cast<RankedTensorType>(grad2.getType()).getDimSize(0);
    OpBuilder &b = L.b;
    Location loc = L.loc;
    auto rowType = RankedTensorType::get({C}, L.f32());
    auto loop = scf::ForOp::create(
        b, loc, arith::ConstantIndexOp::create(b, loc, 0),
        arith::ConstantIndexOp::create(b, loc, n),
        arith::ConstantIndexOp::create(b, loc, 1),
        ValueRange{L.zeros(op.getWteGrad().getType().getShape())},
        [&](OpBuilder &nb, Location l, Value i, ValueRange acc) {
          Value token = arith::IndexCastOp::create(
              nb, l, nb.getIndexType(),
              tensor::ExtractOp::create(nb, l, tokens, ValueRange{i}));
          SmallVector<OpFoldResult> one = {nb.getIndexAttr(1),
                                           nb.getIndexAttr(1)};
          SmallVector<OpFoldResult> size = {nb.getIndexAttr(1),
                                            nb.getIndexAttr(C)};
          Value src = tensor::ExtractSliceOp::create(
              nb, l, rowType, grad2,
              ArrayRef<OpFoldResult>{i, nb.getIndexAttr(0)}, size, one);
          Value dst = tensor::ExtractSliceOp::create(
              nb, l, rowType, acc[0],
              ArrayRef<OpFoldResult>{token, nb.getIndexAttr(0)}, size, one);
          AffineMap id = AffineMap::getMultiDimIdentityMap(1, nb.getContext());
          Value row = linalg::GenericOp::create(
                          nb, l, TypeRange{rowType}, ValueRange{src},
                          ValueRange{dst}, ArrayRef<AffineMap>{id, id},
                          ArrayRef<IteratorType>{kPar}, sumBody)
                          .getResult(0);
          Value updated = tensor::InsertSliceOp::create(
              nb, l, row, acc[0],
              ArrayRef<OpFoldResult>{token, nb.getIndexAttr(0)}, size, one);
          scf::YieldOp::create(nb, l, updated);
        });
    return {loop.getResult(0), wpe};
  }
};

struct LayerNormLowering : LoomPattern<LayerNormOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(LayerNormOp op, Lowering &L) const override {
    Value x = L.rows(op.getInput());
    auto shape = cast<RankedTensorType>(x.getType()).getShape();
    RowStats stats = layerNormStats(L, x, op.getEpsilon().convertToDouble());
    AffineMap all = L.map(2, {0, 1}), row = L.map(2, {0}), col = L.map(2, {1});
    Value y = L.generic(
        {x, stats.mean, stats.rstd, op.getWeight(), op.getBias()},
        L.empty(shape), {all, row, row, col, col, all}, {kPar, kPar},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value xhat = arith::MulFOp::create(
              nb, l, arith::SubFOp::create(nb, l, a[0], a[1]), a[2]);
          Value scaled = arith::MulFOp::create(nb, l, xhat, a[3]);
          linalg::YieldOp::create(
              nb, l, arith::AddFOp::create(nb, l, scaled, a[4]).getResult());
        })[0];
    return {L.unrows(y, op.getType())};
  }
};

struct LayerNormGradLowering : LoomPattern<LayerNormGradOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(LayerNormGradOp op, Lowering &L) const override {
    Value x = L.rows(op.getInput());
    Value dy = L.rows(op.getGrad());
    auto shape = cast<RankedTensorType>(x.getType()).getShape();
    int64_t n = shape[0], c = shape[1];
    RowStats stats = layerNormStats(L, x, op.getEpsilon().convertToDouble());
    AffineMap all = L.map(2, {0, 1}), row = L.map(2, {0}), col = L.map(2, {1});
    // xhat and dxhat = dy * weight, materialized once.
    ValueRange normalized =
        L.generic({x, stats.mean, stats.rstd, dy, op.getWeight()},
                  ValueRange{L.empty(shape), L.empty(shape)},
                  {all, row, row, all, col, all, all}, {kPar, kPar},
                  [&](OpBuilder &nb, Location l, ValueRange a) {
                    Value xhat = arith::MulFOp::create(
                        nb, l, arith::SubFOp::create(nb, l, a[0], a[1]), a[2]);
                    Value dxhat = arith::MulFOp::create(nb, l, a[3], a[4]);
                    linalg::YieldOp::create(nb, l, ValueRange{xhat, dxhat});
                  });
    Value xhat = normalized[0], dxhat = normalized[1];
    // Weight and bias gradients: column sums; loop dimensions (n, c).
    ValueRange params =
        L.generic({dy, xhat}, ValueRange{L.zeros({c}), L.zeros({c})},
                  {all, all, col, col}, {kRed, kPar},
                  [&](OpBuilder &nb, Location l, ValueRange a) {
                    Value dw = arith::AddFOp::create(
                        nb, l, a[2], arith::MulFOp::create(nb, l, a[0], a[1]));
                    Value db = arith::AddFOp::create(nb, l, a[3], a[0]);
                    linalg::YieldOp::create(nb, l, ValueRange{dw, db});
                  });
    Value sumD =
        L.rowSum(dxhat, n, [](OpBuilder &, ValueRange a) { return a[0]; });
    Value sumDX = L.rowSum({dxhat, xhat}, n, [&](OpBuilder &nb, ValueRange a) {
      return arith::MulFOp::create(nb, L.loc, a[0], a[1]).getResult();
    });
    double invC = 1.0 / static_cast<double>(c);
    Value dx =
        L.generic({dxhat, xhat, stats.rstd, sumD, sumDX}, L.empty(shape),
                  {all, all, row, row, row, all}, {kPar, kPar},
                  [&](OpBuilder &nb, Location l, ValueRange a) {
                    Value k = L.f32(nb, invC);
                    Value t = arith::SubFOp::create(
                        nb, l, a[0], arith::MulFOp::create(nb, l, a[3], k));
                    Value u = arith::MulFOp::create(
                        nb, l, a[1], arith::MulFOp::create(nb, l, a[4], k));
                    linalg::YieldOp::create(
                        nb, l,
                        arith::MulFOp::create(
                            nb, l, arith::SubFOp::create(nb, l, t, u), a[2])
                            .getResult());
                  })[0];
    return {L.unrows(dx, op.getInput().getType()), params[0], params[1]};
  }
};

struct LinearLowering : LoomPattern<LinearOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(LinearOp op, Lowering &L) const override {
    Value x = L.rows(op.getInput());
    int64_t m = cast<RankedTensorType>(x.getType()).getDimSize(0);
    int64_t n = op.getWeight().getType().getDimSize(0);
    Value init;
    if (Value bias = op.getBias())
      init =
          L.generic(bias, L.empty({m, n}), {L.map(2, {1}), L.map(2, {0, 1})},
                    {kPar, kPar}, [&](OpBuilder &nb, Location l, ValueRange a) {
                      linalg::YieldOp::create(nb, l, a[0]);
                    })[0];
    else
      init = L.zeros({m, n});
    Value y = L.matmul(x, op.getWeight(), init, /*transposeA=*/false,
                       /*transposeB=*/true);
    return {L.unrows(y, op.getType())};
  }
};

struct LinearGradLowering : LoomPattern<LinearGradOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(LinearGradOp op, Lowering &L) const override {
    Value dy = L.rows(op.getGrad());
    Value x = L.rows(op.getInput());
    auto xShape = cast<RankedTensorType>(x.getType()).getShape();
    auto wShape = op.getWeight().getType().getShape();
    Value dx = L.matmul(dy, op.getWeight(), L.zeros(xShape), false, false);
    Value dw = L.matmul(dy, x, L.zeros(wShape), true, false);
    SmallVector<Value> results = {L.unrows(dx, op.getInput().getType()), dw};
    if (op.getBiasGrad())
      results.push_back(L.generic(dy, L.zeros({wShape[0]}),
                                  {L.map(2, {0, 1}), L.map(2, {1})},
                                  {kRed, kPar}, sumBody)[0]);
    return results;
  }
};

struct CausalAttentionLowering : LoomPattern<CausalAttentionOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(CausalAttentionOp op, Lowering &L) const override {
    Heads h = splitHeads(L, op.getQkv(), op.getNumHeads());
    Value probs = attentionProbs(L, h);
    Value y4 = headContract(L, probs, h.v, /*transposeLhs=*/false, h);
    return {tensor::CollapseShapeOp::create(
        L.b, L.loc, op.getType(), y4,
        ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3}})};
  }
};

struct CausalAttentionGradLowering : LoomPattern<CausalAttentionGradOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(CausalAttentionGradOp op,
                           Lowering &L) const override {
    Heads h = splitHeads(L, op.getQkv(), op.getNumHeads());
    int64_t B = h.batch, NH = h.heads, T = h.seq;
    double scale = 1.0 / std::sqrt(static_cast<double>(h.headDim));
    Value probs = attentionProbs(L, h);
    auto type4 = RankedTensorType::get({B, T, NH, h.headDim}, L.f32());
    Value dy = tensor::ExpandShapeOp::create(
        L.b, L.loc, type4, op.getGrad(),
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
    for (auto [which, part] : llvm::enumerate(parts)) {
      SmallVector<OpFoldResult> offsets(5, L.b.getIndexAttr(0));
      offsets[2] = L.b.getIndexAttr(which);
      SmallVector<OpFoldResult> sizes = {
          L.b.getIndexAttr(B), L.b.getIndexAttr(T), L.b.getIndexAttr(1),
          L.b.getIndexAttr(NH), L.b.getIndexAttr(h.headDim)};
      SmallVector<OpFoldResult> strides(5, L.b.getIndexAttr(1));
      dqkv = tensor::InsertSliceOp::create(L.b, L.loc, part, dqkv, offsets,
                                           sizes, strides);
    }
    return {tensor::CollapseShapeOp::create(
        L.b, L.loc, op.getQkvGrad().getType(), dqkv,
        ArrayRef<ReassociationIndices>{{0}, {1}, {2, 3, 4}})};
  }
};

struct GeluLowering : LoomPattern<GeluOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(GeluOp op, Lowering &L) const override {
    return {L.elementwise(op.getInput(), [&](OpBuilder &nb, Location l,
                                             ValueRange a) {
      Value t = geluInner(nb, L, a[0]);
      Value half = arith::MulFOp::create(nb, l, a[0], L.f32(nb, 0.5));
      linalg::YieldOp::create(
          nb, l,
          arith::MulFOp::create(nb, l, half,
                                arith::AddFOp::create(nb, l, t, L.f32(nb, 1.0)))
              .getResult());
    })};
  }
};

struct GeluGradLowering : LoomPattern<GeluGradOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(GeluGradOp op, Lowering &L) const override {
    return {L.elementwise({op.getGrad(), op.getInput()}, [&](OpBuilder &nb,
                                                             Location l,
                                                             ValueRange a) {
      Value x = a[1];
      Value t = geluInner(nb, L, x);
      // d/dx 0.5 x (1 + tanh u) = 0.5 (1 + t) + 0.5 x (1 - t^2) u'.
      Value one = L.f32(nb, 1.0), half = L.f32(nb, 0.5);
      Value x2 = arith::MulFOp::create(nb, l, x, x);
      Value du = arith::MulFOp::create(
          nb, l, L.f32(nb, std::sqrt(2.0 / M_PI)),
          arith::AddFOp::create(
              nb, l, one,
              arith::MulFOp::create(nb, l, x2, L.f32(nb, 3 * kGeluC))));
      Value sech2 =
          arith::SubFOp::create(nb, l, one, arith::MulFOp::create(nb, l, t, t));
      Value left = arith::MulFOp::create(nb, l, half,
                                         arith::AddFOp::create(nb, l, one, t));
      Value right =
          arith::MulFOp::create(nb, l, arith::MulFOp::create(nb, l, half, x),
                                arith::MulFOp::create(nb, l, sech2, du));
      Value local = arith::AddFOp::create(nb, l, left, right);
      linalg::YieldOp::create(
          nb, l, arith::MulFOp::create(nb, l, local, a[0]).getResult());
    })};
  }
};

struct AddLowering : LoomPattern<AddOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(AddOp op, Lowering &L) const override {
    return {L.elementwise({op.getLhs(), op.getRhs()}, sumBody)};
  }
};

struct CrossEntropyLowering : LoomPattern<CrossEntropyOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(CrossEntropyOp op, Lowering &L) const override {
    Value logits = L.rows(op.getLogits());
    Value targets = L.flatten(op.getTargets());
    int64_t n = cast<RankedTensorType>(logits.getType()).getDimSize(0);
    SoftmaxStats s = softmaxStats(L, logits, op.getNumClasses());
    double invN = 1.0 / static_cast<double>(n);
    Value init = L.filled({}, 0.0);
    AffineMap row = L.map(1, {0});
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
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(CrossEntropyGradOp op, Lowering &L) const override {
    Value logits = L.rows(op.getLogits());
    Value targets = L.flatten(op.getTargets());
    auto shape = cast<RankedTensorType>(logits.getType()).getShape();
    int64_t classes = op.getNumClasses();
    SoftmaxStats s = softmaxStats(L, logits, classes);
    Value dloss =
        tensor::ExtractOp::create(L.b, L.loc, op.getGrad(), ValueRange{});
    Value factor = arith::MulFOp::create(
        L.b, L.loc, dloss, L.f32(L.b, 1.0 / static_cast<double>(shape[0])));
    AffineMap all = L.map(2, {0, 1}), row = L.map(2, {0});
    Value dlogits = L.generic(
        {logits, s.max, s.sumExp, targets}, L.empty(shape),
        {all, row, row, row, all}, {kPar, kPar},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value v = L.index(nb, 1);
          Value p = arith::DivFOp::create(
              nb, l,
              math::ExpOp::create(nb, l,
                                  arith::SubFOp::create(nb, l, a[0], a[1])),
              a[2]);
          Value isTarget = arith::CmpIOp::create(
              nb, l, arith::CmpIPredicate::eq, v, L.toIndex(nb, a[3]));
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

struct SumSquaresLowering : LoomPattern<SumSquaresOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(SumSquaresOp op, Lowering &L) const override {
    auto type = cast<RankedTensorType>(op.getInput().getType());
    unsigned rank = type.getRank();
    SmallVector<IteratorType> iterators(rank, kRed);
    return {L.generic(op.getInput(), L.filled({}, 0.0),
                      {L.identity(rank), AffineMap::get(rank, 0, {}, L.ctx)},
                      iterators, [&](OpBuilder &nb, Location l, ValueRange a) {
                        Value sq = arith::MulFOp::create(nb, l, a[0], a[0]);
                        linalg::YieldOp::create(
                            nb, l,
                            arith::AddFOp::create(nb, l, a[1], sq).getResult());
                      })[0]};
  }
};

struct AdamWLowering : LoomPattern<AdamWOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(AdamWOp op, Lowering &L) const override {
    OpBuilder &b = L.b;
    Location loc = L.loc;
    auto scalar = [&](Value t) -> Value {
      return tensor::ExtractOp::create(b, loc, t, ValueRange{});
    };
    Value lr = scalar(op.getLr()), step = scalar(op.getStep()),
          gradScale = scalar(op.getGradScale());
    double beta1 = op.getBeta1().convertToDouble();
    double beta2 = op.getBeta2().convertToDouble();
    double eps = op.getEpsilon().convertToDouble();
    double decay = op.getWeightDecay().convertToDouble();
    auto correction = [&](double beta) -> Value {
      Value pow = math::PowFOp::create(b, loc, L.f32(b, beta), step);
      return arith::SubFOp::create(b, loc, L.f32(b, 1.0), pow);
    };
    Value c1 = correction(beta1), c2 = correction(beta2);
    auto type = cast<RankedTensorType>(op.getParam().getType());
    unsigned rank = type.getRank();
    SmallVector<AffineMap> maps(4, L.identity(rank));
    SmallVector<IteratorType> iterators(rank, kPar);
    ValueRange r = L.generic(
        op.getGrad(), ValueRange{op.getParam(), op.getM(), op.getV()}, maps,
        iterators, [&](OpBuilder &nb, Location l, ValueRange a) {
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
          linalg::YieldOp::create(nb, l, ValueRange{p, m, v});
        });
    return {r[0], r[1], r[2]};
  }
};

struct SGDLowering : LoomPattern<SGDOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(SGDOp op, Lowering &L) const override {
    OpBuilder &b = L.b;
    Value lr = tensor::ExtractOp::create(b, L.loc, op.getLr(), ValueRange{});
    Value gradScale =
        tensor::ExtractOp::create(b, L.loc, op.getGradScale(), ValueRange{});
    double momentum = op.getMomentum().convertToDouble();
    double decay = op.getWeightDecay().convertToDouble();
    auto type = cast<RankedTensorType>(op.getParam().getType());
    unsigned rank = type.getRank();
    SmallVector<AffineMap> maps(3, L.identity(rank));
    SmallVector<IteratorType> iterators(rank, kPar);
    ValueRange r = L.generic(
        op.getGrad(), ValueRange{op.getParam(), op.getMomentumBuffer()}, maps,
        iterators, [&](OpBuilder &nb, Location l, ValueRange a) {
          Value g = arith::AddFOp::create(
              nb, l, arith::MulFOp::create(nb, l, a[0], gradScale),
              arith::MulFOp::create(nb, l, a[1], L.f32(nb, decay)));
          Value buf = arith::AddFOp::create(
              nb, l, arith::MulFOp::create(nb, l, a[2], L.f32(nb, momentum)),
              g);
          Value p = arith::SubFOp::create(
              nb, l, a[1], arith::MulFOp::create(nb, l, lr, buf));
          linalg::YieldOp::create(nb, l, ValueRange{p, buf});
        });
    return {r[0], r[1]};
  }
};

struct LowerToLinalgPass
    : public loom::impl::LoomLowerToLinalgBase<LowerToLinalgPass> {
  void runOnOperation() override {
    // The generated loops compute in f32; lower precisions arrive with the
    // precision pass, which inserts the casts.
    WalkResult checked = getOperation()->walk([](Operation *op) {
      if (!isa<LoomDialect>(op->getDialect()))
        return WalkResult::advance();
      for (Type t : llvm::concat<const Type>(op->getOperandTypes(),
                                             op->getResultTypes()))
        if (auto tensor = dyn_cast<RankedTensorType>(t))
          if (isa<FloatType>(tensor.getElementType()) &&
              !tensor.getElementType().isF32()) {
            op->emitOpError() << "is lowered for f32 tensors only, got " << t;
            return WalkResult::interrupt();
          }
      return WalkResult::advance();
    });
    if (checked.wasInterrupted())
      return signalPassFailure();

    RewritePatternSet patterns(&getContext());
    patterns.add<AddLowering, AdamWLowering, CausalAttentionGradLowering,
                 CausalAttentionLowering, CrossEntropyGradLowering,
                 CrossEntropyLowering, EmbeddingGradLowering, EmbeddingLowering,
                 GeluGradLowering, GeluLowering, LayerNormGradLowering,
                 LayerNormLowering, LinearGradLowering, LinearLowering,
                 SGDLowering, SumSquaresLowering>(&getContext());
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
    WalkResult left = getOperation()->walk([](Operation *op) {
      if (isa<LoomDialect>(op->getDialect())) {
        op->emitOpError("has no lowering to linalg");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
