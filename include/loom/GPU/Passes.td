//===- Passes.td - Loom's GPU kernel passes ----------------*- tablegen -*-===//

#ifndef LOOM_GPU_PASSES_TD
#define LOOM_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomParallelLoopsToGpu
    : Pass<"loom-parallel-loops-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Run each outermost parallel loop nest as a GPU kernel launch";
  let description = [{
    Every `scf.parallel` that is not inside another one, and whose body a
    GPU can run (no calls, no heap allocations, no reductions of the loop
    itself), becomes a `gpu.launch` of one thread per iteration: the
    iterations are numbered row-major (the last dimension fastest, so that
    neighbouring threads touch neighbouring elements), `block-size` threads
    to a block, and each thread recovers its indices from its number.

    Where the body reduces along a row, a warp (32 threads) runs each
    iteration instead: an `scf.for` of at least 32 iterations whose every
    carried value is folded in by one operation with a neutral element
    (`addf`, `maxnumf`, ...: upstream's `matchReduction` and
    `arith::getNeutralElement`), and which loads along its induction
    variable (the innermost index of a load, in a dimension of unit
    stride, is the variable or the variable plus an offset) and never down
    a column (the variable in another index of a load whose innermost
    index the loop does not change; a gather, whose column each iteration
    loads, is no column), is split
    among the warp's threads, thread
    `l` taking iterations `l`, `l + 32`, ..., and the parts are combined by
    a butterfly of `gpu.shuffle xor`, after which every thread holds the
    result and the rest of the body runs alike in all of them. A row is
    then read 32 neighbouring elements at a time by 32 threads instead of
    whole by one. A reduction that walks down columns (a column's sum, or
    each part of one) keeps one thread per iteration, so that neighbouring
    threads read neighbouring columns, each adding its own in order. A
    body with another loop that contains no such reduction keeps one
    thread per iteration. `block-size` must be a multiple of 32
    for this. A full reduction left on the host (an `scf.for` outside any
    parallel loop carrying scalars, its results only stored right after it)
    becomes a kernel of one iteration, with the load of its initial value
    just before it: the host would otherwise read device memory. So does
    host code that loads scalars, computes with them and stores the results
    (the step's loss, stored for its output) when the host needs none of
    the values afterwards; views and constants stay on the host, and so
    does a load of the host's stack (`memref.alloca`). A `memref.global`
    read through `memref.get_global` is refused: it is the host's memory
    (`loom-lower-to-linalg` makes the step's constant tensors fills).
    Functions marked `loom.host` (an offload plan's host functions and the
    nests outlined from them) run on the host and are left as they are.
    The parallel loops nested in the body stay for
    `scf-parallel-for-to-nested-fors` to make sequential in each thread. A
    parallel loop a GPU cannot run (attention's loop over heads, which calls
    the runtime's GEMM) stays on the host; the nests inside it are launched
    in turn. Copies between buffers become loop nests first, so that they
    run on the device too. Each launch is wrapped in `memref.alloca_scope`:
    the launch's argument array goes on the host's stack where the launch
    is, and a host loop of launches would otherwise grow the stack with
    every iteration.

    An elementwise body (straight-line code, its loads before its stores)
    runs `thread-bytes` bytes of its narrowest loaded type per thread
    instead of one element: 8 iterations for bf16, 4 for f32 at 16 bytes,
    the factor halved until it divides the constant iteration count. A
    thread's iterations lie a grid's worth of threads apart, so that each
    load of a warp still reads neighbouring elements. One 2-byte load per
    thread keeps too few bytes in flight for a GPU's memory; the thread
    issues all its iterations' loads and arithmetic first, then their
    stores, which only a body whose stores write memory none of its loads
    reads (or the element the same iteration read, indexed by every
    induction variable) allows (`FillForwarding.h` tells buffers apart).
    `thread-bytes` 0 keeps a thread per element. With
    `contiguous-threads` (the default) a thread's iterations are
    consecutive instead: where the innermost dimension's trip count is a
    multiple of the thread's, they share the outer indices and the
    innermost one counts up from a multiple of their count, so that LLVM
    joins their neighbouring accesses into wide ones. A nest that streams
    through a buffer of unknown alignment along its innermost dimension
    (a step's argument) keeps its iterations a grid apart: LLVM could not
    widen those accesses, and a warp's narrow ones a thread's width apart
    touch several times the memory sectors their bytes fill.

    A kernel is told the alignment of each buffer it takes that the IR
    shows (`memref.assume_alignment`): an allocation's, through views at
    byte shifts of known multiples, and through the buffers a loop carries
    (the residual stream's), for buffers whose first element is at the
    aligned pointer (the element whose alignment the op asserts); its
    pointer parameters are otherwise of unknown alignment.

    Neighbouring nests share a launch, each on blocks of its own (the
    first nest's first; a block compares its number with where each
    nest's blocks end and runs that nest's code, as its own launch would):
    a launch costs the GPU a few microseconds however little it does, and
    the optimizer updates each parameter tensor in a nest of its own. A
    nest joins the previous one's launch when both are in one block, the
    operations between them are host operations that write no memory and
    read none the launch's nests write (they move before the first nest;
    those that compute what one moved before computes are folded into
    it), and it writes no memory the launch's nests read or write, nor
    reads memory they write (`FillForwarding.h` tells buffers apart: the
    step's parameters and optimizer state are tensors of their own). At
    most `nests-per-launch` nests share one launch, and no more than the
    4,096 bytes of parameters a kernel of PTX 8.0 may take (a buffer is
    passed as its descriptor: 8 bytes each for two pointers, the offset,
    the sizes and strides). A kernel computes again the views of the
    static arena it uses, from the arena, constants and the host's indices
    (the index arithmetic of a layer's offset included), instead of taking
    each view's descriptor.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", "256",
           "Threads per block">,
    Option<"threadBytes", "thread-bytes", "int64_t", "16",
           "Bytes of its narrowest loaded type each thread of an "
           "elementwise kernel loads (0: one element per thread)">,
    Option<"nestsPerLaunch", "nests-per-launch", "int64_t", "32",
           "The most neighbouring independent loop nests one launch runs "
           "(1: a launch per nest)">,
    Option<"contiguousThreads", "contiguous-threads", "bool", "true",
           "A thread of an elementwise kernel runs consecutive iterations "
           "where its buffers' alignment lets LLVM widen its accesses, "
           "instead of iterations a grid apart">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::scf::SCFDialect"];
}

def LoomWaitForDevice : Pass<"loom-wait-for-device", "::mlir::ModuleOp"> {
  let summary = "Make the host wait for the GPU before it touches memory";
  let description = [{
    The runtime's CUDA backend queues kernel launches and GEMMs on one
    stream without waiting for them (upstream's lowering would synchronize
    after every launch). In the host code of every function, this pass puts
    a call of `loom_rt_device_wait` before each operation outside kernels
    that reads or writes memory (a load or store of a scalar the optimizer
    computes on the host, say) when a launch or a call may have queued work
    since the last wait: at the start of a function, and of every block of
    a host loop or branch that queues work itself, it assumes some is
    queued. Allocation and freeing touch no data and need no wait, nor
    does a load of a function argument that only loads read (the runtime's
    learning rate and step number); the runtime waits itself before its collectives and at the end of the step.
    The runtime's wait returns at once when nothing was queued since the
    last one. Functions marked `loom.host` (an offload plan's host
    functions) touch host memory only and get no waits: the runtime's
    transfers and `loom_rt_host_begin` order them with the GPU.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

#endif // LOOM_GPU_PASSES_TD
