/*===- rt.h - The runtime functions compiled steps call --------*- C -*-===*\
|*                                                                          *|
|* The generated code's side of the runtime: the GEMMs, fused kernels,     *|
|* threads, collectives over the step's groups, trace marks and heap that  *|
|* a compiled step calls by the names abi.h gives. The compiler emits the  *|
|* calls; the runtime's backends define them. A host program that runs     *|
|* artifacts needs runtime.h alone.                                         *|
|*                                                                          *|
\*===----------------------------------------------------------------------===*/

#ifndef LOOM_RT_H
#define LOOM_RT_H

#include "loom/abi.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Row-major C = alpha op(A) op(B) + beta C.
void loom_rt_sgemm(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                   int64_t k, float alpha, const float *a, int64_t lda,
                   const float *b, int64_t ldb, float beta, float *c,
                   int64_t ldc);

/// Row-major C = alpha op(A) op(B) + beta C with A and B of `dtype` (a
/// loom_dtype) and C f32, the products summed in f32: cuBLASLt's bf16 and
/// f16 GEMMs on a GPU; on the CPU, SGEMM on blocks of the operands widened
/// to f32, at most 4 MiB each, per thread (scratch the runtime keeps).
void loom_rt_gemm(int32_t dtype, int32_t trans_a, int32_t trans_b, int64_t m,
                  int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
                  const void *b, int64_t ldb, float beta, float *c,
                  int64_t ldc);
/// loom_rt_gemm's product with `bias` (n elements of `dtype`, or null for
/// none) added to each of its rows, rounded to `dtype` (to nearest, ties to
/// even) into D: D = round(alpha op(A) op(B) + bias). On a GPU the f32
/// product stays in cuBLASLt's registers (its bias epilogue); on the CPU
/// it passes through tiles of at most the blocks loom_rt_gemm widens, in
/// scratch the runtime keeps, and its sums are loom_rt_gemm's.
void loom_rt_gemm_rounded(int32_t dtype, int32_t trans_a, int32_t trans_b,
                          int64_t m, int64_t n, int64_t k, float alpha,
                          const void *a, int64_t lda, const void *b,
                          int64_t ldb, const void *bias, void *d, int64_t ldd);
/// loom_rt_gemm_rounded whose sum also takes C, an [m, n] matrix of `dtype`
/// with leading dimension `ldc`: D = round(alpha op(A) op(B) + C + bias),
/// rounded once (a residual connection's add after a linear map, which
/// then never writes its product). `dtype` is bf16 or f16, and C shares no
/// memory with D (in place, cuBLASLt rounds the product before adding it).
/// On a GPU, cuBLASLt's beta = 1 with C (and its bias epilogue); on the
/// CPU, the tiles of loom_rt_gemm_rounded. Other arguments (f32, an `ldc`
/// below n, C overlapping D) fail the step on a GPU and leave NaN in D on
/// the CPU.
void loom_rt_gemm_add(int32_t dtype, int32_t trans_a, int32_t trans_b,
                      int64_t m, int64_t n, int64_t k, float alpha,
                      const void *a, int64_t lda, const void *b, int64_t ldb,
                      const void *bias, const void *c, int64_t ldc, void *d,
                      int64_t ldd);
/// What loom_rt_gemm_gelu does with the product P = alpha op(A) op(B).
typedef enum loom_gelu_mode {
  /// A linear map's GELU: AUX = round(P + bias), D = round(gelu(P + bias)),
  /// gelu computed from the unrounded sum.
  LOOM_GELU_FORWARD = 0,
  /// The gradient through that GELU: D = round(P * gelu'(AUX)), AUX read
  /// and `bias` null.
  LOOM_GELU_BACKWARD = 1
} loom_gelu_mode;
/// loom_rt_gemm_rounded with GPT-2's GELU, its tanh approximation, in the
/// epilogue (`mode`, a loom_gelu_mode); `dtype` is bf16 or f16, and AUX is
/// an [m, n] matrix of it with leading dimension `ldaux`, a multiple of 8.
/// On a GPU these are cuBLASLt's GELU_AUX(_BIAS) and DGELU epilogues,
/// which leave the loop that applied the GELU nothing to do; on the CPU the
/// tiles of loom_rt_gemm_rounded. Other arguments (f32, another mode, a
/// bias backward, such an `ldaux` below n) fail the step on a GPU and
/// leave NaN in D on the CPU.
void loom_rt_gemm_gelu(int32_t dtype, int32_t mode, int32_t trans_a,
                       int32_t trans_b, int64_t m, int64_t n, int64_t k,
                       float alpha, const void *a, int64_t lda, const void *b,
                       int64_t ldb, const void *bias, void *aux, int64_t ldaux,
                       void *d, int64_t ldd);
