//===- ReshapeDestinations.cpp - The loom-reshape-destinations pass -------===//

#include "loom/Bufferization/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMRESHAPEDESTINATIONS
#include "loom/Bufferization/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// `insert_slice (reshape %x) into %dest` -> `reshape^-1 (insert_slice %x into
/// reshape %dest)`, for an expand_shape or collapse_shape `Reshape` whose
/// inverse is `Inverse`. The slice must drop only leading unit dimensions
/// and span every other dimension of `%dest`, so that the same regrouping,
/// shifted past the leading dimensions, reshapes `%dest`.
template <typename Reshape, typename Inverse>
struct InsertOfReshape : OpRewritePattern<tensor::InsertSliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tensor::InsertSliceOp insert,
                                PatternRewriter &rewriter) const override {
    auto reshape = insert.getSource().getDefiningOp<Reshape>();
    if (!reshape)
      return rewriter.notifyMatchFailure(insert, "source is not a reshape");
    RankedTensorType destType = insert.getDestType();
    RankedTensorType sourceType = insert.getSourceType();
    auto valueType = cast<RankedTensorType>(reshape.getSrc().getType());
    if (!destType.hasStaticShape() || !valueType.hasStaticShape() ||
        !insert.hasUnitStride())
      return rewriter.notifyMatchFailure(insert, "dynamic shape or stride");
    int64_t leading = destType.getRank() - sourceType.getRank();
    ArrayRef<int64_t> sizes = insert.getStaticSizes();
    ArrayRef<int64_t> offsets = insert.getStaticOffsets();
    for (int64_t d = 0; d < destType.getRank(); ++d) {
      bool whole = d < leading
                       ? sizes[d] == 1
                       : sizes[d] == destType.getDimSize(d) && offsets[d] == 0;
      if (!whole)
        return rewriter.notifyMatchFailure(
            insert, "slice does not span the trailing dimensions");
    }

    // The reshape's groups, past the leading dimensions.
    SmallVector<ReassociationIndices> groups;
    for (int64_t d = 0; d < leading; ++d)
      groups.push_back({d});
    for (const ReassociationIndices &group : reshape.getReassociationIndices())
      groups.push_back(llvm::map_to_vector(
          group, [&](int64_t d) -> int64_t { return d + leading; }));
    SmallVector<int64_t> shape(destType.getShape().take_front(leading));
    llvm::append_range(shape, valueType.getShape());
    auto reshapedType = RankedTensorType::get(shape, destType.getElementType());

    Value dest = insert.getDest();
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointAfterValue(dest);
    Value reshapedDest =
        Inverse::create(rewriter, insert.getLoc(), reshapedType, dest, groups);
    rewriter.setInsertionPoint(insert);
    SmallVector<OpFoldResult> newOffsets(insert.getMixedOffsets());
    newOffsets.resize(leading);
    SmallVector<OpFoldResult> newSizes(leading, rewriter.getIndexAttr(1));
    for (int64_t size : valueType.getShape()) {
      newOffsets.push_back(rewriter.getIndexAttr(0));
      newSizes.push_back(rewriter.getIndexAttr(size));
    }
    SmallVector<OpFoldResult> strides(shape.size(), rewriter.getIndexAttr(1));
    Value inserted = tensor::InsertSliceOp::create(
        rewriter, insert.getLoc(), reshape.getSrc(), reshapedDest, newOffsets,
        newSizes, strides);
    rewriter.replaceOpWithNewOp<Reshape>(insert, destType, inserted, groups);
    return success();
  }
};

struct ReshapeDestinationsPass
    : public loom::impl::LoomReshapeDestinationsBase<ReshapeDestinationsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns
        .add<InsertOfReshape<tensor::ExpandShapeOp, tensor::CollapseShapeOp>,
             InsertOfReshape<tensor::CollapseShapeOp, tensor::ExpandShapeOp>>(
            &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
