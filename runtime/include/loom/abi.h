/*===- abi.h - Names shared by compiled artifacts and the runtime -*- C -*-===*\
|*                                                                          *|
|* The compiler writes these names into an artifact (symbols, and the        *|
|* manifest's `arg <kind> <name> ...` lines, docs/artifact.md); the runtime *|
|* finds entry points and fills their arguments by them. Both include this *|
|* header, so that the two cannot drift apart.                               *|
|*                                                                          *|
\*===----------------------------------------------------------------------===*/

#ifndef LOOM_ABI_H
#define LOOM_ABI_H

#include <stddef.h>
#include <stdint.h>

/* Symbols of an artifact. */
#define LOOM_MANIFEST_SYMBOL "loom_manifest"
#define LOOM_ENTRY_PREFIX "loom_entry_"
/* A pipeline artifact's entry points: pipeline rank r runs the training
   step named this prefix followed by r. */
#define LOOM_STAGE_STEP_PREFIX "train_step_stage"
/* ... and for validation the forward pass alone, named this prefix
   followed by r: every rank calls its own, and each gets the loss. */
#define LOOM_STAGE_EVAL_PREFIX "eval_stage"
/* ... and, in an artifact compiled for sampling (loomc --logits), the
   scores of one micro-batch, named this prefix followed by r: every rank
   calls its own, and each gets the last stage's scores. */
#define LOOM_STAGE_LOGITS_PREFIX "logits_stage"

/* The CPU an artifact's native code was generated for: a string, the
   LLVM CPU name, then each of the features below that the code may use,
   space-separated. The runtime refuses to load the code on a CPU that
   lacks one of them, where it would stop at the first such instruction. */
#define LOOM_CPU_SYMBOL "loom_target_cpu"

/* The x86-64 features that generated code may need, by LLVM's name, and
   where CPUID reports them: X(name, leaf, subleaf, register (0 EAX, 1 EBX,
   2 ECX, 3 EDX), bit, the XCR0 bits the operating system must have set for
   the registers they use). */
#define LOOM_X86_FEATURES(X)                                                   \
  X("popcnt", 1, 0, 2, 23, 0x0)                                                \
  X("sse4.2", 1, 0, 2, 20, 0x0)                                                \
  X("movbe", 1, 0, 2, 22, 0x0)                                                 \
  X("lzcnt", 0x80000001u, 0, 2, 5, 0x0)                                        \
  X("bmi", 7, 0, 1, 3, 0x0)                                                    \
  X("bmi2", 7, 0, 1, 8, 0x0)                                                   \
  X("avx", 1, 0, 2, 28, 0x6)                                                   \
  X("f16c", 1, 0, 2, 29, 0x6)                                                  \
  X("fma", 1, 0, 2, 12, 0x6)                                                   \
  X("avx2", 7, 0, 1, 5, 0x6)                                                   \
  X("avxvnni", 7, 1, 0, 4, 0x6)                                                \
  X("gfni", 7, 0, 2, 8, 0x0)                                                   \
  X("vaes", 7, 0, 2, 9, 0x6)                                                   \
  X("vpclmulqdq", 7, 0, 2, 10, 0x6)                                            \
  X("avx512f", 7, 0, 1, 16, 0xe6)                                              \
  X("avx512dq", 7, 0, 1, 17, 0xe6)                                             \
  X("avx512cd", 7, 0, 1, 28, 0xe6)                                             \
  X("avx512bw", 7, 0, 1, 30, 0xe6)                                             \
  X("avx512vl", 7, 0, 1, 31, 0xe6)                                             \
  X("avx512vnni", 7, 0, 2, 11, 0xe6)                                           \
  X("avx512bf16", 7, 1, 0, 5, 0xe6)                                            \
  X("avx512fp16", 7, 0, 3, 23, 0xe6)                                           \
  X("avx512ifma", 7, 0, 1, 21, 0xe6)                                           \
  X("avx512vbmi", 7, 0, 2, 1, 0xe6)                                            \
  X("avx512vbmi2", 7, 0, 2, 6, 0xe6)                                           \
  X("avx512bitalg", 7, 0, 2, 12, 0xe6)                                         \
  X("avx512vpopcntdq", 7, 0, 2, 14, 0xe6)                                      \
  X("amx-tile", 7, 0, 3, 24, 0x60000)                                          \
  X("amx-bf16", 7, 0, 3, 22, 0x60000)                                          \
  X("amx-int8", 7, 0, 3, 25, 0x60000)

