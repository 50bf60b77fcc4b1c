//===- Passes.td - Loom's lowering to linalg ---------------*- tablegen -*-===//

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
    gradient, with the [T, T] scores and probabilities as tensors.
    Grouped-query attention (`kv_heads`) stays grouped where the fused
    kernels read each group's key and value for its query heads
    (`fused-attention-grouped-heads`, the CPU's and the GPU's); elsewhere
    (the loops) it becomes `loom.group_qkv`, which repeats them
    for every query head, the attention of every head and, for the
    gradient, `loom.group_qkv_grad`, which sums them back. With
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
    Option<"groupedFusedAttention", "fused-attention-grouped-heads", "bool",
           /*default=*/"true",
           "The fused kernels read grouped-query attention's key/value heads "
           "where they are; otherwise each group's are repeated for its "
           "query heads first">,
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

#endif // LOOM_CONVERSION_PASSES_TD
