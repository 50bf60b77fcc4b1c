/*===- runtime.h - Loom's runtime: C ABI ------------------------*- C -*-===*\
|*                                                                          *|
|* Loads a compiled artifact and trains with it. No MLIR or LLVM inside: a  *|
|* machine that runs artifacts needs only this library and its BLAS.        *|
|* Every function that can fail returns 0 on success and non-zero on        *|
|* failure, with a message retrievable by loom_last_error().                *|
|*                                                                          *|
\*===----------------------------------------------------------------------===*/

#ifndef LOOM_RUNTIME_H
#define LOOM_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The message of the last failure in this thread.
const char *loom_last_error(void);

/*--- Artifacts -----------------------------------------------------------*/

typedef struct loom_model loom_model;

/// Model dimensions and the training setup from an artifact's manifest.
typedef struct loom_model_info {
  const char *name;
  int64_t layers, width, heads, hidden, vocab, padded_vocab, positions;
  int tied;
  int64_t batch, sequence; /* tokens per step: batch * sequence */
  int64_t micro_batches;   /* the step accumulates batch / micro_batches
                              sequences at a time */
  int64_t pp, dp, tp;      /* the grid of ranks it was compiled for (with
                              loom_dist_init) */
  int64_t zero;            /* its ZeRO stage over the dp replicas, 0-3 */
  const char *optimizer;   /* "adamw" or "sgd" */
  double lr;
  int64_t num_params;   /* scalars in all parameters */
  int64_t local_params; /* scalars of parameters this rank holds: num_params,
                           or its shards under ZeRO-3 */
  int64_t state_floats; /* scalars of optimizer state this rank holds */
  int64_t num_state;    /* scalars of the whole model's optimizer state */
  /* Bytes per rank as compiled (the manifest's memory line; 0 for an
     artifact without one): parameters, the gradients the optimizer reads,
     optimizer state; the activations one micro-batch keeps for the backward
     pass. */
  int64_t param_bytes, grad_bytes, state_bytes, activation_bytes;
  /* A pipeline's schedule ("gpipe", "1f1b", "interleaved") and model chunks
     per rank; "" and 1 for pp = 1. Each pipeline rank holds its stages'
     parameters only, and its figures above are its own. */
  const char *schedule;
  int64_t virtual_stages;
  /* The bytes of the static arena the training step's buffers live in
     (the manifest's arena line; 0 for an artifact without one): what the
     step allocates, at once, besides the runtime's buffers. */
  int64_t arena_bytes;
  /* Whether loom_model_eval runs: the artifact has the forward pass alone
     (a pipeline artifact each rank's, eval_stage<r>). */
  int can_eval;
  /* The FLOPs of one training step on the whole batch as MFU counts them
     (abi.h's loom_param_flops_per_token and loom_attention_flops_per_token,
     the cost model's count), over all ranks. */
  double model_flops;
} loom_model_info;

/// Opens an artifact and allocates its parameters, optimizer state and
/// buffers. Fails on a file that is not a Loom artifact or comes from
/// another Loom version. A pipeline artifact (pp > 1) joins the job first
/// (loom_dist_init with its grid): which parameters a rank holds depends on
/// its stage.
loom_model *loom_model_open(const char *path);
void loom_model_close(loom_model *model);
const loom_model_info *loom_model_get_info(const loom_model *model);

/// GPT-2's initialization from `seed`: weights normal with std 0.02,
/// residual projections scaled by 1/sqrt(2 * layers), biases zero,
/// layer-norm weights one. Resets the optimizer state and step count.
void loom_model_init(loom_model *model, uint64_t seed);

/// This rank's parameters, contiguous, in llm.c's checkpoint order:
/// local_params floats, all of them unless the plan shards them over the
/// replicas (ZeRO-3), when each tensor is this rank's slice. The buffer
/// stays where it is until the model is closed.
float *loom_model_params(loom_model *model);
/// The whole model's parameters (num_params floats, llm.c's order) into
/// `whole`, whatever the plan: under ZeRO-3 a collective of the replicas,
/// which all call it.
int loom_model_gather_params(const loom_model *model, float *whole);

/// One training step on `batch * sequence` tokens and targets: updates the
/// parameters; returns the loss before the update and the gradient norm.
/// A data parallel artifact (dp > 1) takes the same whole batch on every
/// rank, runs the step on the rank's share, and needs loom_dist_init with
/// its grid first.
int loom_model_train_step(loom_model *model, const int32_t *tokens,
                          const int32_t *targets, float lr, float *loss,
                          float *grad_norm);
