//===- FuseElementwise.cpp - The loom-fuse-elementwise pass ---------------===//
//
// The lowering to linalg makes one loop per op: a bias add, its GELU, the
// widening of a bf16 operand before the op that reads it, each write a
// tensor the next one reads once. Fusing such a producer into its one
// consumer removes the tensor (a buffer of the arena, a pass over memory,
// on a GPU a kernel launch). MLIR's elementwise fusion does the rewriting;
// this pass says where: only where the fused loop computes each element
// once, no work moves into a loop, and no step needs more memory.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMFUSEELEMENTWISE
#include "loom/Conversion/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The bytes of a statically shaped tensor; none for other values, which
/// own no buffer of their own, and an unknown size for dynamic shapes.
std::optional<int64_t> tensorBytes(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    return 0;
  if (!type.hasStaticShape() || !type.getElementType().isIntOrFloat())
    return std::nullopt;
  return type.getNumElements() *
         llvm::divideCeil(type.getElementTypeBitWidth(), 8);
}

/// Whether `value` is read at `consumer` or after it anyway, so that
/// reading it from `consumer` instead of from its producer keeps it no
/// longer: a value of an enclosing block (an argument, a conversion
/// hoisted out of a loop) lives through the whole block.
bool isLiveAt(Value value, Operation *consumer) {
  Block *block = consumer->getBlock();
  if (value.getParentBlock() != block)
    return true;
  return llvm::any_of(value.getUsers(), [&](Operation *user) {
    Operation *ancestor = block->findAncestorOpInBlock(*user);
    return ancestor &&
           (ancestor == consumer || consumer->isBeforeInBlock(ancestor));
  });
}

/// The bytes `op` allocates for its results: its destinations that are
/// new tensors.
int64_t newDestinationBytes(Operation *op) {
  int64_t bytes = 0;
  for (Value init : cast<DestinationStyleOpInterface>(op).getDpsInits())
    if (init.getDefiningOp<tensor::EmptyOp>())
      bytes += tensorBytes(init).value_or(0);
  return bytes;
}

/// Whether any op between `producer` and `consumer` computes into a
/// buffer, or may allocate one: then a tensor kept alive from one to the
/// other adds to what is live there.
bool computesBetween(Operation *producer, Operation *consumer) {
  for (Operation *op = producer->getNextNode(); op != consumer;
       op = op->getNextNode())
    if (!isPure(op) || isa<DestinationStyleOpInterface>(op))
      return true;
  return false;
}

/// Whether fusing `producer` into `consumer` could raise the step's peak.
/// The fused loop reads the producer's operands where the consumer runs,
/// so those the producer was the last to read live until then, in place
/// of the producer's results: a gradient rounded to bf16 and widened again
/// much later must not keep its f32 original instead of the bf16 copy.
/// Where nothing runs in between, only the two loops' own moments count:
/// the fused loop holds the producer's operands and the consumer's new
/// results at once, the two loops held the producer's results with
/// either.
bool raisesPeak(Operation *producer, Operation *consumer) {
  int64_t removed = 0, kept = 0;
  for (Value result : producer->getResults()) {
    std::optional<int64_t> bytes = tensorBytes(result);
    if (!bytes)
      return true;
    removed += *bytes;
  }
  for (Value operand : producer->getOperands()) {
    if (isLiveAt(operand, consumer))
      continue;
    std::optional<int64_t> bytes = tensorBytes(operand);
    if (!bytes)
      return true;
    kept += *bytes;
  }
  if (kept <= removed)
    return false;
  if (computesBetween(producer, consumer))
    return true;
  int64_t made = newDestinationBytes(consumer);
  return kept + made > std::max(kept + removed, removed + made);
}

/// Whether the producer of `operand` may be fused into its consumer: the
/// consumer is the producer's only user, so nothing is computed twice;
/// both lie in one block, so that nothing hoisted out of a loop (the
/// parameters' conversions) moves back in; and the step's peak cannot
/// rise for it.
bool isFusible(OpOperand *operand) {
  Operation *producer = operand->get().getDefiningOp();
  Operation *consumer = operand->getOwner();
  return producer && producer->getBlock() == consumer->getBlock() &&
         llvm::all_of(producer->getUsers(),
                      [&](Operation *user) { return user == consumer; }) &&
         !raisesPeak(producer, consumer);
}

struct FuseElementwisePass
    : loom::impl::LoomFuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, isFusible);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