/* Functions of the runtime that generated code calls (rt.h). */
#define LOOM_RT_SGEMM "loom_rt_sgemm"
#define LOOM_RT_GEMM "loom_rt_gemm"
#define LOOM_RT_GEMM_BATCHED "loom_rt_gemm_batched"
#define LOOM_RT_GEMM_ROUNDED "loom_rt_gemm_rounded"
#define LOOM_RT_GEMM_GELU "loom_rt_gemm_gelu"
#define LOOM_RT_GEMM_ADD "loom_rt_gemm_add"
#define LOOM_RT_ATTENTION "loom_rt_attention"
#define LOOM_RT_ATTENTION_GRAD "loom_rt_attention_grad"
#define LOOM_RT_SCATTER_ADD_ROWS "loom_rt_scatter_add_rows"
#define LOOM_RT_SOFTMAX_STATS "loom_rt_softmax_stats"
#define LOOM_RT_TRANSFER "loom_rt_transfer"
#define LOOM_RT_TRANSFER_START "loom_rt_transfer_start"
#define LOOM_RT_TRANSFER_WAIT "loom_rt_transfer_wait"
#define LOOM_RT_TRANSFER_ADD "loom_rt_transfer_add"
#define LOOM_RT_TRANSFER_ADD_START "loom_rt_transfer_add_start"
#define LOOM_RT_HOST_BEGIN "loom_rt_host_begin"
#define LOOM_RT_HOST_END "loom_rt_host_end"
/* loom_rt_transfer's directions. */
#define LOOM_TO_HOST 0
#define LOOM_TO_DEVICE 1
#define LOOM_RT_PARALLEL_FOR "loom_rt_parallel_for"
#define LOOM_RT_GROUP_ALL_REDUCE "loom_rt_group_all_reduce"
#define LOOM_RT_GROUP_ALL_REDUCE_MAX "loom_rt_group_all_reduce_max"
#define LOOM_RT_GROUP_ALL_GATHER "loom_rt_group_all_gather"
#define LOOM_RT_GROUP_REDUCE_SCATTER "loom_rt_group_reduce_scatter"
#define LOOM_RT_GROUP_REDUCE "loom_rt_group_reduce"
#define LOOM_RT_GROUP_RANK "loom_rt_group_rank"
#define LOOM_RT_GROUP_SEND "loom_rt_group_send"
#define LOOM_RT_GROUP_RECV "loom_rt_group_recv"
#define LOOM_RT_TRACE_BEGIN "loom_rt_trace_begin"
#define LOOM_RT_TRACE_END "loom_rt_trace_end"
#define LOOM_RT_DEVICE_WAIT "loom_rt_device_wait"

/* The largest head (channels) the GPU's fused attention kernels take:
   with --target=cuda, larger heads get the generated loops instead. */
#define LOOM_CUDA_ATTENTION_MAX_HEAD_DIM 64

/* loom_rt_scatter_add_rows sorts its indices by row in chunks of this
   many: a GPU's block ranks the indices of a chunk among themselves. */
#define LOOM_SCATTER_CHUNK 1024

/* The int32 elements of scratch loom_rt_scatter_add_rows takes for `n`
   indices into `rows` rows, which the compiler allocates with the step's
   other buffers: the count of each row's indices in each chunk, each
   index's rank among its chunk's indices of its row, the indices sorted
   by row, and where each row's begin in them. */
static inline int64_t loom_scatter_add_rows_scratch(int64_t n, int64_t rows) {
  int64_t chunks = (n + LOOM_SCATTER_CHUNK - 1) / LOOM_SCATTER_CHUNK;
  return chunks * rows + 2 * n + rows + 1;
}

/* Whether loom_rt_scatter_add_rows takes `n` indices into `rows` rows: it
   numbers the indices, their sorted places and the rows with int32s. */
static inline int loom_scatter_add_rows_fits(int64_t n, int64_t rows) {
  return n <= INT32_MAX && rows < INT32_MAX;
}

/* Where the query gradient's f32 sums begin in loom_rt_attention_grad's
   scratch, past `rows` (batch x heads x seq) queries' dot products: on 16
   bytes, for the kernels' vector additions. */
static inline int64_t loom_attention_query_sums_offset(int64_t rows) {
  return (rows + 3) / 4 * 4;
}

/* The f32 elements of scratch loom_rt_attention_grad takes, which the
   compiler allocates with the step's other buffers: each query's dot
   product of the output and its gradient [batch, heads, seq], then, where
   `query_sums` (the GPU's tensor-core kernels: the cuda target, bf16 or
   f16 storage), the f32 sums of the queries' gradient [batch, heads, seq,
   head_dim] that each block of keys adds its share to. */
static inline int64_t loom_attention_grad_scratch(int64_t batch, int64_t seq,
                                                  int64_t heads,
                                                  int64_t head_dim,
                                                  int query_sums) {
  int64_t rows = batch * heads * seq;
  return query_sums ? loom_attention_query_sums_offset(rows) + rows * head_dim
                    : rows;
}

/* The spans of a step's timeline generated code marks (loom_rt_trace_*). */
#define LOOM_TRACE_FORWARD 0
#define LOOM_TRACE_BACKWARD 1
#define LOOM_TRACE_OPTIMIZER 2

