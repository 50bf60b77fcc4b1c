//===- LoomHardware.cpp - The GPU catalogue -------------------------------===//
//
// Figures from NVIDIA's data sheets (SXM parts, dense peaks):
//   V100:  125 TFLOP/s fp16 tensor, 15.7 fp32, 31.4 fp16 vector, 900 GB/s,
//          NVLink 2 at 300 GB/s per GPU (150 each way); DGX-1 has four
//          100 Gb/s EDR links for eight GPUs.
//   A100:  312 TFLOP/s fp16/bf16 tensor, 156 TF32, 19.5 fp32, 78 fp16
//          vector, 1,555 GB/s (40 GB) or 2,039 GB/s (80 GB), NVLink 3 at
//          600 GB/s (300 each way); DGX A100 has one 200 Gb/s HDR link per GPU.
//   H100:  989 TFLOP/s fp16/bf16 tensor, 495 TF32, 67 fp32, 134 fp16 vector,
//          3,350 GB/s, NVLink 4 at 900 GB/s (450 each way); DGX H100 has one
//          400 Gb/s NDR link per GPU.
//   H200:  H100's compute with 141 GB at 4,800 GB/s.
// The host side, per GPU, from the reference nodes' data sheets: DGX-1
// (V100): PCIe 3 x16, 16 GB/s each way; two Xeon E5-2698 v4, four
// channels of DDR4-2400 each, 153.6 GB/s. DGX A100: PCIe 4 x16, 32 GB/s;
// two EPYC 7742, eight channels of DDR4-3200 each, 409.6 GB/s. DGX H100
// (and H200): PCIe 5 x16, 64 GB/s; two Xeon 8480C, eight channels of
// DDR5-4800 each, 614.4 GB/s. A node's GPUs share its memory bandwidth.
// Memory sizes are binary: an "A100-40GB" has 40 GiB (nvidia-smi reports
// 40,960 MiB), an H100 80 GiB. The H200's 141 GB are the marketing figure
// of 144 GiB of HBM3e of which the driver reports 143,771 MiB; 140 GiB here.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomHardware.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
constexpr double T = 1e12, G = 1e9, GiB = kBytesPerGiB;

constexpr GpuSpec kCatalogue[] = {
    {"V100-16GB", 125 * T, 0, 0, 15.7 * T, 31.4 * T, 16 * GiB, 900 * G, 150 * G,
     6.25 * G, 16 * G, 153.6 * G, 512 * GiB},
    {"V100-32GB", 125 * T, 0, 0, 15.7 * T, 31.4 * T, 32 * GiB, 900 * G, 150 * G,
     6.25 * G, 16 * G, 153.6 * G, 512 * GiB},
    {"A100-40GB", 312 * T, 312 * T, 156 * T, 19.5 * T, 78 * T, 40 * GiB,
     1555 * G, 300 * G, 25 * G, 32 * G, 409.6 * G, 1024 * GiB},
    {"A100-80GB", 312 * T, 312 * T, 156 * T, 19.5 * T, 78 * T, 80 * GiB,
     2039 * G, 300 * G, 25 * G, 32 * G, 409.6 * G, 1024 * GiB},
    {"H100-SXM", 989 * T, 989 * T, 495 * T, 67 * T, 134 * T, 80 * GiB, 3350 * G,
     450 * G, 50 * G, 64 * G, 614.4 * G, 2048 * GiB},
    {"H200", 989 * T, 989 * T, 495 * T, 67 * T, 134 * T, 140 * GiB, 4800 * G,
     450 * G, 50 * G, 64 * G, 614.4 * G, 2048 * GiB},
};
} // namespace

double GpuSpec::matrixPeak(Precision precision) const {
  switch (precision) {
  case Precision::fp32:
    return tensorTf32Flops > 0 ? tensorTf32Flops : vectorFp32Flops;
  case Precision::bf16:
    return tensorBf16Flops;
  case Precision::fp16:
    return tensorFp16Flops;
  }
  llvm_unreachable("unknown precision");
}

double GpuSpec::vectorPeak(Precision precision) const {
  return precision == Precision::fp32 ? vectorFp32Flops : vectorFp16Flops;
}

llvm::ArrayRef<GpuSpec> mlir::loom::getGpuCatalogue() { return kCatalogue; }

const GpuSpec *mlir::loom::lookupGpu(llvm::StringRef name) {
  for (const GpuSpec &spec : kCatalogue)
    if (spec.name.equals_insensitive(name))
      return &spec;
  return nullptr;
}

std::string mlir::loom::getGpuNames() {
  std::string names;
  for (const GpuSpec &spec : kCatalogue) {
    if (!names.empty())
      names += ", ";
    names += spec.name.str();
  }
  return names;
}

llvm::ArrayRef<llvm::StringRef> mlir::loom::getCudaArchs() {
  static const llvm::StringRef archs[] = {"sm_80", "sm_86", "sm_87",
                                          "sm_89", "sm_90", "sm_90a"};
  return archs;
}

std::string mlir::loom::checkCudaArch(llvm::StringRef arch) {
  if (llvm::is_contained(getCudaArchs(), arch))
    return "";
  return "'" + arch.str() +
         "' is not an architecture Loom's kernels are compiled for: one of " +
         llvm::join(getCudaArchs(), ", ") +
         " (an artifact runs on its architecture and later ones)";
}
