//===- OffloadHostOps.h - What an offloaded step runs on the host -*- C++
//-*-===//
//
// The analysis loom-place-offload places the step by: which values are the
// host's, and which ops of the step's block the host computes.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_OFFLOADHOSTOPS_H
#define LOOM_LIB_TRANSFORMS_OFFLOADHOSTOPS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace mlir {
namespace loom {
namespace offload {

/// Whether `op` is computation the host may run: pure, without regions,
/// and no communication (the collectives run on the device, on what the
/// host sends back).
bool isHostComputable(Operation *op);

/// Whether `value` is one of the step's parameters or optimizer state
/// (which offload keeps on the host).
bool isHostArgument(func::FuncOp step, Value value);

/// Whether `value` is host memory the host function reads where it lies:
/// a master weight, optimizer state, or a gradient the device sent (or
/// summed over micro-batches there).
bool isHostValue(func::FuncOp step, Value value);

/// Whether `op` and everything made from it in its block can run on the
/// host: pure ops without regions or communication, up to the optimizer's
/// updates and the step's results (the clipping norm, once every gradient
/// it reads is on the host, when no collective sums it over ranks).
bool feedsOnlyHost(Operation *op, llvm::DenseMap<Operation *, bool> &known);

/// Whether `op` converts a value to a narrower element type, unscaled.
bool isNarrowing(Operation *op);

/// The ops of the step's block that move to the host: the optimizer
/// updates, and the pure ops between the host's arguments (parameters,
/// state, constants) and the updates or the step's results (the views of
/// the parameters an update reads, the reshapes of what it returns), and
/// the narrowing of what the host computes for the device, which then
/// crosses in fewer bytes.
FailureOr<llvm::SetVector<Operation *>> collectHostOps(func::FuncOp step);

/// The ops computed from the gradients the device sent whose tensors the
/// device then reads: the clipping norm's sums of squares, which tensor and
/// pipeline parallelism and ZeRO-2 and 3 add up over ranks. Left on the
/// device, they would keep it reading its own gradients, which could then
/// not cross layer by layer; the host computes them in a function of their
/// own, called before the collective. Listed from the block's end.
llvm::SetVector<Operation *> collectHostSums(func::FuncOp step);

/// Whether `use` reads a parameter for its optimizer update only: the
/// update itself, or a view of the parameter (the rank's slice of it under
/// ZeRO-1/2) that only updates read.
bool isReadByUpdatesOnly(OpOperand &use);

/// Whether `op` calls a function of the host's (loom.host).
bool isHostCall(Operation *op);

} // namespace offload
} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_TRANSFORMS_OFFLOADHOSTOPS_H