/// The loss of `batch * sequence` tokens without updating anything; the
/// artifact's forward pass runs one micro-batch at a time. A data parallel
/// artifact's ranks (all of them call it, with the same batch) each run
/// their share of the micro-batches and sum the losses. A pipeline
/// artifact's ranks all call it too: the micro-batches pass through the
/// stages one after the other, and every rank returns the loss.
int loom_model_eval(loom_model *model, const int32_t *tokens,
                    const int32_t *targets, float *loss);
/// The loss and the gradient of every parameter for `batch * sequence`
/// tokens (the mean over its micro-batches, as the step accumulates them),
/// written to `grads` in the layout of loom_model_params (num_params floats).
int loom_model_loss_and_grad(loom_model *model, const int32_t *tokens,
                             const int32_t *targets, float *loss, float *grads);

/// llm.c checkpoints (fp32, version 3), whole tensors whatever the plan.
/// Loading checks every dimension against the artifact before it touches
/// the parameters; saving writes a temporary file and renames it, so a
/// failure never leaves a partial file (a path that exists and is not a
/// regular file, such as /dev/null, is written directly, not replaced).
/// Under several ranks every rank calls them: rank 0 reads the file and
/// each rank keeps its part, or the ranks gather the model and rank 0
/// writes it; every rank returns rank 0's outcome.
int loom_model_load_checkpoint(loom_model *model, const char *path);
int loom_model_save_checkpoint(const loom_model *model, const char *path);

/// The optimizer state and step count, whole whatever the plan, in Loom's
/// own file (llm.c's checkpoints hold parameters only): 256 int32 (magic
/// 20241124, version 1, optimizer 1 = AdamW or 2 = SGD, the steps taken,
/// then max_seq_len, vocab, layers, heads, channels and padded vocab as in
/// a checkpoint), then float32 state tensors in the step's order (AdamW's
/// m of every parameter in llm.c's order, then v; SGD's momentum). Loaded
/// after the parameters, it resumes training where it was saved. Collective
/// under several ranks, like checkpoints.
int loom_model_save_optimizer_state(const loom_model *model, const char *path);
int loom_model_load_optimizer_state(loom_model *model, const char *path);
/// Training steps taken since the initialization or the last load.
int64_t loom_model_get_step(const loom_model *model);

/// Dynamic loss scaling, for an artifact compiled with precision fp16 (its
/// steps take a `loss_scale` input): the step's backward pass starts from
/// `scale` instead of 1, and a step whose gradients overflowed (a gradient
/// norm that is infinite or NaN) leaves the parameters, the optimizer state
/// and the step count as they were. After such a step the scale halves;
/// after `growth_interval` steps in a row without one, it doubles.
typedef struct loom_loss_scale {
  /// The scale the next step takes.
  float scale;
  /// Whether the last step was skipped, and how many were since the
  /// initialization.
  int last_skipped;
  int64_t skipped_steps;
} loom_loss_scale;
/// 1 with `out` filled for an artifact that scales its loss, 0 otherwise.
int loom_model_get_loss_scale(const loom_model *model, loom_loss_scale *out);
/// The first scale (65536 unless set) and the growth interval (2000 unless
/// set), from the next step on; 1, with the error set, for a scale that is
/// not a positive finite number or an interval below 1.
int loom_model_set_loss_scaling(loom_model *model, float initial_scale,
                                int64_t growth_interval);

/// Writes the parameters to a safetensors file under Hugging Face's GPT-2
/// names and layouts (GPT2LMHeadModel's state dict): F32 tensors
/// "transformer.wte.weight" (the vocabulary's rows, without the padding),
/// "transformer.wpe.weight", "transformer.h.<l>.<name>" for each block
/// (its four matrices transposed to Conv1D's (in, out)) and
/// "transformer.ln_f.*"; the tied lm_head is left to Hugging Face to tie.
/// Needs llm.c's layout, as checkpoints do, and is written as a checkpoint
/// is: a temporary file renamed, or directly into a path that is not a
/// regular file; under several ranks every rank calls it, the ranks gather
/// the model, rank 0 writes it and every rank returns rank 0's outcome.
int loom_model_export_safetensors(const loom_model *model, const char *path);

