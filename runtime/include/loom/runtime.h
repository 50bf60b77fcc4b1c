/*===- runtime.h - Loom's runtime: the host's API --------------*- C -*-===*\
|*                                                                          *|
|* Loads a compiled artifact and trains with it: what loom-run and an       *|
|* embedder call. No MLIR or LLVM inside: a machine that runs artifacts     *|
|* needs only this library and its BLAS. Every function that can fail      *|
|* returns 0 on success and non-zero on failure, with a message             *|
|* retrievable by loom_last_error(). The functions compiled steps call are  *|
|* rt.h's.                                                                  *|
|*                                                                          *|
\*===----------------------------------------------------------------------===*/

#ifndef LOOM_RUNTIME_H
#define LOOM_RUNTIME_H

#include "loom/abi.h"

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
  /* The sequences loom_model_logits scores at once: the artifact's
     micro-batch, or 0 for an artifact compiled without --logits. */
  int64_t logits_rows;
  /* Under offload, the bytes the host keeps and uses as compiled (the
     memory line's host: master weights, optimizer state, the arena of the
     step's host part, and under offload=parameters the parameters' copies,
     param_bytes then 0); the figures above are then the device's. 0
     without offload. */
  int64_t host_bytes;
  /* The FLOPs of one training step as HFU counts them: model_flops plus
     the forward pass the plan recomputes (abi.h's counts with 4 passes:
     attention's alone under recompute=selective, all under full or
     stage). */
  double hardware_flops;
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
/// The next-token scores of `logits_rows` sequences of `sequence` tokens:
/// `logits` gets rows x sequence x padded_vocab floats, position t's scores
/// those of the token after tokens[0..t] (the padding columns past `vocab`
/// are no token's). Needs an artifact compiled with loomc --logits. Where
/// each rank holds the whole model it computes alone; under ZeRO-3 or
/// tensor parallelism the scores gather the ranks' shards or columns, and
/// under pipeline parallelism the last stage sends them to the other
/// ranks: there every rank calls it with the same tokens.
int loom_model_logits(loom_model *model, const int32_t *tokens, float *logits);
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

/// Writes the parameters to a safetensors file under the Hugging Face
/// names and layouts of the manifest's tensor lines (GPT-2's are
/// GPT2LMHeadModel's state dict, Llama's LlamaForCausalLM's): F32 tensors,
/// a token table without its padding rows, GPT-2's block matrices
/// transposed to Conv1D's (in, out), Llama's fused query, key and value
/// projection as its three; a tied head is left to Hugging Face to tie.
/// It is written as a checkpoint is: a temporary file renamed, or directly into
/// a path that is not a regular file; under several ranks every rank calls it,
/// the ranks gather the model, rank 0 writes it and every rank returns rank 0's
/// outcome.
int loom_model_export_safetensors(const loom_model *model, const char *path);
/// Sets the parameters from a safetensors file, or from the shards a
/// Hugging Face index (a path ending in .json, its weight_map naming each
/// tensor's file in the index's directory) lists, read as
/// loom_model_export_safetensors writes them; F32, BF16 and F16 tensors.
/// Every tensor the model needs must be there with its shape, and every
/// tensor there must be the model's (buffers such as GPT-2's causal masks
/// aside); else 1 with the error naming the file and the tensor, and
/// nothing changed. Resets the optimizer's state. Every rank calls it;
/// rank 0 reads.
int loom_model_load_safetensors(loom_model *model, const char *path);

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

/// Reads an llm.c token shard (magic 20240520, or 20240801 for 32-bit
/// tokens) or, for any other file, its bytes as tokens (vocabulary 256).
/// Tokens must be below `vocab`.
loom_dataset *loom_dataset_open(const char *path, int64_t vocab);
/// Reads any file as bytes (vocabulary 256), a shard's header included. A
/// file loom_dataset_open takes for a damaged shard (a header one word off
/// a shard's) is refused there, not silently trained on as text.
loom_dataset *loom_dataset_open_bytes(const char *path, int64_t vocab);
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
/// Moves `*cursor` past the `windows` windows that loom_dataset_batch would
/// take from it next, without reading them: where a resumed run's next
/// batch starts.
int loom_dataset_skip(const loom_dataset *data, int64_t begin, int64_t end,
                      int64_t *cursor, int64_t windows, int64_t sequence);