/// `count0` x `count1` independent GEMMs of loom_rt_gemm's form: GEMM
/// (i, j) reads A from `a` plus i `a_stride0` plus j `a_stride1` elements,
/// B likewise, and updates C from `c` plus i `c_stride0` plus j `c_stride1`
/// elements; no two update the same C. Attention's products of every
/// (batch, head) pair. On the CPU, the GEMMs are spread over the runtime's
/// threads; on a GPU, one cuBLASLt strided-batched matmul of `count1`
/// GEMMs per i.
void loom_rt_gemm_batched(int32_t dtype, int32_t trans_a, int32_t trans_b,
                          int64_t m, int64_t n, int64_t k, float alpha,
                          const void *a, int64_t lda, const void *b,
                          int64_t ldb, float beta, float *c, int64_t ldc,
                          int64_t count0, int64_t a_stride0, int64_t b_stride0,
                          int64_t c_stride0, int64_t count1, int64_t a_stride1,
                          int64_t b_stride1, int64_t c_stride1);
/// Causal self-attention of `heads` heads of `head_dim` channels, scores
/// scaled by 1 / sqrt(head_dim), without the [seq, seq] scores in memory.
/// `qkv` holds the queries, keys and values: [batch, seq, 3, heads,
/// head_dim] with `groups` 0; under grouped-query attention, `groups` key/
/// value heads each shared by heads / groups query heads, [batch, seq,
/// groups, heads / groups + 2, head_dim], each group's query heads then
/// its key head and its value head. `out` [batch, seq, heads,
/// head_dim] gets the result, of qkv's `dtype` (a loom_dtype; the
/// arithmetic is f32); `lse` [batch, heads, seq] gets the log of each
/// query's sum of exponentiated scores, which the backward pass reads. On
/// a GPU, a kernel queued on the step's stream.
void loom_rt_attention(int32_t dtype, int64_t batch, int64_t seq, int64_t heads,
                       int64_t groups, int64_t head_dim, const void *qkv,
                       void *out, float *lse);
/// The gradient of loom_rt_attention: from its operand `qkv`, its result
/// `out` and log-sum-exp `lse`, and the result's gradient `dout` (of
/// `out`'s shape), writes the gradient of `qkv` (of its shape) into
/// `dqkv`; a group's key and value gradients sum over its query heads.
/// `delta` is scratch the call fills, of
/// loom_attention_grad_scratch(batch, seq, heads, head_dim, query_sums)
/// floats (abi.h): each query's dot product of `out` and `dout` [batch,
/// heads, seq], then, on a GPU with bf16 or f16 storage (query_sums), the
/// query gradient's f32 sums.
void loom_rt_attention_grad(int32_t dtype, int64_t batch, int64_t seq,
                            int64_t heads, int64_t groups, int64_t head_dim,
                            const void *qkv, const void *out, const void *dout,
                            const float *lse, void *dqkv, float *delta);