/* Parameters of the transformer's blocks are stacked over the layers and
   named LOOM_STACKED_PREFIX followed by the per-layer name: slice l of
   "h.*.ln_1.weight" is layer l's "ln_1.weight". */
#define LOOM_STACKED_PREFIX "h.*."

/* Kinds of entry point arguments. */
#define LOOM_ARG_PARAM "param"
#define LOOM_ARG_STATE "state"
#define LOOM_ARG_INPUT "input"
#define LOOM_ARG_OUTPUT "output"
/* The device's copy of a parameter in the step's precision, whose f32
   master the host keeps with the optimizer state (offload=optimizer); the
   runtime fills it from the master whenever that is set. */
#define LOOM_ARG_PARAM_COPY "param_copy"

/* Inputs: token ids and next-token targets ([batch, sequence] int32), the
   learning rate and the step number (f32 scalars). */
#define LOOM_INPUT_TOKENS "tokens"
#define LOOM_INPUT_TARGETS "targets"
#define LOOM_INPUT_LR "lr"
#define LOOM_INPUT_STEP "step"
/* fp16 training's loss scale (an f32 scalar): the backward pass starts from
   it instead of 1 and the gradients are divided by it; the training step
   leaves the parameters as they are when its gradient norm is not finite.
   The runtime raises and lowers it between steps. */
#define LOOM_INPUT_LOSS_SCALE "loss_scale"

/* Outputs: the loss, the global gradient norm, and the gradient of a
   parameter as LOOM_OUTPUT_GRAD_PREFIX followed by its name. */
#define LOOM_OUTPUT_LOSS "loss"
#define LOOM_OUTPUT_GRAD_NORM "grad_norm"
/* The next-token scores of every position, [rows, sequence, padded vocab]
   (loomc --logits). */
#define LOOM_OUTPUT_LOGITS "logits"
#define LOOM_OUTPUT_GRAD_PREFIX "grad."

/* Optimizer state: one of these, a dot, then the parameter's name. */
#define LOOM_STATE_ADAM_M "m"
#define LOOM_STATE_ADAM_V "v"
#define LOOM_STATE_MOMENTUM "momentum"

/* The manifest's third line, "checksum <16 lowercase hex digits>": the
   FNV-1a 64-bit hash of the whole artifact file with those digits written
   as '0'. loomc writes the zeros, links, then fills them in; the runtime
   recomputes it before loading the code, so that a corrupted file is an
   error rather than a crash. FNV-1a catches any change of one byte (each
   step of the hash is a bijection of its state); it is no defence against
   deliberate tampering. */
#define LOOM_CHECKSUM_KEY "checksum "
#define LOOM_CHECKSUM_DIGITS 16
#define LOOM_CHECKSUM_SEED 0xcbf29ce484222325ull

/* Continues `hash` (LOOM_CHECKSUM_SEED to start) over `size` bytes. */
static inline uint64_t loom_checksum(uint64_t hash, const void *data,
                                     size_t size) {
  const unsigned char *bytes = (const unsigned char *)data;
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

/* FLOPs of training on one token as MFU and HFU count them: MosaicML's
   throughput tables, after Korthikanti et al., "Reducing Activation
   Recomputation in Large Transformer Models" (docs/cost-model.md). Each
   parameter does a multiply-add in each of `passes` passes: 3 for MFU (the
   forward pass, the input gradients and the weight gradients), 4 for HFU
   where the forward pass runs again (recomputation). Attention's scores
   and weighted sums add 2 x layers x width x sequence in the forward pass,
   and as much in the backward pass (and the forward's again: `passes` - 1
   of them). Norms, activations and residual adds are not counted. The
   cost model, loom-run's MFU and the benchmarks all count with these. */
static inline double loom_param_flops_per_token(double params, int passes) {
  return 2.0 * passes * params;
}
static inline double loom_attention_flops_per_token(double layers, double width,
                                                    double sequence,
                                                    int passes) {
  return 2.0 * (passes - 1) * layers * width * sequence;
}

/* Element types of communicated buffers and of the runtime's kernels'
   operands, which generated code passes as int32 (rt.h) and the host API
   takes as this enum (runtime.h). Sums of communicated buffers are
   computed in f32 only; bf16 and f16 buffers can be gathered, broadcast,
   sent and received. */
typedef enum loom_dtype {
  LOOM_DTYPE_F32 = 0,
  LOOM_DTYPE_BF16 = 1,
  LOOM_DTYPE_F16 = 2
} loom_dtype;

/* The groups of a rank on the grid pp x dp x tp: the ranks that share its
   pipeline stage and tensor-parallel rank (dp), its stage and replica
   (tp), its replica and tensor-parallel rank (pp), or all of them. */
typedef enum loom_group {
  LOOM_GROUP_WORLD = 0,
  LOOM_GROUP_DP = 1,
  LOOM_GROUP_TP = 2,
  LOOM_GROUP_PP = 3,
  LOOM_GROUP_COUNT = 4
} loom_group;

#endif /* LOOM_ABI_H */