/// Starts recording the timeline of this rank's steps: the forward and
/// backward passes and the optimizer that the step marks, and the
/// collectives, messages and steps themselves. Every rank of the job calls
/// it (after loom_dist_init); the clocks start together when all have.
int loom_trace_start(void);
/// Writes the timeline loom_trace_start began, every rank's, to `path` as
/// Chrome trace-event JSON (Perfetto, chrome://tracing): a track per rank,
/// a complete event ("ph": "X") per span, times in microseconds from the
/// start. Every rank calls it; rank 0 writes the file.
int loom_trace_write(const char *path);

/*--- Data ----------------------------------------------------------------*/

typedef struct loom_dataset loom_dataset;

/// Reads an llm.c token shard (magic 20240520) or, for any other file, its
/// bytes as tokens (vocabulary 256). Tokens must be below `vocab`.
loom_dataset *loom_dataset_open(const char *path, int64_t vocab);
void loom_dataset_close(loom_dataset *data);
int64_t loom_dataset_size(const loom_dataset *data);
/// 1 for an llm.c shard, 0 for text bytes.
int loom_dataset_is_shard(const loom_dataset *data);
/// Fills `batch` rows of `sequence` tokens and their next-token targets,
/// taking consecutive windows of [begin, end) from `*cursor`, wrapping
/// around. Fails when the range holds fewer than sequence + 1 tokens.
int loom_dataset_batch(const loom_dataset *data, int64_t begin, int64_t end,
                       int64_t *cursor, int64_t batch, int64_t sequence,
                       int32_t *tokens, int32_t *targets);

/// The process's peak resident memory in MiB, for reports.
double loom_peak_memory_mib(void);

/// The most bytes of the step's heap in use at once so far: the runtime's
/// parameters, gradients and optimizer state, and the buffers of generated
/// code (what the compiled step needs, without the freed buffers the heap
/// keeps for reuse or the process's own memory).
int64_t loom_heap_peak_bytes(void);

/// The most bytes generated code has had allocated at once during one call
/// of an entry point so far: a compiled step's arena, and whatever else it
/// allocates (nothing, when every buffer is in its arena).
int64_t loom_heap_step_peak_bytes(void);

/// Returns to the system the buffers generated code has freed. The runtime
/// keeps them for the next step otherwise (see lib/Memory.cpp).
void loom_release_cached_memory(void);

/// Threads that run the generated code's parallel loops and its GEMMs: by
/// default every core this process may run on. OpenBLAS's thread count
/// follows it (OPENBLAS_NUM_THREADS is overridden); a GEMM called inside a
/// parallel loop runs on the thread that calls it.
int64_t loom_get_num_threads(void);
void loom_set_num_threads(int64_t threads);

/*--- Distribution --------------------------------------------------------*/

/// A group of ranks that communicate: all of them, or those of one
/// parallel dimension.
typedef struct loom_comm loom_comm;

/// Element types of communicated buffers. Sums are computed in f32 only;
/// bf16 and f16 buffers can be gathered, broadcast, sent and received.
typedef enum loom_dtype {
  LOOM_DTYPE_F32 = 0,
  LOOM_DTYPE_BF16 = 1,
  LOOM_DTYPE_F16 = 2
} loom_dtype;

/// The groups of a rank on the grid pp x dp x tp: the ranks that share its
/// pipeline stage and tensor-parallel rank (dp), its stage and replica
/// (tp), its replica and tensor-parallel rank (pp), or all of them.
typedef enum loom_group {
  LOOM_GROUP_WORLD = 0,
  LOOM_GROUP_DP = 1,
  LOOM_GROUP_TP = 2,
  LOOM_GROUP_PP = 3,
  LOOM_GROUP_COUNT = 4
} loom_group;

typedef struct loom_dist_info {
  int64_t rank, world_size;
  int64_t pp, dp, tp;                /* the grid; tp varies fastest */
  int64_t pp_rank, dp_rank, tp_rank; /* this rank's coordinate on it */
  int launched;                      /* 1 when started by an MPI launcher */
  int64_t core_sharers; /* ranks of the job allowed on exactly this rank's
                           cores, this one included (1 when the launcher
                           bound each rank to cores of its own) */
} loom_dist_info;

