//===- LoomAutodiff.h - Reverse-mode differentiation of a block -*- C++ -*-===//
//
// The core of reverse-mode differentiation, shared by the loom-differentiate
// pass (a function body) and by ops with regions whose vector-Jacobian
// product differentiates their body (loom.scan). Each op contributes its own
// VJP through DifferentiableOpInterface; this walks the ops backward and sums
// the cotangents of values used more than once.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOMAUTODIFF_H
#define LOOM_DIALECT_LOOMAUTODIFF_H

#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>

namespace mlir {
namespace loom {

/// The cotangent reaching each value, summed over its uses.
class CotangentMap {
public:
  /// Adds `grad` to the cotangent of `value` (a loom.add after the first).
  void accumulate(OpBuilder &b, Location loc, Value value, Value grad);
  /// The cotangent of `value`; null when nothing reached it.
  Value lookup(Value value) const { return grads.lookup(value); }

private:
  llvm::DenseMap<Value, Value> grads;
};

/// A zero tensor of `type` (a ranked tensor), for cotangents nothing reached.
Value buildZeros(OpBuilder &b, Location loc, Type type);

/// Builds, at the rewriter's insertion point, the reverse pass of `ops`
/// (which appear in this order in one block and were not yet differentiated):
/// every op that some cotangent reaches contributes its vector-Jacobian
/// product, and the cotangents of its operands are added to `cotangents`.
/// Fails, after a diagnostic, at an op that cannot be differentiated. Ops
/// may replace themselves while differentiated (see DifferentiableOpInterface),
/// so `ops` must not be used afterwards.
LogicalResult backpropagate(RewriterBase &rewriter, ArrayRef<Operation *> ops,
                            CotangentMap &cotangents);

/// The pass of a differentiated function an op belongs to. loom-differentiate
/// records it in the op's location (a FusedLoc's metadata), which lowering
/// and bufferization carry to the ops and buffers made from it, so that the
/// memory plan can tell what the forward pass keeps for the backward pass.
/// The step's sums of the gradients over micro-batches and pipeline chunks
/// are marked `accumulation` by loom-build-train-step: gradients too.
enum class Phase { forward, backward, accumulation };

/// `loc` marked as belonging to `phase`.
Location withPhase(Location loc, Phase phase);

/// The phase `loc` records, outermost first; none for an op of no
/// differentiated function (the optimizer's, a forward-only entry's).
std::optional<Phase> getPhase(Location loc);

} // namespace loom
} // namespace mlir

#endif // LOOM_DIALECT_LOOMAUTODIFF_H