/// Training data in many files, read one at a time: `spec` is a directory
/// (its files ending in .bin whose names hold `part`, "train" or "val", by
/// name; a meta.json there, as scripts/prepare-data.py writes, must give a
/// vocab_size within `vocab`), a glob pattern, or one file. Each file is an
/// llm.c shard or text read as bytes, as loom_dataset_open reads them; its
/// tokens are checked against `vocab` when it is first read. Window k of
/// the run, of `sequence` tokens and their targets, is a function of k
/// alone: epoch k / windows, in which every window of every file (one
/// starting every `sequence` tokens) comes once, the files' order and each
/// file's windows permuted from `seed` and the epoch, or in order without
/// `shuffle`.
typedef struct loom_loader loom_loader;
loom_loader *loom_loader_open(const char *spec, const char *part, int64_t vocab,
                              int64_t sequence, int shuffle, uint64_t seed);
void loom_loader_close(loom_loader *loader);
int64_t loom_loader_files(const loom_loader *loader);
int64_t loom_loader_tokens(const loom_loader *loader);
/// The windows of one epoch.
int64_t loom_loader_windows(const loom_loader *loader);
/// Fills `batch` rows with windows first, first + 1, ...
int loom_loader_batch(loom_loader *loader, int64_t first, int64_t batch,
                      int32_t *tokens, int32_t *targets);

/// Makes OpenBLAS use the kernels for the widest vector units this CPU has.
/// OpenBLAS picks its kernels when it loads, and generic ones on a processor
/// it does not know; where its pick is narrower, this sets OPENBLAS_CORETYPE
/// and executes the program again with `argv`, so that it returns only where
/// nothing needed to change. A user's OPENBLAS_CORETYPE is kept. Call it
/// first in main, before any thread or MPI starts.
void loom_select_blas_kernels(char **argv);

/// One line naming the BLAS, its kernels and who chose them, for reports
/// (under oneDNN, OpenBLAS's too, which takes the small products); empty
/// while the CUDA backend is on, whose GEMMs run in cuBLASLt.
const char *loom_blas_kernels(void);

/// The library of the CPU's f32 GEMMs, "OpenBLAS" or "oneDNN": LOOM_CPU_GEMM's
/// (`openblas`, `onednn`), else oneDNN where the runtime has it and the CPU
/// has AVX-512, else OpenBLAS. loom_model_open refuses a LOOM_CPU_GEMM that
/// cannot be followed.
const char *loom_sgemm_library(void);

/// OpenBLAS's kernel sets this CPU can run (names OPENBLAS_CORETYPE takes),
/// space-separated, the best match for its vector units first.
const char *loom_blas_kernel_sets(void);

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

/// The same two figures for host memory under an offload plan: the master
/// weights and optimizer state the runtime keeps there, and the arena of
/// the host's part of the step (0 without offload, whose memory the two
/// above count whole).
int64_t loom_heap_host_peak_bytes(void);
int64_t loom_heap_host_step_peak_bytes(void);
/// Bytes copied between host and device memory so far (offload).
int64_t loom_transferred_bytes(void);
/// The seconds so far the copying thread (on a GPU, the copy stream) spent
/// on the copies a step started to run alongside its work (a layer
/// loop's), and the seconds the step (the step's stream) waited for them:
/// the difference is the copies' time the step's work hid.
double loom_started_transfer_seconds(void);
double loom_transfer_wait_seconds(void);

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
/// Rank `root`'s recv = the sum of every rank's send (f32); the others'
/// recv is not written. send == recv works in place.
int loom_rt_reduce(loom_comm *comm, loom_dtype dtype, const void *send,
                   void *recv, int64_t count, int64_t root);
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

#ifdef __cplusplus
}
#endif

#endif /* LOOM_RUNTIME_H */
