//===- CudaKernels.cpp - The runtime's own GPU kernels
//----------------------===//
//
// The launches of the kernels written for the runtime (kernels/): fused
// attention and its gradient, the rows' scatter-add and the softmax
// statistics, each module loaded at its first call.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"
#include "KernelModules.h"
#include "ScatterRowsPlan.h"
#include "loom/abi.h"
#include "loom/rt.h"

#if LOOM_HAVE_CUDA

using namespace loom::cuda;

namespace {
/// The kernel `name` of `module`, whose block size is the one its
/// __launch_bounds__ declares, which the driver reports as its most.
Backend::Kernel kernelOf(Backend &be, CUmodule module,
                         const std::string &name) {
  Backend::Kernel kernel;
  kernel.function = be.function(module, name.c_str());
  int threads = 0;
  if (kernel.function &&
      be.check(be.api.cuFuncGetAttribute(
                   &threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                   kernel.function),
               "cuFuncGetAttribute"))
    kernel.threads = static_cast<unsigned>(threads);
  return kernel;
}

/// The kernels for heads of `headDim` stored as `dtype`: those of the
/// smallest bound that holds the head, built for the newest architecture
/// the GPU runs. Null, with the failure recorded, when none does.
const Backend::AttentionKernels *attentionKernels(Backend &be, int32_t dtype,
                                                  int64_t headDim) {
  const loom::KernelModule *best = nullptr;
  for (int i = 0; i < loom::kAttentionModuleCount; ++i) {
    const loom::KernelModule &m = loom::kAttentionModules[i];
    if (m.dtype != dtype || m.headBound < headDim ||
        m.arch > be.computeCapability)
      continue;
    if (!best || m.headBound < best->headBound ||
        (m.headBound == best->headBound && m.arch > best->arch))
      best = &m;
  }
  if (!best) {
    be.fail("fused attention on the GPU takes heads of at most " +
            std::to_string(LOOM_CUDA_ATTENTION_MAX_HEAD_DIM) +
            " channels (this step's have " + std::to_string(headDim) +
            "); compile with --attention=materialized");
    return nullptr;
  }
  auto key = std::make_pair(dtype, best->headBound);
  auto found = be.attention.find(key);
  if (found != be.attention.end())
    return &found->second;
  std::string suffix = std::string("_") + dtypeName(dtype) + "_" +
                       std::to_string(best->headBound);
  CUmodule module =
      be.load(best->ptx, 4, "the attention kernels (" + suffix.substr(1) + ")");
  if (!module)
    return nullptr;
  Backend::AttentionKernels kernels;
  auto get = [&](const char *kind) {
    return kernelOf(be, module, std::string("loom_attention_") + kind + suffix);
  };
  kernels.forward = get("forward");
  kernels.delta = get("delta");
  kernels.keyGrad = get("key_grad");
  kernels.queryGrad = get("query_grad");
  kernels.querySums = dtype != LOOM_DTYPE_F32;
  // The kernels index their rows by the thread count they were written
  // for; a module built otherwise must not run with the launch it asks.
  int keyThreads = kernels.querySums ? 2 * loom::kAttentionMmaKeyRows : 64;
  if (kernels.keyGrad.function &&
      static_cast<int>(kernels.keyGrad.threads) != keyThreads)
    be.fail("the attention kernels (" + suffix.substr(1) +
            ") were built for blocks of " +
            std::to_string(kernels.keyGrad.threads) +
            " threads in the key gradient, where the backend launches " +
            std::to_string(keyThreads));
  // The tensor cores' key gradient takes more shared memory than a launch
  // gets unless the kernel asks for it.
  if (kernels.querySums && kernels.keyGrad.function) {
    kernels.keyGrad.sharedBytes =
        static_cast<unsigned>(loom::attentionGradSharedBytes(best->headBound));
    be.check(be.api.cuFuncSetAttribute(
                 kernels.keyGrad.function,
                 CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                 static_cast<int>(kernels.keyGrad.sharedBytes)),
             "cuFuncSetAttribute (the key gradient's shared memory)");
  }
  if (!be.failure.empty())
    return nullptr;
  return &(be.attention[key] = kernels);
}

/// One call of the attention kernels: which, their grid (a block for 64
/// rows of one (batch, head) pair; the key gradient's a block for 64 keys,
/// 128 on the tensor cores, of one (batch, key/value head) pair) and their
/// scalar arguments.
struct AttentionLaunch {
  const Backend::AttentionKernels *kernels;
  unsigned grid[3];
  unsigned keyBlocks, keyHeads;
  int seq, heads, groups, headDim;
  float scale;

