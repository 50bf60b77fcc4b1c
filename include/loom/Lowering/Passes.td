//===- Passes.td - Loom's lowering to loops and calls ------*- tablegen -*-===//

#ifndef LOOM_LOWERING_PASSES_TD
#define LOOM_LOWERING_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomMatmulToBlas : Pass<"loom-matmul-to-blas", "::mlir::ModuleOp"> {
  let summary = "Replace linalg.matmul on memrefs with calls to the runtime's SGEMM";
  let description = [{
    Each `linalg.matmul` on f32 memrefs whose rows are contiguous becomes a
    call `loom_rt_sgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb,
    beta, C, ldc)` with row-major BLAS semantics. Transposition is read
    from the op's indexing maps. Beta is 1, since linalg accumulates into its
    output, unless the output was zero-filled before the product with
    nothing in between that may read or write its bytes (a copy into
    another buffer of the arena does not count): then the fill goes away
    and beta is 0.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
}

def LoomExpandScalarFunctions : Pass<"loom-expand-scalar-functions"> {
  let summary = "Replace each scalar function op by its arithmetic";
  let description = [{
    The lowering to linalg keeps a loop's scalar functions (GPT-2's GELU,
    `loom.scalar.gelu`, and the gradient through it,
    `loom.scalar.gelu_grad`) as ops of the `ScalarFunctionOpInterface`, so
    that passes on loops can recognize them (loom-gemm-epilogues). Once
    those have run, each becomes the arith and math ops its interface
    builds (`expand`), where it stood.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def LoomOutlineLoopNests : Pass<"loom-outline-loop-nests", "::mlir::ModuleOp"> {
  let summary = "Move each loop nest into a function of its own";
  let description = [{
    A training step lowers to many loop nests in one function, and LLVM's
    loop passes (induction-variable simplification above all) grow faster
    than linearly with the size of a function. Each parallel loop nest
    (`scf.parallel`), and each other loop nest that calls no function,
    becomes a call to a private function `<name>_loop<N>` that takes the
    values the nest uses (constants move in with it), with internal linkage
    and LLVM's `noinline`, so that LLVM optimizes the nests one at a time.
    Loops that call functions and are not parallel (the layer loop) stay
    where they are, and the nests inside them are outlined. A parallel nest
    whose outermost dimension has constant bounds, and that has enough work
    to be worth other threads (at least 32,768 iterations of its innermost
    bodies, or calls such as BLAS), takes the range [begin, end) of its
    outer iterations as its first two arguments and is marked
    `loom.parallel_for` (see `loom-lower-parallel-calls`). Outlined
    functions that are the same code are merged: the forward pass appears
    in three entry points, and ops of one shape recur.

    With `host-only`, only the functions marked `loom.host` are visited
    (an offload plan's host functions on a GPU target, whose other loops
    become kernels), and the functions outlined from them are marked
    `loom.host` too.
  }];
  let options = [Option<"hostOnly", "host-only", "bool", /*default=*/"false",
                        "Outline the nests of `loom.host` functions only">];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect"];
}

def LoomLowerReductions : Pass<"loom-lower-reductions"> {
  let summary = "Lower linalg reductions to loops that accumulate in registers";
  let description = [{
    A `linalg.generic` on buffers whose loops are parallel dimensions
    followed by reduction dimensions, with outputs indexed by the parallel
    dimensions only (row sums, row maxima, full sums), becomes an
    `scf.parallel` over the parallel dimensions around `scf.for` loops over
    the reductions that carry the outputs as iteration arguments: loaded
    once, stored once. The operation that folds a term into an accumulator
    gets the `reassoc` fast-math flag, so that LLVM vectorizes the
    reduction. Upstream's lowering accumulates through memory, which keeps
    these loops scalar. Other generics are left to it.

    A reduction into an output that a `linalg.fill` wrote before it, with
    nothing in between that may read or write the output's bytes, starts
    from the filled value instead of loading it, and the fill goes, when
    the output is indexed by every parallel dimension (so every element is
    overwritten) and no input may alias it. Buffers are told apart by the
    allocation they view and, in the static arena, by their bytes: a
    `memref.view` at a constant shift, or at one alternating between places
    from one loop iteration to the next; a loop's carried buffer is its
    initial one or what it yields. On a GPU the fill was a kernel of its
    own before each layer norm's statistics, softmax and sum of squares.

    With `parallel-outside`, a reduction whose reduced dimensions come
    before parallel ones (a column sum: rows reduced, columns parallel)
    becomes one `scf.parallel` over the parallel dimensions too, the rows
    summed in each iteration. The GPU target asks for it: upstream's loop
    over the rows around a parallel loop over the columns was a kernel
    launch per row, about 800,000 a step for GPT-2 124M at 8 x 1024. On
    the CPU the rows stay outside, where each row's loop over the columns
    vectorizes and the runtime's threads split it.
  }];
  let options = [Option<"parallelOutside", "parallel-outside", "bool",
                        /*default=*/"false",
                        "Put the parallel loop outside the reduction loops "
                        "whatever the order of the dimensions">];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def LoomLowerParallelCalls
    : Pass<"loom-lower-parallel-calls", "::mlir::ModuleOp"> {
  let summary = "Run the outlined parallel loops through the runtime's threads";
  let description = [{
    Runs on the LLVM dialect, after the conversion from func. A function
    marked `loom.parallel_for` runs iterations [begin, end) of a parallel
    loop, its first two arguments, with the loop's values as the others.
    Each call to it becomes a call `loom_rt_parallel_for(task, context,
    begin, end)`: the other arguments are stored in a struct on the caller's
    stack (`context`), and `task` is a new function `<name>_task(context,
    from, to)` that loads them and calls the loop's function on [from, to).
    The runtime splits the range among its threads.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def LoomApproximateMath : Pass<"loom-approximate-math"> {
  let summary = "Replace transcendental functions by polynomials that vectorize";
  let description = [{
    Lowered to LLVM, `math.exp`, `math.tanh` and `math.log` become calls
    into libm, one element at a time, which keeps LLVM from vectorizing the
    loops of softmax, GELU and the loss around them. This pass replaces them
    (and the other functions upstream MLIR approximates) on f32 by the
    polynomial approximations of upstream MLIR, which are accurate to a few
    units in the last place and made of arithmetic that vectorizes.

    With `gpu-fast-division`, f32 divisions inside `gpu.module`s (the
    kernels) get the `afn` fast-math flag, which NVPTX lowers to
    `div.approx.f32` (within 2 units in the last place for divisors of
    magnitude 2^-126 to 2^126) where IEEE rounding takes a subroutine of a
    dozen instructions and a branch. The step's divisors are in that
    range: the tanh polynomial's denominator (GELU), softmax sums of at
    least 1, AdamW's bias corrections and square roots plus epsilon, loss
    scales, layer norms' square roots; a gradient norm above 2^126 (the
    clip factor's divisor) would give a factor of 0 instead of about
    1e-38. Square roots are libdevice's, approximate on the GPU already.
    The host's divisions keep IEEE rounding.

    With `gpu-libdevice-exp`, `math.exp` inside `gpu.module`s is left for
    the GPU lowering, which calls libdevice's `__nv_expf`: the hardware's
    `ex2.approx` after a range reduction, within 2 units in the last
    place like the polynomial, in about 11 instructions where the
    polynomial takes 25 (the loss's gradient computes one per logit). The
    other functions stay polynomials, as on the host.
  }];
  let options = [
    Option<"gpuFastDivision", "gpu-fast-division", "bool",
           /*default=*/"false",
           "Approximate f32 divisions in GPU kernels">,
    Option<"gpuLibdeviceExp", "gpu-libdevice-exp", "bool",
           /*default=*/"false",
           "Leave exp in GPU kernels to libdevice's __nv_expf">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

#endif // LOOM_LOWERING_PASSES_TD
