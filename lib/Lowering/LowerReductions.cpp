//===- LowerReductions.cpp - The loom-lower-reductions pass ---------------===//
//
// Upstream's lowering of a linalg reduction loads and stores the output
// element in every iteration of the reduction loop. Through memory, LLVM
// sees a loop-carried dependence it cannot break (it cannot prove the
// output does not alias the inputs), so the softmax over the vocabulary,
// layer norm's statistics and the gradient norm run one element at a time.
// Here the reduction loop carries the accumulator in a register instead, and
// the combining operation may be reassociated, so that it vectorizes.
//
//===----------------------------------------------------------------------===//

#include "loom/Buffers/FillForwarding.h"

#include "loom/Lowering/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMLOWERREDUCTIONS
#include "loom/Lowering/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The loop dimension each result of a projected permutation reads.
SmallVector<unsigned> dimsOf(AffineMap map) {
  SmallVector<unsigned> dims;
  for (AffineExpr expr : map.getResults())
    dims.push_back(cast<AffineDimExpr>(expr).getPosition());
  return dims;
}

/// Rewrites a linalg.generic on buffers with reduction dimensions, whose
/// outputs are indexed by its parallel dimensions alone, into an
/// scf.parallel over the parallel dimensions around scf.for loops over the
/// reductions that carry the outputs as iteration arguments. With
/// `parallelOutside`, also where a reduction dimension comes before a
/// parallel one.
struct ReductionToLoops : public OpRewritePattern<linalg::GenericOp> {
  ReductionToLoops(MLIRContext *context, bool parallelOutside)
      : OpRewritePattern(context), parallelOutside(parallelOutside) {}
  bool parallelOutside;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics())
      return rewriter.notifyMatchFailure(op, "expected buffers");
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    unsigned numLoops = iterators.size();
    SmallVector<unsigned> parallelDims, reductionDims;
    for (auto [d, iterator] : llvm::enumerate(iterators))
      (iterator == utils::IteratorType::parallel ? parallelDims : reductionDims)
          .push_back(d);
    if (reductionDims.empty())
      return rewriter.notifyMatchFailure(op, "no reduction");
    if (!parallelOutside && !parallelDims.empty() &&
        parallelDims.back() > reductionDims.front())
      return rewriter.notifyMatchFailure(op, "reductions are not innermost");
    for (AffineMap map : op.getIndexingMapsArray())
      if (!map.isProjectedPermutation())
        return rewriter.notifyMatchFailure(op, "indexing is not a permutation");
    for (OpOperand &init : op.getDpsInitsMutable())
      for (unsigned d : dimsOf(op.getMatchingIndexingMap(&init)))
        if (iterators[d] != utils::IteratorType::parallel)
          return rewriter.notifyMatchFailure(op, "output along a reduction");
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();
    if (llvm::any_of(bounds, ShapedType::isDynamic))
      return rewriter.notifyMatchFailure(op, "dynamic bounds");
    SmallVector<linalg::FillOp> fills = findForwardedFills(op, parallelDims);

    Location loc = op.getLoc();
    auto index = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(rewriter, loc, v);
    };
    Block &body = op.getRegion().front();
    auto yield = cast<linalg::YieldOp>(body.getTerminator());
    SmallVector<Value> ivs(numLoops);
    // Loads of `operand` at the current loop indices.
    auto load = [&](OpBuilder &b, OpOperand &operand) -> Value {
      SmallVector<Value> indices;
      for (unsigned d : dimsOf(op.getMatchingIndexingMap(&operand)))
        indices.push_back(ivs[d]);
      return memref::LoadOp::create(b, loc, operand.get(), indices);
    };

    auto buildReduction = [&](OpBuilder &b) {
      SmallVector<Value> inits;
      for (auto [init, fill] : llvm::zip(op.getDpsInitsMutable(), fills))
        inits.push_back(fill ? fill.getDpsInputs()[0] : load(b, init));
      // One scf.for per reduction dimension, the accumulators threaded
      // through all of them.
      std::function<SmallVector<Value>(OpBuilder &, unsigned, ValueRange)>
          nest = [&](OpBuilder &nb, unsigned r,
                     ValueRange accumulators) -> SmallVector<Value> {
        unsigned d = reductionDims[r];
        auto loop = scf::ForOp::create(
            nb, loc, index(0), index(bounds[d]), index(1), accumulators,
            [&](OpBuilder &lb, Location, Value iv, ValueRange carried) {
              ivs[d] = iv;
              if (r + 1 < reductionDims.size()) {
                scf::YieldOp::create(lb, loc, nest(lb, r + 1, carried));
                return;
              }
              IRMapping mapping;
              for (OpOperand *input : op.getDpsInputOperands())
                mapping.map(body.getArgument(input->getOperandNumber()),
                            load(lb, *input));
              for (auto [i, acc] : llvm::enumerate(carried))
                mapping.map(body.getArgument(op.getNumDpsInputs() + i), acc);
              for (Operation &inner : body.without_terminator()) {
                if (auto idx = dyn_cast<linalg::IndexOp>(inner)) {
                  mapping.map(idx.getResult(), ivs[idx.getDim()]);
                  continue;
                }
                lb.clone(inner, mapping);
              }
              SmallVector<Value> next;
              for (Value v : yield.getOperands())
                next.push_back(mapping.lookupOrDefault(v));
              allowReassociation(next, carried);
              scf::YieldOp::create(lb, loc, next);
            });
        return SmallVector<Value>(loop.getResults());
      };
      SmallVector<Value> results = nest(b, 0, inits);
      for (auto [init, result] : llvm::zip(op.getDpsInitsMutable(), results)) {
        SmallVector<Value> indices;
        for (unsigned d : dimsOf(op.getMatchingIndexingMap(&init)))
          indices.push_back(ivs[d]);
        memref::StoreOp::create(b, loc, result, init.get(), indices);
      }
    };

    if (parallelDims.empty()) {
      buildReduction(rewriter);
    } else {
      SmallVector<Value> lower(parallelDims.size(), index(0)),
          steps(parallelDims.size(), index(1));
      SmallVector<Value> upper;
      for (unsigned d : parallelDims)
        upper.push_back(index(bounds[d]));
      scf::ParallelOp::create(
          rewriter, loc, lower, upper, steps,
          [&](OpBuilder &b, Location, ValueRange parallelIvs) {
            for (auto [d, iv] : llvm::zip(parallelDims, parallelIvs))
              ivs[d] = iv;
            buildReduction(b);
          });
    }
    rewriter.eraseOp(op);
    for (linalg::FillOp fill : fills)
      if (fill)
        rewriter.eraseOp(fill);
    return success();
  }

  /// For each output of `op`, the fill of it that `op` would read first, if
  /// the reduction can start from the fill's value instead: `op` overwrites
  /// every element (its output is indexed by all its parallel dimensions)
  /// and reads the output only as its accumulator. The fill then writes
  /// values nothing reads.
  static SmallVector<linalg::FillOp>
  findForwardedFills(linalg::GenericOp op, ArrayRef<unsigned> parallelDims) {
    SmallVector<linalg::FillOp> fills;
    for (OpOperand &init : op.getDpsInitsMutable()) {
      SmallVector<unsigned> dims = dimsOf(op.getMatchingIndexingMap(&init));
      llvm::sort(dims);
      bool readElsewhere = llvm::any_of(op.getDpsInputs(), [&](Value input) {
        return !areDisjoint(input, init.get());
      });
      linalg::FillOp fill;
      if (ArrayRef(dims) == parallelDims && !readElsewhere)
        fill = findFillReadBy(op, init.get());
      // A fill of another type converts its value, which the loop would not.
      if (fill && fill.getDpsInputs()[0].getType() !=
                      getElementTypeOrSelf(init.get().getType()))
        fill = {};
      fills.push_back(fill);
    }
    return fills;
  }

  /// Lets LLVM reassociate the float operation that folds each new term into
  /// an accumulator, which is what vectorizing the reduction needs. The
  /// result stays deterministic: the order is fixed when the code is
  /// compiled.
  static void allowReassociation(ValueRange next, ValueRange carried) {
    for (auto [value, acc] : llvm::zip(next, carried)) {
      auto fastmath = dyn_cast_or_null<arith::ArithFastMathInterface>(
          value.getDefiningOp());
      if (!fastmath ||
          !llvm::is_contained(value.getDefiningOp()->getOperands(), acc))
        continue;
      Operation *combine = value.getDefiningOp();
      combine->setAttr(fastmath.getFastMathAttrName(),
                       arith::FastMathFlagsAttr::get(
                           combine->getContext(),
                           fastmath.getFastMathFlagsAttr().getValue() |
                               arith::FastMathFlags::reassoc));
    }
  }
};

struct LowerReductionsPass
    : public loom::impl::LoomLowerReductionsBase<LowerReductionsPass> {
  using LoomLowerReductionsBase::LoomLowerReductionsBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ReductionToLoops>(&getContext(), parallelOutside);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