  /// On the grid of queries, or with `byKeys` of keys and key/value heads.
  void launch(Backend &be, const Backend::Kernel &kernel, void **params,
              bool byKeys = false) const {
    be.launch(kernel.function, byKeys ? keyBlocks : grid[0],
              byKeys ? keyHeads : grid[1], grid[2], kernel.threads, 1, 1,
              kernel.sharedBytes, params);
  }
};

/// The launch of a call with these sizes; none when the call has nothing
/// to do or cannot run (the failure recorded).
std::optional<AttentionLaunch> attentionLaunch(Backend &be, int32_t dtype,
                                               int64_t batch, int64_t seq,
                                               int64_t heads, int64_t groups,
                                               int64_t headDim) {
  constexpr int64_t kRows = 64, kMaxGridYZ = 65535;
  if (!be.failure.empty() || batch <= 0 || seq <= 0 || heads <= 0)
    return std::nullopt;
  if (groups < 0 || (groups && heads % groups)) {
    be.fail("fused attention of " + std::to_string(heads) + " heads in " +
            std::to_string(groups) + " key/value groups: the groups must " +
            "divide the heads");
    return std::nullopt;
  }
  if (batch > kMaxGridYZ || heads > kMaxGridYZ || seq > INT32_MAX ||
      headDim > INT32_MAX) {
    be.fail("fused attention of " + std::to_string(batch) + " sequences of " +
            std::to_string(seq) + " tokens and " + std::to_string(heads) +
            " heads exceeds the GPU's grid");
    return std::nullopt;
  }
  const Backend::AttentionKernels *kernels =
      attentionKernels(be, dtype, headDim);
  if (!kernels)
    return std::nullopt;
  int64_t keyRows = kernels->querySums ? loom::kAttentionMmaKeyRows : kRows;
  return AttentionLaunch{kernels,
                         {static_cast<unsigned>((seq + kRows - 1) / kRows),
                          static_cast<unsigned>(heads),
                          static_cast<unsigned>(batch)},
                         static_cast<unsigned>((seq + keyRows - 1) / keyRows),
                         static_cast<unsigned>(groups ? groups : heads),
                         static_cast<int>(seq),
                         static_cast<int>(heads),
                         static_cast<int>(groups),
                         static_cast<int>(headDim),
                         loom::attentionScale(headDim)};
}
} // namespace

void loom::cudaAttention(int32_t dtype, int64_t batch, int64_t seq,
                         int64_t heads, int64_t groups, int64_t headDim,
                         const void *qkv, void *out, float *lse) {
  Backend &be = backend();
  std::optional<AttentionLaunch> l =
      attentionLaunch(be, dtype, batch, seq, heads, groups, headDim);
  if (!l)
    return;
  void *params[] = {&qkv,      &out,       &lse,        &l->seq,
                    &l->heads, &l->groups, &l->headDim, &l->scale};
  l->launch(be, l->kernels->forward, params);
}

void loom::cudaAttentionGrad(int32_t dtype, int64_t batch, int64_t seq,
                             int64_t heads, int64_t groups, int64_t headDim,
                             const void *qkv, const void *out, const void *dout,
                             const float *lse, void *dqkv, float *delta) {
  Backend &be = backend();
  std::optional<AttentionLaunch> l =
      attentionLaunch(be, dtype, batch, seq, heads, groups, headDim);
  if (!l)
    return;
  // The scratch's query gradient sums, where the kernels take them
  // (loom_attention_grad_scratch).
  float *sums =
      l->kernels->querySums
          ? delta + loom_attention_query_sums_offset(batch * heads * seq)
          : nullptr;
  void *deltaParams[] = {&out,    &dout,     &delta,     &sums,
                         &l->seq, &l->heads, &l->groups, &l->headDim};
  l->launch(be, l->kernels->delta, deltaParams);
  void *gradParams[] = {&qkv,       &lse,        &dout,    &delta,
                        &sums,      &dqkv,       &l->seq,  &l->heads,
                        &l->groups, &l->headDim, &l->scale};
  // A group's key and value gradients sum over its query heads in one
  // block: no two blocks write the same keys.
  l->launch(be, l->kernels->keyGrad, gradParams, /*byKeys=*/true);
  l->launch(be, l->kernels->queryGrad, gradParams);
}

