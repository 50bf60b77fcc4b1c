//===- SplitReductions.cpp - The loom-split-reductions pass ---------------===//
//
// On a GPU a reduction's iteration is a warp, whose threads walk the reduced
// dimension one after the other: a column sum of 8,192 rows is 256 loads in
// a row for each thread, about 180 us at any width, and a step has six of
// them per layer (the biases' and the layer norms' gradients); a softmax
// over 50,257 logits is 1,571. Splitting the reduced dimension into parts
// that are reduced side by side, then folding the parts, leaves each thread
// a handful of loads.
//
//===----------------------------------------------------------------------===//

#include "loom/Buffers/Combiner.h"
#include "loom/Fusion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMSPLITREDUCTIONS
#include "loom/Fusion/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The operation folding each output's term into its accumulator, when
/// every output has a reassociable one; else empty.
SmallVector<Operation *> combiners(linalg::GenericOp op) {
  SmallVector<Operation *> result;
  SmallVector<BlockArgument> outputs(op.getRegionOutputArgs());
  for (unsigned i = 0, e = outputs.size(); i < e; ++i) {
    Operation *fold = getReassociableCombiner(outputs, i);
    if (!fold)
      return {};
    result.push_back(fold);
  }
  return result;
}

/// How many times longer than `rows` a row's reduction must be to be split
/// (the vocabulary's softmax, not a layer norm's statistics).
constexpr int64_t kRowFactor = 16;

/// The number of parts to split `size` iterations into: the most that
/// divides it and leaves each part at least `rows`; 1 for none.
int64_t partsFor(int64_t size, int64_t rows) {
  for (int64_t parts = size / rows; parts > 1; --parts)
    if (size % parts == 0)
      return parts;
  return 1;
}

/// In the first op of a split reduction, the index of the reduced
/// dimension, where the body asks for it: the part's first row plus the row
/// within it; the others' indices shifted past the parts' dimension.
static void reindexSlices(PatternRewriter &rewriter, linalg::GenericOp split,
                          unsigned reduced, int64_t slice) {
  SmallVector<linalg::IndexOp> indices;
  split.getRegion().walk(
      [&](linalg::IndexOp index) { indices.push_back(index); });
  for (linalg::IndexOp index : indices) {
    rewriter.setInsertionPoint(index);
    unsigned dim = index.getDim();
    Value shiftedIndex =
        linalg::IndexOp::create(rewriter, index.getLoc(), dim + 1);
    if (dim != reduced) {
      rewriter.replaceOp(index, shiftedIndex);
      continue;
    }
    Value part = linalg::IndexOp::create(rewriter, index.getLoc(), 0);
    Value first = arith::MulIOp::create(
        rewriter, index.getLoc(), part,
        arith::ConstantIndexOp::create(rewriter, index.getLoc(), slice));
    rewriter.replaceOp(index, arith::AddIOp::create(rewriter, index.getLoc(),
                                                    first, shiftedIndex));
  }
}

/// The second op of a split reduction: `split`'s parts folded into `op`'s
/// outputs, each by its combiner (`folds`).
static linalg::GenericOp foldParts(PatternRewriter &rewriter, Location loc,
                                   linalg::GenericOp op,
                                   linalg::GenericOp split,
                                   ArrayRef<Operation *> folds) {
  unsigned outputRank =
      cast<RankedTensorType>(op.getDpsInits().front().getType()).getRank();
  SmallVector<AffineMap> foldMaps;
  for (unsigned i = 0, e = folds.size(); i < e; ++i)
    foldMaps.push_back(rewriter.getMultiDimIdentityMap(outputRank + 1));
  for (unsigned i = 0, e = folds.size(); i < e; ++i)
    foldMaps.push_back(
        rewriter.getMultiDimIdentityMap(outputRank + 1).dropResult(0));
  SmallVector<utils::IteratorType> foldIterators(outputRank + 1,
                                                 utils::IteratorType::parallel);
  foldIterators.front() = utils::IteratorType::reduction;
  auto combined = linalg::GenericOp::create(
      rewriter, loc, op.getResultTypes(), split.getResults(), op.getDpsInits(),
      foldMaps, foldIterators,
      [&](OpBuilder &b, Location nested, ValueRange args) {
        SmallVector<Value> results;
        for (auto [i, fold] : llvm::enumerate(folds)) {
          Value accumulator = split.getRegionOutputArgs()[i];
          IRMapping mapping;
          for (Value operand : fold->getOperands())
            mapping.map(operand, operand == accumulator ? args[folds.size() + i]
                                                        : args[i]);
          results.push_back(b.clone(*fold, mapping)->getResult(0));
        }
        linalg::YieldOp::create(b, nested, results);
      });
  return combined;
}

