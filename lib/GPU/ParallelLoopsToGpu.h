//===- ParallelLoopsToGpu.h - The pass's parts ------------------*- C++ -*-===//
//
// The pass (ParallelLoopsToGpu.cpp) groups loop nests into launches; these
// are the parts it calls, each file one concern.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_GPU_PARALLELLOOPSTOGPU_H
#define LOOM_LIB_GPU_PARALLELLOOPSTOGPU_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::loom::loops_to_gpu {
//===----------------------------------------------------------------------===//
// What runs on the device (HostWork.cpp)
//===----------------------------------------------------------------------===//

/// Whether the nest of `loop`, the loop included, can be one kernel.
bool nestRunsOnDevice(scf::ParallelOp loop);

/// Replaces a copy by the loop nest of its elements, which runs on the device
/// like any other: lowered as it is, the copy is a memcpy on the host.
void copyAsLoop(memref::CopyOp copy);

/// Puts `loop`, a reduction to scalars on the host whose results are only
/// stored right after it, in a parallel loop of one iteration, to run as a
/// kernel (of one warp if it is a warp reduction). A load of an initial
/// value just before it, which nothing else reads, goes with it, and so
/// does a store of that value just before the load.
void wrapHostReduction(scf::ForOp loop);

/// wrapHostScalars for each run of `block`.
void wrapHostScalars(Block &block);

/// Whether `op` queues work on the device: a launch, or a call, which may
/// queue some (the runtime's GEMMs and collectives run on the device's
/// stream; a function of the module launches). The runtime's functions that
/// touch memory from the host wait themselves.
bool queuesWork(Operation *op);

/// Whether `load` reads an argument of its function that is only ever
/// loaded from (the runtime's learning rate and step number), in a function
/// whose callers in the module queue no device work (the entry points'
/// wrappers): no work on the device writes it.
bool readsConstantArgument(memref::LoadOp load);

//===----------------------------------------------------------------------===//
// Reductions a warp shares (WarpReductions.cpp)
//===----------------------------------------------------------------------===//

/// The threads of a warp, which exchange values by shuffles.
inline constexpr int64_t kWarpSize = 32;

/// Whether `loop` only reduces: it carries accumulators of warp combiners
/// alone and writes no memory, which its iterations split among threads
/// would write in another order.
bool onlyReduces(scf::ForOp loop);

/// The reduction loops of a kernel's body a warp shares, outermost first
/// (none inside another). Empty when the body does other work a warp could
/// not share: a loop that is not a shared reduction and contains none,
/// which each of the warp's threads would run whole.
SmallVector<scf::ForOp> warpReductions(Block &body);

/// Splits the iterations of `loop` among the threads of a warp, thread
/// `lane` taking every 32nd from its own, and combines the threads' parts by
/// a butterfly of shuffles, after which every thread holds the whole
/// result. The loop's initial values enter through thread 0's part, so that
/// each thread has read them before the shuffles that any thread's later
/// stores wait for. Code outside the loop runs in every thread of the warp
/// alike, storing the same values.
void shareAmongWarp(scf::ForOp loop, Value lane);

//===----------------------------------------------------------------------===//
// What a kernel takes from the host (KernelArguments.cpp)
//===----------------------------------------------------------------------===//

/// The values a kernel of `region` takes from the host, views it can compute
/// again replaced by their buffers and indices, into `arguments`. Constants
/// go into the kernel (gpu-kernel-outlining).
void collectKernelArguments(Region &region, SetVector<Value> &arguments);

/// The bytes of a kernel's parameters for `arguments`: a memref is passed
/// as its descriptor (two pointers, the offset, the sizes and strides);
/// a scalar takes at most 8.
int64_t getArgumentBytes(const SetVector<Value> &arguments);

/// Computes in `launchOp`'s kernel the views and indices it uses that
/// isSinkableView and isSinkableIndex allow.
void sinkViews(gpu::LaunchOp launchOp);

/// The alignment in bytes, a power of two, that the IR shows `buffer`'s
/// aligned pointer has (1 for the step's arguments, which the runtime
/// packs one after the other).
int64_t getKnownAlignment(Value buffer);

/// Tells the kernel the alignment of each buffer it takes that the host
/// allocated aligned (the static arena, its views computed in the kernel,
/// the buffers a layer loop carries): a kernel's parameters are otherwise
/// pointers of unknown alignment, and LLVM cannot join neighbouring
/// accesses into one wide one.
void assumeAlignments(gpu::LaunchOp launchOp);
} // namespace mlir::loom::loops_to_gpu

#endif // LOOM_LIB_GPU_PARALLELLOOPSTOGPU_H
