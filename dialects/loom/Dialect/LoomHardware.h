//===- LoomHardware.h - The GPU catalogue -----------------------*- C++ -*-===//
//
// Published peak figures of the GPUs Loom plans for, and the architectures
// it compiles kernels for. Units are SI: FLOP/s, bytes, bytes/s. Peaks are
// dense (no structured sparsity).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOMHARDWARE_H
#define LOOM_DIALECT_LOOMHARDWARE_H

#include "loom/Dialect/LoomEnums.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace mlir {
namespace loom {

/// Memory is counted in GiB, as the cards' capacities are (binary).
constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

struct GpuSpec {
  llvm::StringLiteral name;
  /// Tensor-core peaks for matrix products.
  double tensorFp16Flops;
  double tensorBf16Flops; ///< 0 where the GPU has no bf16 tensor cores.
  double tensorTf32Flops; ///< fp32 matrix products; 0 without TF32.
  /// Vector (CUDA-core) peaks for everything else.
  double vectorFp32Flops;
  double vectorFp16Flops;
  double memoryBytes;
  double hbmBandwidth;
  /// NVLink bandwidth per GPU and direction inside a node.
  double nvlinkBandwidth;
  /// Network bandwidth per GPU and direction across nodes, as in the
  /// vendor's reference node (DGX) for that GPU.
  double networkBandwidth;
  /// The GPU's link to its host (PCIe x16) per direction, and the host
  /// memory bandwidth of the reference node, which its GPUs share: what an
  /// offloaded optimizer's transfers and update run at.
  double hostLinkBandwidth;
  double hostMemoryBandwidth;
  /// The reference node's host memory, which its GPUs share: what an
  /// offload plan's host keeps must fit in it.
  double hostMemoryBytes;

  /// Tensor-core peak for matrix products computed in `precision`.
  double matrixPeak(Precision precision) const;
  /// Vector peak for elementwise work in `precision`.
  double vectorPeak(Precision precision) const;
  /// Whether the GPU computes in `precision` at all (a V100 has no bf16).
  bool supports(Precision precision) const { return matrixPeak(precision) > 0; }
};

/// All GPU kinds, in the order docs and messages list them.
llvm::ArrayRef<GpuSpec> getGpuCatalogue();

/// The GPU kind named `name` (exact, case-insensitive); null if unknown.
const GpuSpec *lookupGpu(llvm::StringRef name);

/// "V100-16GB, V100-32GB, ..." for messages.
std::string getGpuNames();

/// The architectures `--target=cuda` compiles kernels for: sm_80 and later
/// (the kernels convert to bf16 and multiply on Ampere's tensor cores) that
/// PTX 8.0, which the CUDA pipeline writes, knows.
llvm::ArrayRef<llvm::StringRef> getCudaArchs();
/// Whether `arch` is one of them: "", or why not, naming them.
std::string checkCudaArch(llvm::StringRef arch);

} // namespace loom
} // namespace mlir

#endif // LOOM_DIALECT_LOOMHARDWARE_H
