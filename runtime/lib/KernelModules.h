//===- KernelModules.h - The runtime's own GPU kernels, as PTX --*- C++ -*-===//
//
// Kernels written for the runtime (runtime/lib/kernels) are compiled to PTX
// when it is built and kept in the library as text, one module per
// variant; the CUDA backend loads a module at the first call that needs it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_KERNELMODULES_H
#define LOOM_RUNTIME_KERNELMODULES_H

#include <cstdint>

namespace loom {
struct KernelModule {
  /// The loom_dtype the kernels store their tensors in.
  int32_t dtype;
  /// The largest head size the kernels take.
  int32_t headBound;
  /// The oldest GPU architecture (compute capability x 10) the PTX is for.
  int32_t arch;
  const char *ptx;
};

/// The attention kernels (kernels/Attention.cu), for each storage type and
/// head bound.
extern const KernelModule kAttentionModules[];
extern const int kAttentionModuleCount;

/// The keys a block of the tensor-core attention's key gradient takes
/// (kernels/AttentionMma.cu); the CUDA cores' blocks take 64.
constexpr int kAttentionMmaKeyRows = 128;

/// The dynamic shared memory of the tensor-core attention's key gradient
/// (kernels/AttentionMma.cu, which checks its layout against this) for
/// heads up to `headBound` (at most 64): four tiles of 64 rows of
/// headBound + 8 16-bit elements (queries and output gradients, two
/// each), one of the block's 128 keys, one of 128 rows of 72 (the scores'
/// gradients, where the values passed before) and 256 f32 statistics.
constexpr int attentionGradSharedBytes(int headBound) {
  return 4 * 64 * (headBound + 8) * 2 +
         kAttentionMmaKeyRows * (headBound + 8) * 2 +
         kAttentionMmaKeyRows * 72 * 2 + 256 * 4;
}

/// The scatter-add of rows (kernels/ScatterRows.cu): one module, f32.
extern const char kScatterRowsPtx[];

/// The loss's softmax statistics (kernels/SoftmaxStats.cu): one module, a
/// kernel per storage type, blocks of this many threads, a block per row.
extern const char kSoftmaxStatsPtx[];
constexpr int kSoftmaxStatsThreads = 256;
} // namespace loom

#endif // LOOM_RUNTIME_KERNELMODULES_H
