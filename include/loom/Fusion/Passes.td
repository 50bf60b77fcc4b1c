//===- Passes.td - Loom's fusion passes --------------------*- tablegen -*-===//

#ifndef LOOM_FUSION_PASSES_TD
#define LOOM_FUSION_PASSES_TD

include "mlir/Pass/PassBase.td"

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

#endif // LOOM_FUSION_PASSES_TD
