//===- CpuFeatures.h - Vector units and OpenBLAS kernels ------*- C++ -*-===//
//-*-===//
//
// What the runtime knows of the CPU it runs on: which of the features an
// artifact's native code may need (abi.h's LOOM_X86_FEATURES) it has, and
// which of OpenBLAS's kernel sets match its widest vector units.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CPUFEATURES_H
#define LOOM_RUNTIME_CPUFEATURES_H

#include <string>
#include <string_view>
#include <vector>

namespace loom {

/// A CPU's features among LOOM_X86_FEATURES, by LLVM's name, and whether AMD
/// made it (OpenBLAS's kernels for AMD and Intel differ).
struct CpuFeatures {
  std::vector<std::string> names;
  bool amd = false;

  bool has(std::string_view name) const;
};

/// This CPU's features: those CPUID reports and whose registers the
/// operating system saves (XCR0). None on other architectures.
const CpuFeatures &hostCpuFeatures();

/// How wide `cpu`'s vector units: kAvx512Width for AVX-512 (its F, BW, DQ
/// and VL parts), 2 for AVX2 with FMA, 1 for AVX, 0 for narrower.
int vectorWidth(const CpuFeatures &cpu);
constexpr int kAvx512Width = 3;

/// The space-separated features in `required` that `cpu` lacks.
std::vector<std::string> missingCpuFeatures(std::string_view required,
                                            const CpuFeatures &cpu);

/// OpenBLAS's kernel sets that `cpu` can run, widest vector units first, by
/// the names OPENBLAS_CORETYPE takes; the first matches `cpu` best.
std::vector<std::string> openBlasKernelSets(const CpuFeatures &cpu);

/// The kernel set to use on `cpu` instead of `loaded`, OpenBLAS's own pick,
/// where `loaded` uses narrower vector units than `cpu` has; empty where it
/// does not.
std::string widerOpenBlasKernels(const CpuFeatures &cpu,
                                 std::string_view loaded);

} // namespace loom

#endif // LOOM_RUNTIME_CPUFEATURES_H