/// A linalg.generic on tensors with one reduction dimension becomes two
/// (a column's sum; a row's only when it is very long): the first reduces
/// `parts` consecutive slices of that dimension side by side into a tensor
/// with a leading dimension of `parts`, each slice from the combiner's
/// neutral element; the second folds the parts into the original outputs.
/// The terms are combined in another order, which the combiners allow.
struct SplitReduction : public OpRewritePattern<linalg::GenericOp> {
  SplitReduction(MLIRContext *context, int64_t rows)
      : OpRewritePattern(context), rows(rows) {}
  int64_t rows;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() ||
        !llvm::all_of(op.getIndexingMapsArray(), [](AffineMap map) {
          return map.isProjectedPermutation();
        }))
      return rewriter.notifyMatchFailure(op, "expected tensors, permutations");
    SmallVector<unsigned> reductions;
    op.getReductionDims(reductions);
    unsigned numLoops = op.getNumLoops();
    if (reductions.size() != 1)
      return rewriter.notifyMatchFailure(op, "not one reduced dimension");
    unsigned reduced = reductions.front();
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    if (llvm::any_of(ranges, ShapedType::isDynamic))
      return rewriter.notifyMatchFailure(op, "dynamic loop ranges");
    // A row's reduction is split only when it is much longer: its warps
    // already run side by side for every row, and a layer norm's rows of
    // hundreds of elements would only gain a launch.
    if (reduced == numLoops - 1 && ranges[reduced] < kRowFactor * rows)
      return rewriter.notifyMatchFailure(op, "a row short enough");
    int64_t parts = partsFor(ranges[reduced], rows);
    if (parts == 1)
      return rewriter.notifyMatchFailure(op, "too short to split");
    SmallVector<Operation *> folds = combiners(op);
    if (folds.empty())
      return rewriter.notifyMatchFailure(op, "no reassociable combiners");
    if (op.hasDynamicShape())
      return rewriter.notifyMatchFailure(op, "dynamic shapes");
    // Each output indexed by all the parallel dimensions and not the
    // reduced one: its parts then add a dimension of their own.
    for (OpOperand &init : op.getDpsInitsMutable()) {
      AffineMap map = op.getMatchingIndexingMap(&init);
      if (map.isFunctionOfDim(reduced) || map.getNumResults() != numLoops - 1)
        return rewriter.notifyMatchFailure(op, "an output not over the rest");
    }
    // Floating-point folds only: an integer sum's overflow flags need not
    // hold in another order.
    if (!llvm::all_of(op.getDpsInits(), [](Value init) {
          return isa<FloatType>(getElementTypeOrSelf(init.getType()));
        }))
      return rewriter.notifyMatchFailure(op, "not a floating-point fold");

    Location loc = op.getLoc();
    MLIRContext *context = getContext();
    int64_t slice = ranges[reduced] / parts;
    // The first op's loops: the parts, then the original loops, the reduced
    // one walking a slice. Dimension d of the original is d + 1.
    unsigned numSplitLoops = numLoops + 1;
    AffineExpr partDim = getAffineDimExpr(0, context);
    auto shifted = [&](AffineMap map) { return map.shiftDims(1); };
    SmallVector<Value> inputs;
    SmallVector<AffineMap> maps;
    for (OpOperand *input : op.getDpsInputOperands()) {
      AffineMap map = op.getMatchingIndexingMap(input);
      std::optional<unsigned> position =
          map.getResultPosition(getAffineDimExpr(reduced, context));
      if (!position) {
        inputs.push_back(input->get());
        maps.push_back(shifted(map));
        continue;
      }
      // The reduced dimension of the input becomes [parts, slice].
      auto type = cast<RankedTensorType>(input->get().getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[*position] = slice;
      shape.insert(shape.begin() + *position, parts);
      SmallVector<ReassociationIndices> groups;
      for (unsigned d = 0, e = type.getRank(); d < e; ++d) {
        unsigned first = d <= *position ? d : d + 1;
        groups.push_back(d == *position ? ReassociationIndices{first, first + 1}
                                        : ReassociationIndices{first});
      }
      inputs.push_back(tensor::ExpandShapeOp::create(
          rewriter, loc, RankedTensorType::get(shape, type.getElementType()),
          input->get(), groups));
      SmallVector<AffineExpr> results(shifted(map).getResults());
      results.insert(results.begin() + *position, partDim);
      maps.push_back(AffineMap::get(numSplitLoops, 0, results, context));
    }
    // Partial results: a leading dimension of parts, from the neutral
    // element.
    SmallVector<Value> partials;
    for (auto [init, fold] : llvm::zip(op.getDpsInits(), folds)) {
      auto type = cast<RankedTensorType>(init.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape.insert(shape.begin(), parts);
      Value empty =
          tensor::EmptyOp::create(rewriter, loc, shape, type.getElementType());
      Value neutral = arith::ConstantOp::create(
          rewriter, loc, *arith::getNeutralElement(fold));
      partials.push_back(linalg::FillOp::create(rewriter, loc,
                                                ValueRange{neutral},
                                                ValueRange{empty})
                             .getResult(0));
    }
    for (OpOperand &init : op.getDpsInitsMutable()) {
      SmallVector<AffineExpr> results(
          shifted(op.getMatchingIndexingMap(&init)).getResults());
      results.insert(results.begin(), partDim);
      maps.push_back(AffineMap::get(numSplitLoops, 0, results, context));
    }
    SmallVector<utils::IteratorType> iterators(op.getIteratorTypesArray());
    iterators.insert(iterators.begin(), utils::IteratorType::parallel);
    auto split = linalg::GenericOp::create(rewriter, loc,
                                           ValueRange(partials).getTypes(),
                                           inputs, partials, maps, iterators);
    rewriter.inlineRegionBefore(op.getRegion(), split.getRegion(),
                                split.getRegion().begin());
    reindexSlices(rewriter, split, reduced, slice);
    rewriter.setInsertionPointAfter(split);
    linalg::GenericOp combined = foldParts(rewriter, loc, op, split, folds);
    rewriter.replaceOp(op, combined.getResults());
    return success();
  }
};

struct SplitReductionsPass
    : public loom::impl::LoomSplitReductionsBase<SplitReductionsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (rows < 1) {
      getOperation()->emitError() << "loom-split-reductions: rows must be "
                                     "at least 1, got "
                                  << static_cast<int64_t>(rows);
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<SplitReduction>(&getContext(), rows);
    // Each op is split once: the ops it becomes are a column reduction of
    // at most `rows` iterations a part and a fold of the parts, which is
    // split again only when there are enough of them.
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