/// Adds row i of `updates` [n, columns] (of `dtype`, a loom_dtype, each
/// element widened to f32) to row `indices[i] - row_start` of the f32
/// `out` [rows, columns], for each i in increasing order, so that each
/// element's sum is in index order wherever it is computed; an index
/// outside [row_start, row_start + rows) adds nothing. `scratch` holds
/// loom_scatter_add_rows_scratch(n, rows) int32s (abi.h). The rows are
/// counting-sorted by index first, then each row's updates added: on the
/// CPU a task per range of columns, on a GPU a thread per (row, column).
/// Copies `bytes` from `src` to `dst` between host and device memory
/// (`to`: LOOM_TO_HOST or LOOM_TO_DEVICE), the offloaded optimizer's
/// gradients and parameters: between the two arenas on the CPU. On a GPU
/// the copy is queued on the step's stream: the host may read `dst` after
/// loom_rt_host_begin or the end of the step's call, unless the call is
/// made inside the host's bracket, which waits for it. The bytes are
/// counted for the run's report (loom_transferred_bytes).
void loom_rt_transfer(void *dst, const void *src, int64_t bytes, int32_t to);
/// loom_rt_transfer that only starts the copy, which then runs alongside
/// the step's later work, in order with the other started copies (a copy
/// stream on a GPU, a copying thread on the CPU): `src` must not be
/// written nor `dst` read until loom_rt_transfer_wait of either, or
/// loom_rt_host_begin, or the end of the step's call.
void loom_rt_transfer_start(void *dst, const void *src, int64_t bytes,
                            int32_t to);
/// loom_rt_transfer to the host that sums instead of copying, f32 by f32:
/// `dst` becomes `src` plus, where `add` is non-zero, what `dst` held, else
/// zero (the micro-batches' gradients summed in host memory as each
/// crosses). On a GPU the elements cross into pinned memory of the
/// runtime's and the host adds them in stream order.
void loom_rt_transfer_add(void *dst, const void *src, int64_t bytes,
                          int32_t add);
/// loom_rt_transfer_add that only starts, as loom_rt_transfer_start does.
void loom_rt_transfer_add_start(void *dst, const void *src, int64_t bytes,
                                int32_t add);
/// The step's later work waits for the last started copy from or into the
/// buffer at `ptr`, and every copy started before it; nothing where none
/// is in flight.
void loom_rt_transfer_wait(const void *ptr);
/// Bracket the call of a function whose buffers are host memory (the
/// offloaded optimizer's, loom-place-offload): the heap serves and counts
/// what is allocated in between as host memory (pinned on a GPU).
/// loom_rt_host_begin first waits for the GPU's work and every started
/// transfer, whose results the host is about to read.
void loom_rt_host_begin(void);
void loom_rt_host_end(void);
void loom_rt_scatter_add_rows(int32_t dtype, int64_t n, int64_t rows,
                              int64_t columns, int64_t row_start,
                              const int32_t *indices, const void *updates,
                              float *out, int32_t *scratch);
/// The loss's softmax statistics: for each row r of `logits` [rows,
/// columns] (of `dtype`, contiguous rows), over its first `classes`
/// columns (1 <= classes <= columns), max[r] = the largest value and
/// sum_exp[r] = the sum of exp(x - max[r]). On a GPU a block per row reads
/// it once, keeping a running maximum and a sum rescaled to it (an online
/// softmax); on the CPU a task per range of rows reads each row twice,
/// for the maximum and then the sum, as the generated loops do. Other
/// `classes` fail the step on a GPU and leave NaN on the CPU.
void loom_rt_softmax_stats(int32_t dtype, int64_t rows, int64_t columns,
                           int64_t classes, const void *logits, float *max,
                           float *sum_exp);
/// loom_rt_gemm with blocks of at most `block_bytes` on the CPU (tests).
void loom_rt_gemm_blocked(int32_t dtype, int32_t trans_a, int32_t trans_b,
                          int64_t m, int64_t n, int64_t k, float alpha,
                          const void *a, int64_t lda, const void *b,
                          int64_t ldb, float beta, float *c, int64_t ldc,
                          int64_t block_bytes);

/// loom_rt_gemm_rounded with loom_rt_gemm_blocked's blocks (tests).
void loom_rt_gemm_rounded_blocked(int32_t dtype, int32_t trans_a,
                                  int32_t trans_b, int64_t m, int64_t n,
                                  int64_t k, float alpha, const void *a,
                                  int64_t lda, const void *b, int64_t ldb,
                                  const void *bias, void *d, int64_t ldd,
                                  int64_t block_bytes);