void loom::cudaScatterAddRows(int32_t dtype, int64_t n, int64_t rows,
                              int64_t columns, int64_t rowStart,
                              const int32_t *indices, const void *updates,
                              float *out, int32_t *scratch) {
  Backend &be = backend();
  if (!be.failure.empty() || n <= 0 || rows <= 0 || columns <= 0)
    return;
  if (dtype < LOOM_DTYPE_F32 || dtype > LOOM_DTYPE_F16) {
    be.fail("the rows' scatter-add takes f32, bf16 or f16 updates, not "
            "dtype " +
            std::to_string(dtype));
    return;
  }
  constexpr int64_t kMaxGridY = 65535;
  if (!loom_scatter_add_rows_fits(n, rows) || columns > INT32_MAX ||
      (columns + loom::kScatterThreads - 1) / loom::kScatterThreads >
          kMaxGridY) {
    be.fail("the rows' scatter-add of " + std::to_string(n) + " indices into " +
            std::to_string(rows) + " x " + std::to_string(columns) +
            " exceeds its kernels' int32 indices and grid");
    return;
  }
  if (!be.scatter) {
    CUmodule module =
        be.load(loom::kScatterRowsPtx, 4, "the rows' scatter-add kernels");
    if (!module)
      return;
    Backend::ScatterKernels k;
    k.rank = kernelOf(be, module, "loom_scatter_rank");
    k.offsets = kernelOf(be, module, "loom_scatter_offsets");
    k.scan = kernelOf(be, module, "loom_scatter_scan");
    k.place = kernelOf(be, module, "loom_scatter_place");
    for (int32_t type : {LOOM_DTYPE_F32, LOOM_DTYPE_BF16, LOOM_DTYPE_F16})
      k.add[type] = kernelOf(
          be, module, std::string("loom_scatter_add_") + dtypeName(type));
    if (!be.failure.empty())
      return;
    be.scatter = k;
  }
  const Backend::ScatterKernels &k = *be.scatter;
  loom::ScatterRowsPlan p =
      loom::planScatterRows(n, rows, columns, rowStart, scratch);
  // Each kernel's block is the size its index arithmetic assumes.
  auto launch = [&](const Backend::Kernel &kernel, unsigned blocksX,
                    unsigned blocksY, int threads, void **params) {
    if (kernel.threads != static_cast<unsigned>(threads))
      return be.fail("the rows' scatter-add kernels take blocks of " +
                     std::to_string(threads) + " threads, the driver " +
                     std::to_string(kernel.threads));
    be.launch(kernel.function, blocksX, blocksY, 1, threads, 1, 1, 0, params);
  };
  void *rankParams[] = {&indices, &p.n,      &p.rowStart,
                        &p.rows,  &p.counts, &p.rank};
  launch(k.rank, p.rankBlocks, 1, loom::kScatterThreads, rankParams);
  void *offsetParams[] = {&p.counts, &p.chunks, &p.rows, &p.begin};
  launch(k.offsets, p.offsetBlocks, 1, loom::kScatterThreads, offsetParams);
  void *scanParams[] = {&p.rows, &p.begin};
  launch(k.scan, 1, 1, loom::kScatterScanThreads, scanParams);
  void *placeParams[] = {&indices,  &p.n,    &p.rowStart, &p.rows,
                         &p.counts, &p.rank, &p.begin,    &p.order};
  launch(k.place, p.placeBlocks, 1, loom::kScatterThreads, placeParams);
  void *addParams[] = {&updates, &p.columns, &p.begin, &p.order, &out};
  launch(k.add[dtype], p.addBlocksX, p.addBlocksY, loom::kScatterThreads,
         addParams);
}

void loom::cudaSoftmaxStats(int32_t dtype, int64_t rows, int64_t columns,
                            int64_t classes, const void *logits, float *max,
                            float *sumExp) {
  Backend &be = backend();
  if (!be.failure.empty() || rows <= 0)
    return;
  if (dtype < LOOM_DTYPE_F32 || dtype > LOOM_DTYPE_F16 || classes < 1 ||
      classes > columns || rows > INT32_MAX) {
    be.fail("the softmax statistics of " + std::to_string(rows) + " rows of " +
            std::to_string(classes) + " of " + std::to_string(columns) +
            " columns, dtype " + std::to_string(dtype) +
            ": the kernels take f32, bf16 or f16 logits, at least one class "
            "and at most 2^31 - 1 rows");
    return;
  }
  if (!be.softmaxStats) {
    CUmodule module =
        be.load(loom::kSoftmaxStatsPtx, 4, "the softmax statistics' kernels");
    if (!module)
      return;
    std::array<Backend::Kernel, 3> kernels;
    for (int32_t type : {LOOM_DTYPE_F32, LOOM_DTYPE_BF16, LOOM_DTYPE_F16})
      kernels[type] = kernelOf(
          be, module, std::string("loom_softmax_stats_") + dtypeName(type));
    if (!be.failure.empty())
      return;
    be.softmaxStats = kernels;
  }
  const Backend::Kernel &kernel = (*be.softmaxStats)[dtype];
  // The block's shared arrays and its merge assume their size.
  if (kernel.threads != static_cast<unsigned>(loom::kSoftmaxStatsThreads))
    return be.fail("the softmax statistics' kernels take blocks of " +
                   std::to_string(loom::kSoftmaxStatsThreads) +
                   " threads, the driver " + std::to_string(kernel.threads));
  // 16-byte loads where every row starts on 16 bytes.
  size_t size = loom::elementSize(dtype);
  int32_t vectorized =
      alignmentOf(logits) >= 16 && (columns * size) % 16 == 0 ? 1 : 0;
  long long cols = columns, used = classes;
  void *params[] = {&logits, &cols, &used, &vectorized, &max, &sumExp};
  be.launch(kernel.function, static_cast<unsigned>(rows), 1, 1,
            loom::kSoftmaxStatsThreads, 1, 1, 0, params);
}

#endif // LOOM_HAVE_CUDA
