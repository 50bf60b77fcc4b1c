//===- Lowering.h - Shared pieces of the loom-to-linalg lowering *- C++ -*-===//
//
// The builder every pattern of the loom-to-linalg lowering uses: linalg
// generics over free reshapes and slices of f32 tensors, matrix products as
// linalg.matmul (later BLAS calls), and the pattern base class. Private to
// the LoomToLinalg library.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CONVERSION_LOOMTOLINALG_LOWERING_H
#define LOOM_CONVERSION_LOOMTOLINALG_LOWERING_H

#include "loom/Conversion/LoomToLinalg/LoomToLinalg.h"
#include "loom/Dialect/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir {
namespace loom {
namespace lowering {

using utils::IteratorType;
constexpr IteratorType kPar = IteratorType::parallel;
constexpr IteratorType kRed = IteratorType::reduction;
using BodyFn = function_ref<void(OpBuilder &, Location, ValueRange)>;

/// Body of a generic yielding the sum of its two block arguments: an
/// elementwise add, or a sum reduction into the output.
inline void sumBody(OpBuilder &nb, Location l, ValueRange a) {
  linalg::YieldOp::create(nb, l,
                          arith::AddFOp::create(nb, l, a[0], a[1]).getResult());
}

/// The larger of two floats, for running maxima. `maxnumf` rather than
/// `maximumf`: LLVM vectorizes a reduction of the former but not of the
/// latter, whose signed-zero ordering it handles with branches. The maxima
/// here only shift exponentials, so a NaN input still reaches the result
/// through the exponential of its own element.
inline Value runningMax(OpBuilder &nb, Location l, Value x, Value max) {
  return arith::MaxNumFOp::create(nb, l, x, max);
}

/// Body of a generic accumulating the product of its two inputs into the
/// output: the contractions of attention.
inline void multiplyAccumulateBody(OpBuilder &nb, Location l, ValueRange a) {
  Value p = arith::MulFOp::create(nb, l, a[0], a[1]);
  linalg::YieldOp::create(nb, l,
                          arith::AddFOp::create(nb, l, a[2], p).getResult());
}

/// Builds the upstream ops that replace one loom op. All values are f32
/// tensors with static shapes, which the ops' verifiers guarantee once the
/// pass has checked the element types.
class Lowering {
public:
  Lowering(ConversionPatternRewriter &rewriter, Location loc)
      : b(rewriter), loc(loc), ctx(rewriter.getContext()), rewriter(rewriter) {}

  /// What `original`, a value of the IR before the conversion, stands for
  /// now: an earlier lowered op's value in its place.
  Value lowered(Value original) { return rewriter.getRemappedValue(original); }

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

  /// Elementwise `body` over `ins` and `outs` of one shape, whose results
  /// replace `outs` (an optimizer's update of a parameter and its state).
  ValueRange elementwise(ValueRange ins, ValueRange outs, BodyFn body) {
    unsigned rank = cast<RankedTensorType>(outs.front().getType()).getRank();
    SmallVector<AffineMap> maps(ins.size() + outs.size(), identity(rank));
    SmallVector<IteratorType> iterators(rank, kPar);
    return generic(ins, outs, maps, iterators, body);
  }
  /// Elementwise `body` over operands of one shape, into a new tensor.
  Value elementwise(ValueRange ins, BodyFn body) {
    auto type = cast<RankedTensorType>(ins.front().getType());
    return elementwise(ins, empty(type.getShape()), body)[0];
  }

  /// The sums of the columns of an [M, N] value: [N] (a bias's gradient).
  Value columnSums(Value v) {
    int64_t n = cast<RankedTensorType>(v.getType()).getDimSize(1);
    return generic(v, zeros({n}), {map(2, {0, 1}), map(2, {1})}, {kRed, kPar},
                   sumBody)[0];
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
  /// Flattens all dimensions of a tensor into one: [B, T] tokens, a layer
  /// norm's statistics of each row.
  Value flatten(Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getRank() <= 1)
      return v;
    ReassociationIndices all;
    for (int64_t i = 0; i < type.getRank(); ++i)
      all.push_back(i);
    return tensor::CollapseShapeOp::create(b, loc, v,
                                           ArrayRef<ReassociationIndices>{all});
  }
  /// The inverse of flatten(): the 1-d value back to `type`.
  Value unflatten(Value v, Type type) {
    auto target = cast<RankedTensorType>(type);
    if (target.getRank() <= 1)
      return v;
    ReassociationIndices all;
    for (int64_t i = 0; i < target.getRank(); ++i)
      all.push_back(i);
    return tensor::ExpandShapeOp::create(b, loc, target, v,
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

  /// A part of an index range that the ranks of a group share (vocabulary
  /// parallelism), `size` indices from `start`: whether it holds `index`,
  /// and the index's position in it, clamped to 0 when it does not.
  std::pair<Value, Value> indexInPart(OpBuilder &nb, Value index, Value start,
                                      int64_t size) {
    Value offset = arith::SubIOp::create(nb, loc, index, start);
    // Unsigned, an index below the part wraps above it.
    Value held =
        arith::CmpIOp::create(nb, loc, arith::CmpIPredicate::ult, offset,
                              arith::ConstantIndexOp::create(nb, loc, size));
    Value zero = arith::ConstantIndexOp::create(nb, loc, 0);
    return {held, arith::SelectOp::create(nb, loc, held, offset, zero)};
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

private:
  ConversionPatternRewriter &rewriter;
};

/// Lowers one loom op to the values that replace its results. Operands come
/// from the adaptor: the conversion may have replaced their producers.
template <typename OpTy> struct LoomPattern : public OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  using OpAdaptor = typename OpTy::Adaptor;
  LogicalResult
  matchAndRewrite(OpTy op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const final {
    Lowering L(rewriter, op.getLoc());
    rewriter.replaceOp(op, lower(op, adaptor, L));
    return success();
  }
  virtual SmallVector<Value> lower(OpTy op, OpAdaptor adaptor,
                                   Lowering &L) const = 0;
};

} // namespace lowering
} // namespace loom
} // namespace mlir

#endif // LOOM_CONVERSION_LOOMTOLINALG_LOWERING_H
