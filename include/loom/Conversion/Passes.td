//===- Passes.td - Loom's lowering passes ------------------*- tablegen -*-===//

#ifndef LOOM_CONVERSION_PASSES_TD
#define LOOM_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomLowerToLinalg : Pass<"loom-lower-to-linalg", "::mlir::ModuleOp"> {
  let summary = "Lower loom ops to linalg, tensor and scf ops on tensors";
  let description = [{
    Matrix products become `linalg.matmul` (with transposed indexing maps
    where an operand is read transposed), which `loom-matmul-to-blas` later
    turns into BLAS calls. Every other op becomes `linalg.generic` ops over
    free reshapes and slices of its operands; the token-embedding gradient
    is an `scf.for` scatter-add. A sum a loop carries from a constant,
    which nothing else reads (the gradient sums over micro-batches), is
    written into, so that bufferization updates it in place. Every
    tensor of one repeated value (`arith.constant` of a splat) becomes a
    `linalg.fill` of a `tensor.empty`: bufferized, a constant would be a
    global of the artifact, in the host's memory, which a GPU's kernels
    cannot read, copied before it is written. The loops
    compute in f32: an op of the layers on bf16 or f16 tensors (the
    `MixedPrecision` trait) becomes the op on f32 between `loom.convert`
    loops that widen its operands and round its results; other ops take
    f32 only.

    With `fused-attention` (the default), causal attention and its
    gradient stay `loom` ops on tensors, on their storage type, which
    bufferization makes calls of the runtime's fused attention
    (`loom_rt_attention`, `loom_rt_attention_grad`): no [T, T] scores in
    memory. Heads of more than `fused-attention-max-head-dim` channels (0:
    no bound), and an op whose operands are of two element types, get the
    loops instead: the products per (batch, head) pair, the softmax and its
    gradient, with the [T, T] scores and probabilities as tensors. With
    `attention-query-sums` (the cuda target), a fused gradient stored in
    bf16 or f16 is marked `query_sums`: the GPU's tensor-core kernels sum
    the query gradient in f32 scratch that every block of keys adds its
    share to, which bufferization allocates with the call's other scratch
    (`loom_attention_grad_scratch`, abi.h).

    The token table's gradient is a scatter-add of the tokens' rows, each
    element's additions in token order, so that the result does not depend
    on where it is computed. With `sorted-token-gradient` (the default) it
    is a `loom.scatter_add_rows`, which bufferization makes a call of the
    runtime's `loom_rt_scatter_add_rows`: the runtime sorts the tokens by
    row and adds each row's with a thread per column (a step of more tokens
    than its int32 positions hold, 2^31, gets the loops). Otherwise it is a
    parallel loop over the table's columns, each walking every token. With
    `embedding-row-blocks` N > 1, the table's rows split into
    B equal blocks (B the largest divisor of the rows up to N), interleaved
    (block k holds rows k, k + B, ...: text's frequent tokens have
    neighbouring ids, and a thread's additions are a chain through
    memory), and each (block, column) pair is an iteration that walks
    every token and adds those of its block's rows: B times the parallel
    iterations (a GPU's 768 threads for GPT-2 become 22,272) for B reads of
    the token ids, and the same sums in the same order, bit for bit.
  }];
  let options = [
    Option<"fusedAttention", "fused-attention", "bool", /*default=*/"true",
           "Leave causal attention to the runtime's fused kernels">,
    Option<"fusedAttentionMaxHeadDim", "fused-attention-max-head-dim",
           "int64_t", /*default=*/"0",
           "The largest head the fused kernels take (0: any)">,
    Option<"attentionQuerySums", "attention-query-sums", "bool",
           /*default=*/"false",
           "Mark fused attention gradients stored in bf16 or f16 "
           "query_sums: their kernels sum the query gradient in f32 "
           "scratch">,
    Option<"sortedTokenGradient", "sorted-token-gradient", "bool",
           /*default=*/"true",
           "The token table's gradient as loom.scatter_add_rows, which the "
           "runtime computes, rather than loops">,
    Option<"runtimeSoftmaxStats", "runtime-softmax-stats", "bool",
           /*default=*/"false",
           "The loss's softmax statistics over whole rows as "
           "loom.softmax_stats, which the runtime computes, rather than "
           "loops">,
    Option<"embeddingRowBlocks", "embedding-row-blocks", "int64_t",
           /*default=*/"1",
           "Blocks of the token table's rows whose gradient columns are "
           "iterations of their own (the largest divisor of the rows up "
           "to this)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::shard::ShardDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def LoomFuseElementwise : Pass<"loom-fuse-elementwise"> {
  let summary = "Fuse elementwise linalg.generic ops into their one consumer";
  let description = [{
    A `linalg.generic` of parallel loops whose results only one
    `linalg.generic` in the same block reads is merged into that consumer
    (MLIR's elementwise fusion): the widening of a bf16 tensor into the op
    that reads it, mostly. The tensor between them disappears, and with it
    a buffer, a pass over memory and, on a GPU, a kernel. A producer with
    other users, or one its consumer reads through a broadcast, is left
    alone (fusing it would compute it more than once), unless it is cheap:
    each element from its operands' in at most four arithmetic operations
    (a widening, a row's mean from its sum, its reciprocal standard
    deviation from its variance), which cost less to repeat for each
    element a broadcast spans than to read. A cheap loop that several
    loops of its block read through broadcasts (directly or through
    reshapes only they read) gets a copy before each reader but the first,
    and each reader fuses its own. A widening with other users that every
    use can read narrow (loops, directly or through reshapes and slices;
    `tensor.extract`s, which widen the element; and the destination of an
    all-parallel loop whose result is only narrowed back to the same type,
    which then computes into the narrow tensor, widening what it reads and
    rounding what it writes) dissolves into its uses, so that the logits
    of a bf16 step are never copied to f32 for the loss and its gradient.
    Otherwise the widening is left alone, and so is a producer outside the
    consumer's loop (fusing it would move it in), and so
    is one whose operands, kept alive until the consumer, could raise the
    step's peak (a view, such as a layer's slice of a stack, costs what
    the tensor it views does; a function's arguments that nothing updates
    in place live throughout). A consumer that other work separates from
    its producer moves up to run right after it, and the two fuse there,
    where MLIR's fusion takes the pair, the consumer reads nothing
    computed in between, its destinations are all new and its new results
    weigh no more than the producer's (a layer norm's input gradient, then
    the roundings of its weight's and bias's gradients, then the residual
    add that reads it: one loop). Each move is checked where the ops are
    when it is made. The fused loop computes the same operations in the same
    order: the results are the same, bit for bit. A parallel loop whose
    result only a `tensor.expand_shape` reads, and that reshape's result
    one loop of the same block (each element once, or through a broadcast
    for a cheap loop), computes in the
    expanded shape instead (MLIR's reshape folding by expansion), so that
    the two then fuse: a layer norm's normalization over rows and its
    rounding to bf16 in the activation's shape. A `linalg.matmul` into
    f32 whose two operands only widen tensors of one narrow type (or
    collapse such a widening's leading dimensions) is rebuilt on the
    narrow tensors: `loom-matmul-to-blas` calls the runtime's GEMM of
    that type. A widened copy other loops read stays for them, and the
    narrow tensor then lives until the GEMM too. MLIR's set of fusion
    patterns also gives a loop that never reads its destination a new
    one, and folds fills and splat constants into the loops that read
    them.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def LoomReshapeDestinations
    : Pass<"loom-reshape-destinations", "::mlir::ModuleOp"> {
  let summary = "Reshape the destination of a slice insertion instead of the "
                "value inserted";
  let description = [{
    `tensor.insert_slice (tensor.expand_shape %x) into %dest` (or a
    `collapse_shape`), where the slice spans the trailing dimensions of
    `%dest` whole, becomes `tensor.insert_slice %x` into the inverse reshape
    of `%dest`, reshaped back. A layer loop saves activations this way: the
    linear maps compute [tokens, features] and the stack holds
    [layers, batch, sequence, features]. Upstream's
    `eliminate-empty-tensors` does not look through reshapes; after this
    pass it makes the producer of `%x` write straight into the slice
    instead of a buffer that is then copied. The destination is reshaped
    right after its definition, where it dominates the producer.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def LoomDestinationOutputs
    : Pass<"loom-destination-outputs", "::mlir::ModuleOp"> {
  let summary = "Turn the results of entry points into destination arguments";
  let description = [{
    The runtime owns every buffer an entry point touches. For each public
    function with Loom argument attributes, a result marked `loom.updates`
    = i is written into argument i, and a result marked `loom.output` or
    `loom.grad` gets a new trailing argument (named by `loom.output`:
    "loss", "grad_norm", "grad.<param>") it is written into, both with
    `bufferization.materialize_in_destination`. After bufferization every
    result is then equivalent to an argument and
    `drop-equivalent-buffer-results` removes it, leaving functions without
    results.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect"];
}

def LoomGemmEpilogues : Pass<"loom-gemm-epilogues", "::mlir::ModuleOp"> {
  let summary = "Let mixed precision's GEMMs add the bias and round their "
                "products themselves";
  let description = [{
    A `linalg.matmul` of bf16 (f16) matrices into a zero-filled f32
    buffer that nothing else uses but one elementwise `linalg.generic`
    later in its block, which reads it in its own shape or through one
    `memref.expand_shape` (the product's columns innermost) only to round
    each element to bf16 (f16), maybe after adding a bias of that type
    along the columns (a contiguous vector, widened by `arith.extf`), with
    nothing between the two that touches memory: the product becomes a
    call `loom_rt_gemm_rounded(dtype, transA, transB, M, N, K, alpha, A,
    lda, B, ldb, bias, D, ldd)` at the loop, which adds the bias (null for
    none) and rounds the f32 sums into D (cuBLASLt's bias epilogue on a
    GPU). D is the loop's output that stores the rounded values as they
    are, when that output is written whole in the shape of the product's
    read, has contiguous rows and shares no memory with what the loop or
    the product reads; otherwise a new bf16 (f16) buffer where the f32 one
    was. The loop reads D instead of the f32 product and no longer
    computes the rounding (or writes D); a loop left with no output goes.
    The f32 buffer, its fill and the product go.

    With `gelu` (the default), a call whose D the next `linalg.generic`
    that reads it (through reshapes; nothing between touching D or writing
    what the call reads) reads only to apply GPT-2's GELU, as the lowering
    of `loom.gelu` builds it (`arith.extf`, the GELU, `arith.truncf`), into
    one output, becomes `loom_rt_gemm_gelu(dtype, 0, transA, transB, M, N,
    K, alpha, A, lda, B, ldb, bias, AUX, ldaux, D, ldd)` at the loop: AUX
    is the old D, D the loop's output. A call without a bias whose D only
    such a loop reads, to multiply it by the GELU's derivative at a second
    input of the same type (`loom.gelu_grad`'s lowering), becomes the call
    with mode 1, AUX that input and D the loop's output; the old D's
    buffer goes (its users must be views, the loop and the old call's
    pointer to it). The loop goes. AUX and D must be [M, N] matrices with
    contiguous rows (the loop's shape collapsed) whose row strides are
    multiples of 8.

    With `add` (the default), a call whose D only the next such loop reads,
    to add a second input of the same type to it (both widened, added,
    rounded: `loom.add`'s lowering, a residual connection), becomes
    `loom_rt_gemm_add(dtype, transA, transB, M, N, K, alpha, A, lda, B,
    ldb, bias, C, ldc, D, ldd)` at the loop: C is that input, D the loop's
    output, and the sum is rounded once (the loop rounded the product
    first); the old D's buffer goes, as backward above. C is an [M, N]
    matrix like AUX. A call the GELU took is not considered.

    Runs on buffers before `loom-static-arena`, while each buffer is its
    own allocation.
  }];
  let options = [
    Option<"gelu", "gelu", "bool", /*default=*/"true",
           "Move a GELU, or the gradient through it, that the next loop "
           "applies to a rounded product into the GEMM's epilogue">,
    Option<"add", "add", "bool", /*default=*/"true",
           "Move an add of a matrix of the product's type that the next "
           "loop applies to a rounded product (a residual connection) into "
           "the GEMM">
  ];
  // The GELU's reference arithmetic, built to recognize it, has math.tanh.
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect"];
}

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

def LoomLowerGridIndices : Pass<"loom-lower-grid-indices", "::mlir::ModuleOp"> {
  let summary = "Lower a rank's index on a grid axis to a runtime call";
  let description = [{
    `shard.process_multi_index on @grid axes = [a]`, with which a ZeRO
    step finds its shard, becomes a call of the runtime's
    `loom_rt_group_rank` for the communicator of axis `a` (pp, dp or tp of
    the pp x dp x tp grid). Runs after bufferization, like the lowering of
    the collectives, so that `--emit=parallel` and `--emit=linalg` keep the
    upstream op.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def LoomStaticArena : Pass<"loom-static-arena", "::mlir::ModuleOp"> {
  let summary = "Place each function's buffers in one arena by liveness";
  let description = [{
    Runs on bufferized functions, before buffer deallocation. Every
    `memref.alloc` of a static, identity-layout buffer becomes a
    `memref.view` of one `memref<Nxi8>` allocated at the function's entry,
    at an offset no buffer live at the same time shares, so the function's
    memory is known at compile time and the heap serves it with one block.

    A buffer is live from its allocation to the end of the last op of its
    block that uses it or anything made from it (views, casts, pointers,
    what a region's terminator forwards it to), an op with regions counting
    whole; intervals come from numbering the ops in pre-order. A buffer an
    `scf.if` yields lives over the whole `scf.if`. A buffer an `scf.for`
    body yields to the next iteration, through one iteration argument that
    the body passes on no further, gets two slots taken in turn by even and
    odd iterations. Offsets are first-fit, the largest buffers first, at
    64-byte alignment or the allocation's own. Buffers of dynamic size, or
    allocated inside a loop whose iterations may run at once, stay on the
    heap, with a remark.

    The function gets `loom.arena = {bytes, live, communication}`: the
    arena's size, the most bytes of buffers live at once, and of those the
    bytes of buffers a function declared `loom.communication` reads or
    writes. With `print`, each planned function prints one line.
  }];
  let options = [Option<"print", "print", "bool", /*default=*/"false",
                        "Print each function's arena">];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def LoomFoldFalseLoopFlags : Pass<"loom-fold-false-loop-flags"> {
  let summary = "Replace loop-carried i1 flags that are always false";
  let description = [{
    An `i1` iteration argument of an `scf.for` that starts as the constant
    false and is yielded as false, as one of a set of such arguments, or an
    `arith.ori` of those, is false in every iteration and after the loop:
    the pass finds the largest such set of each loop, inner loops first,
    and replaces the arguments' uses and the loop's results by the
    constant. Runs between MLIR's ownership-based deallocation and its
    lowering: the ownership flags of buffers a loop yields are of this form
    when every buffer is a view of the static arena, and a `bufferization.
    dealloc` still conditional on them would become a run-time alias check
    with heap buffers of its own.
  }];
}

def LoomExportEntries : Pass<"loom-export-entries", "::mlir::ModuleOp"> {
  let summary = "Add the C entry points and the manifest the runtime reads";
  let description = [{
    For every public function whose arguments carry Loom attributes and
    whose arguments are all statically shaped memrefs, adds
    `void loom_entry_<name>(void **buffers)`, which receives one pointer per
    argument, in order, and calls the function with memrefs over them. The
    function itself becomes private. Adds the constant global
    `loom_manifest`, a NUL-terminated text describing the model, the
    training setup, the target the code runs on and every entry point's
    arguments (see docs/artifact.md).
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The target the artifact's code runs on (cpu or cuda), which the "
           "runtime's backend must match">,
    Option<"cudaArch", "cuda-arch", "std::string", "\"sm_90\"",
           "The GPU architecture of the kernels, with target=cuda">
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::func::FuncDialect"];
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
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect"];
}

def LoomMergeReductions : Pass<"loom-merge-reductions"> {
  let summary = "Merge a reduction into an earlier one that computes the same "
                "values";
  let description = [{
    A `linalg.generic` on tensors with a reduction dimension that computes
    what an earlier one of the same block computes (the same body over the
    same operands, its destination the same fill or new tensor) is
    replaced by that earlier one: the gradient of the loss computes the
    softmax's maximum and sum over the vocabulary again, from the logits
    the forward pass read them from, once the step is one function. Operands
    count as the same when they are one value, or the same reshape or
    slice of one (a padded vocabulary's logits are read through a slice of
    their real columns), or fills of one value into new tensors of one
    type. Only
    reductions whose results, both, are only read (operands of loops,
    `tensor.extract`, reshapes of such) are merged, so that no tensor
    written in place gains a reader; and only reductions, whose results
    are smaller than what they read, so that keeping a result for longer
    costs less than reading its operands again. Upstream's CSE does not
    run on the step's tensors: merged fills would each need a copy once
    written.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def LoomSplitReductions : Pass<"loom-split-reductions"> {
  let summary = "Split long column reductions into parts reduced side by side";
  let description = [{
    A `linalg.generic` on tensors of static shapes with a single
    reduction dimension (a column sum: rows reduced, columns parallel), of
    at least twice `rows` iterations, whose outputs are each indexed by
    all the other dimensions and each fold their floating-point terms with
    one operation that has a neutral element (a sum, product, maximum or
    minimum), becomes two. The first splits the reduced dimension into
    `parts` consecutive slices (the most that divide it and leave each at
    least `rows` iterations) and reduces them side by side, each from the
    neutral element, into a tensor with a
    leading dimension of `parts`; the second folds the parts into the
    original outputs. On a GPU, where a reduction's iteration is a warp
    walking the reduced dimension, a bias's gradient over 8,192 rows was
    256 loads in a row for each thread; split, it is 8, then 1. The terms
    are combined in another order, which changes the last bits of a
    floating-point sum. A reduction over the innermost dimension (a row's)
    is split only when it has at least 16 times `rows` iterations (the
    softmax over a vocabulary of 50,257, 1,571 loads in a row for each
    thread, not a layer norm's rows of hundreds): each row's warps already
    run side by side. The CUDA target runs this pass; the CPU's reductions
    keep their order.
  }];
  let options = [Option<"rows", "rows", "int64_t", /*default=*/"256",
                        "The fewest iterations of a part">];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
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
    (`loom-lower-to-linalg` makes the step's constant tensors fills). The
    parallel loops nested in the body stay for
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
    last one.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

#endif // LOOM_CONVERSION_PASSES_TD