/// Joins the job this process was launched in by mpirun (or a job of one
/// rank when it was started alone, without MPI) and lays its ranks on the
/// grid pp x dp x tp, rank = (pp_rank * dp + dp_rank) * tp + tp_rank, with
/// one communicator per group. Fails, naming both, when the job's size is
/// not pp * dp * tp; loom_dist_get_info then still tells the rank and the
/// job's size. Once per process (a second call with the same grid does
/// nothing).
int loom_dist_init(int64_t pp, int64_t dp, int64_t tp);
/// Null before loom_dist_init.
const loom_dist_info *loom_dist_get_info(void);
/// Null before a successful loom_dist_init.
loom_comm *loom_dist_group(loom_group group);
int64_t loom_comm_size(const loom_comm *comm);
int64_t loom_comm_rank(const loom_comm *comm);
/// Seconds this process has spent in the compiled steps' collectives
/// (loom_rt_group_all_reduce), waiting for the other ranks included.
double loom_dist_comm_seconds(void);
/// Leaves the job (MPI_Finalize); every rank calls it before it exits.
void loom_dist_finalize(void);
/// Ends every rank of the job with `code`, after a failure on this one
/// that the others could wait on forever.
void loom_dist_abort(int code);

/// Collectives over `comm`, `count` elements of `dtype` per rank. All ranks
/// of the group call them in the same order. Sums, not means.
/// recv = the sum of every rank's send; send == recv works in place.
int loom_rt_all_reduce(loom_comm *comm, loom_dtype dtype, const void *send,
                       void *recv, int64_t count);
/// recv = the elementwise maximum of every rank's send (f32).
int loom_rt_all_reduce_max(loom_comm *comm, loom_dtype dtype, const void *send,
                           void *recv, int64_t count);
/// send holds size * count elements; recv gets slice `rank` of their sum.
int loom_rt_reduce_scatter(loom_comm *comm, loom_dtype dtype, const void *send,
                           void *recv, int64_t count);
/// recv (size * count elements) gets every rank's send, in rank order.
int loom_rt_all_gather(loom_comm *comm, loom_dtype dtype, const void *send,
                       void *recv, int64_t count);
/// Every rank's buffer gets rank `root`'s.
int loom_rt_broadcast(loom_comm *comm, loom_dtype dtype, void *buffer,
                      int64_t count, int64_t root);
/// Point to point with another rank of `comm`; each send has its receive.
int loom_rt_send(loom_comm *comm, loom_dtype dtype, const void *buffer,
                 int64_t count, int64_t peer);
int loom_rt_recv(loom_comm *comm, loom_dtype dtype, void *buffer, int64_t count,
                 int64_t peer);

/*--- Called by generated code --------------------------------------------*/

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
/// `qkv` [batch, seq, 3, heads, head_dim] holds the queries, keys and
/// values and `out` [batch, seq, heads, head_dim] gets the result, both of
/// `dtype` (a loom_dtype; the arithmetic is f32); `lse` [batch, heads, seq]
/// gets the log of each query's sum of exponentiated scores, which the
/// backward pass reads. On a GPU, a kernel queued on the step's stream.
void loom_rt_attention(int32_t dtype, int64_t batch, int64_t seq, int64_t heads,
                       int64_t head_dim, const void *qkv, void *out,
                       float *lse);
/// The gradient of loom_rt_attention: from its operand `qkv`, its result
/// `out` and log-sum-exp `lse`, and the result's gradient `dout` (of
/// `out`'s shape), writes the gradient of `qkv` (of its shape) into
/// `dqkv`. `delta` is scratch the call fills, of
/// loom_attention_grad_scratch(batch, seq, heads, head_dim, query_sums)
/// floats (abi.h): each query's dot product of `out` and `dout` [batch,
/// heads, seq], then, on a GPU with bf16 or f16 storage (query_sums), the
/// query gradient's f32 sums.
void loom_rt_attention_grad(int32_t dtype, int64_t batch, int64_t seq,
                            int64_t heads, int64_t head_dim, const void *qkv,
                            const void *out, const void *dout, const float *lse,
                            void *dqkv, float *delta);
/// Adds row i of `updates` [n, columns] (of `dtype`, a loom_dtype, each
/// element widened to f32) to row `indices[i] - row_start` of the f32
/// `out` [rows, columns], for each i in increasing order, so that each
/// element's sum is in index order wherever it is computed; an index
/// outside [row_start, row_start + rows) adds nothing. `scratch` holds
/// loom_scatter_add_rows_scratch(n, rows) int32s (abi.h). The rows are
/// counting-sorted by index first, then each row's updates added: on the
/// CPU a task per range of columns, on a GPU a thread per (row, column).
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

#endif /* LOOM_RUNTIME_H */
