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
  const char *ptx;
};

/// The attention kernels (kernels/Attention.cu), for each storage type and
/// head bound.
extern const KernelModule kAttentionModules[];
extern const int kAttentionModuleCount;

/// The scatter-add of rows (kernels/ScatterRows.cu): one module, f32.
extern const char kScatterRowsPtx[];

/// The loss's softmax statistics (kernels/SoftmaxStats.cu): one module, a
/// kernel per storage type, blocks of this many threads, a block per row.
extern const char kSoftmaxStatsPtx[];
constexpr int kSoftmaxStatsThreads = 256;
} // namespace loom

#endif // LOOM_RUNTIME_KERNELMODULES_H
