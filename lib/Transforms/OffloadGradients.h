//===- OffloadGradients.h - Gradients that cross as made --------*- C++ -*-===//
//
// The rewrites by which loom-place-offload lets the gradients it sends to
// the host cross as the backward pass makes them, layer by layer
// (loom-stream-transfers), instead of after it: a mixed-precision stack
// widened in the layer loop, and micro-batches' sums made on the host.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_OFFLOADGRADIENTS_H
#define LOOM_LIB_TRANSFORMS_OFFLOADGRADIENTS_H

#include "loom/Dialect/LoomDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir {
namespace loom {
namespace offload {

/// Whether `grad`, a call's result, is a stack its callee's layer loop
/// makes (or that stack widened after the loop): what crosses layer by
/// layer once the call is inlined.
bool isStackedByLayerLoop(Value grad);

/// Mixed precision: where result `result` of `call` is a gradient the
/// callee's layer loop stacks in the step's precision and widens after the
/// loop, widens each layer's gradient in the loop instead (same elements).
void widenInLoop(func::CallOp call, unsigned result);

/// Micro-batches in a loop: where `sent` carries the loop's sum of a
/// gradient, from +0, to the host, and nothing else reads it, each
/// micro-batch's gradient crosses instead and the host sums them. Returns
/// the transfer in the loop, or null.
TransferOp accumulateOnHost(TransferOp sent);

/// A pipeline's micro-batches, each a backward call of its own: where
/// `sent` carries their sum (the first one's gradient plus the next's, and
/// so on) to the host, and nothing else reads a partial sum, each call's
/// gradient crosses after it and the host sums them. Returns the
/// transfers, in order, or none.
SmallVector<TransferOp> accumulateCallsOnHost(TransferOp sent);

} // namespace offload
} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_TRANSFORMS_OFFLOADGRADIENTS_H
