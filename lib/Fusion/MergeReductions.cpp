//===- MergeReductions.cpp - The loom-merge-reductions pass ---------------===//
//
// The loss's gradient recomputes the softmax statistics the loss computed,
// with the same loops (or the same loom.softmax_stats) over the same
// logits: a pass over the logits each, [tokens, vocabulary] in size, for a
// result of one value per token. Once the step is one function the second
// copy can read the first's results.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"

#include "loom/Fusion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMMERGEREDUCTIONS
#include "loom/Fusion/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// Whether every use of `value` only reads it: as a loop's operand, by a
/// `tensor.extract`, or through a reshape or slice whose uses only read.
bool isOnlyRead(Value value) {
  return llvm::all_of(value.getUses(), [](OpOperand &use) {
    Operation *user = use.getOwner();
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(user))
      return linalgOp.isDpsInput(&use);
    if (isa<tensor::ExtractOp>(user))
      return true;
    if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp,
            tensor::ExtractSliceOp>(user))
      return isOnlyRead(user->getResult(0));
    return false;
  });
}

/// Whether `a` and `b` hold the same values because they are computed
/// alike from the same values: a reshape or slice of one tensor (a padded
/// vocabulary's logits are read through a slice of its real columns), a
/// fill of one value into new tensors, new tensors of one type.
bool areSameTensor(Value a, Value b) {
  if (a == b)
    return true;
  Operation *x = a.getDefiningOp(), *y = b.getDefiningOp();
  if (!x || !y || a.getType() != b.getType() || x->getName() != y->getName() ||
      x->getAttrDictionary() != y->getAttrDictionary())
    return false;
  if (auto empty = dyn_cast<tensor::EmptyOp>(x))
    return empty.getDynamicSizes().empty();
  if (!isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp,
           tensor::ExtractSliceOp, linalg::FillOp>(x) ||
      x->getNumOperands() != y->getNumOperands())
    return false;
  return llvm::all_of(
      llvm::zip(x->getOperands(), y->getOperands()), [](auto pair) {
        return areSameTensor(std::get<0>(pair), std::get<1>(pair));
      });
}

/// Whether `later` computes what `earlier` does.
bool computesTheSame(Operation *earlier, Operation *later) {
  DenseMap<Value, Value> mapped;
  return OperationEquivalence::isEquivalentTo(
      later, earlier,
      [&](Value a, Value b) {
        return success(mapped.lookup(a) == b || areSameTensor(a, b));
      },
      [&](Value a, Value b) { mapped[a] = b; },
      OperationEquivalence::IgnoreLocations);
}

/// A reduction on tensors whose results are only read: a linalg.generic
/// with reduction loops, or a loom op left for the runtime (the loss's
/// softmax statistics), without side effects or regions: a Pure op's
/// results depend on its operands and attributes alone.
bool isMergeable(Operation *op) {
  if (!isMemoryEffectFree(op) || !llvm::all_of(op->getResults(), isOnlyRead))
    return false;
  if (auto generic = dyn_cast<linalg::GenericOp>(op))
    return generic.hasPureTensorSemantics() &&
           generic.getNumReductionLoops() > 0;
  return isa<LoomDialect>(op->getDialect()) && op->getNumRegions() == 0 &&
         op->getNumResults() > 0;
}

struct MergeReductionsPass
    : loom::impl::LoomMergeReductionsBase<MergeReductionsPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    getOperation()->walk([&](Block *block) {
      SmallVector<Operation *> earlier;
      for (Operation &op : llvm::make_early_inc_range(*block)) {
        if (!isMergeable(&op))
          continue;
        auto same = llvm::find_if(
            earlier, [&](Operation *e) { return computesTheSame(e, &op); });
        if (same == earlier.end()) {
          earlier.push_back(&op);
          continue;
        }
        SmallVector<Value> operands(op.getOperands());
        rewriter.replaceOp(&op, (*same)->getResults());
        eraseUnused(rewriter, operands);
      }
    });
  }

  /// The destination's fill and new tensor, and the reshapes and slices,
  /// that only the merged loop read. An op may be reached twice (a loop
  /// that read a tensor and a reshape of it): it is erased once.
  static void eraseUnused(RewriterBase &rewriter, ValueRange values) {
    SmallVector<Operation *> worklist;
    for (Value value : values)
      if (Operation *op = value.getDefiningOp())
        worklist.push_back(op);
    llvm::SmallPtrSet<Operation *, 8> erased;
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (erased.contains(op) || !op->use_empty() ||
          !isa<linalg::FillOp, tensor::EmptyOp, tensor::CollapseShapeOp,
               tensor::ExpandShapeOp, tensor::ExtractSliceOp>(op))
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          worklist.push_back(def);
      erased.insert(op);
      rewriter.eraseOp(op);
    }
  }
};
} // namespace