/// loom_rt_gemm_add with loom_rt_gemm_blocked's blocks (tests).
void loom_rt_gemm_add_blocked(int32_t dtype, int32_t trans_a, int32_t trans_b,
                              int64_t m, int64_t n, int64_t k, float alpha,
                              const void *a, int64_t lda, const void *b,
                              int64_t ldb, const void *bias, const void *c,
                              int64_t ldc, void *d, int64_t ldd,
                              int64_t block_bytes);
/// loom_rt_gemm_gelu with loom_rt_gemm_blocked's blocks (tests).
void loom_rt_gemm_gelu_blocked(int32_t dtype, int32_t mode, int32_t trans_a,
                               int32_t trans_b, int64_t m, int64_t n, int64_t k,
                               float alpha, const void *a, int64_t lda,
                               const void *b, int64_t ldb, const void *bias,
                               void *aux, int64_t ldaux, void *d, int64_t ldd,
                               int64_t block_bytes);

/// Runs `fn(context, from, to)` over [begin, end) split into contiguous
/// ranges, one per thread, and returns when all are done. The iterations
/// must be independent.
void loom_rt_parallel_for(void (*fn)(void *, int64_t, int64_t), void *context,
                          int64_t begin, int64_t end);

/// Sums `buffer` in place over the ranks of `group` (a loom_group) of the
/// context loom_dist_init made. A failure, here or on another rank, ends
/// every rank of the job: the step cannot go on with a partial sum.
void loom_rt_group_all_reduce(int32_t group, int32_t dtype, void *buffer,
                              int64_t count);
/// The elementwise maximum over the ranks of `group`, in place, as above.
void loom_rt_group_all_reduce_max(int32_t group, int32_t dtype, void *buffer,
                                  int64_t count);

/// Gathers `count` elements of `send` from every rank of `group` into
/// `recv`, in rank order; ends the job on failure, as above.
void loom_rt_group_all_gather(int32_t group, int32_t dtype, const void *send,
                              void *recv, int64_t count);
/// Sums `send` (size * count elements) over `group`; `recv` gets this
/// rank's slice of `count`. Ends the job on failure, as above.
void loom_rt_group_reduce_scatter(int32_t group, int32_t dtype,
                                  const void *send, void *recv, int64_t count);
/// Sums `buffer` over `group` onto rank `root` of it, in place: the root's
/// buffer gets the sum, the others' are left undefined. Ends the job on
/// failure, as above.
void loom_rt_group_reduce(int32_t group, int32_t dtype, void *buffer,
                          int64_t count, int64_t root);
/// Sends `count` elements of `buffer` to rank `peer` of `group` with message
/// `tag` (0 to 32767): the buffer is copied and the call returns without
/// waiting for the receiver. Ends the job on failure, as above.
void loom_rt_group_send(int32_t group, int32_t dtype, const void *buffer,
                        int64_t count, int64_t peer, int64_t tag);
/// Receives into `buffer` the next message rank `peer` of `group` sent with
/// `tag`, waiting for it; a message of another size ends the job, as above.
void loom_rt_group_recv(int32_t group, int32_t dtype, void *buffer,
                        int64_t count, int64_t peer, int64_t tag);
/// Generated code's marks of a span of the step's timeline: `kind` is a
/// LOOM_TRACE_* of abi.h, `micro_batch` and `chunk` -1 where they do not
/// apply. Recorded while tracing (loom_trace_start); nothing otherwise.
void loom_rt_trace_begin(int32_t kind, int64_t micro_batch, int64_t chunk);
void loom_rt_trace_end(int32_t kind);
/// Waits for the GPU's work, where generated code for the GPU is about to
/// read or write the step's memory from the host: launches and GEMMs are
/// asynchronous on the CUDA backend. Returns at once when nothing was
/// queued since the last wait, and on the CPU.
void loom_rt_device_wait(void);
/// This rank's index in `group`; ends the job when there is no context.
int64_t loom_rt_group_rank(int32_t group);

/// The heap of generated code: buffers freed are kept for the next request
/// of the same size and alignment.
void *_mlir_memref_to_llvm_alloc(size_t size);
void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size);
void _mlir_memref_to_llvm_free(void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_RT_H */
