//===- CpuFeaturesTest.cpp - Which kernels and code a CPU gets ------------===//

#include "CpuFeatures.h"
#include "CpuGemm.h"
#include "DnnlGemm.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <cstring>

using namespace loom;

namespace {
CpuFeatures cpu(std::vector<std::string> names, bool amd = false) {
  CpuFeatures features;
  features.names = std::move(names);
  features.amd = amd;
  return features;
}

const std::vector<std::string> kAvx2 = {"avx", "fma", "avx2", "f16c"};
const std::vector<std::string> kAvx512 = {"avx",      "fma",       "avx2",
                                          "avx512f",  "avx512bw",  "avx512dq",
                                          "avx512vl", "avx512bf16"};

/// OpenBLAS's generic pick on a CPU it does not know is replaced by the
/// kernels of the CPU's widest units: AVX-512's on a new Xeon, AVX2's by
/// vendor.
TEST(CpuFeatures, GenericKernelsAreReplaced) {
  EXPECT_EQ(widerOpenBlasKernels(cpu(kAvx512), "Prescott"), "SkylakeX");
  EXPECT_EQ(widerOpenBlasKernels(cpu(kAvx2), "Prescott"), "Haswell");
  EXPECT_EQ(widerOpenBlasKernels(cpu(kAvx2, /*amd=*/true), "Core2"), "Zen");
  EXPECT_EQ(widerOpenBlasKernels(cpu({"avx"}), "Nehalem"), "Sandybridge");
  // AVX2 kernels on an AVX-512 machine are narrower too.
  EXPECT_EQ(widerOpenBlasKernels(cpu(kAvx512, /*amd=*/true), "Zen"),
            "SkylakeX");
}

/// A pick as wide as the CPU, or one for a CPU without AVX, stays.
TEST(CpuFeatures, MatchingKernelsStay) {
  EXPECT_EQ(widerOpenBlasKernels(cpu(kAvx512), "SkylakeX"), "");
  EXPECT_EQ(widerOpenBlasKernels(cpu(kAvx512), "cooperlake"), "");
  EXPECT_EQ(widerOpenBlasKernels(cpu(kAvx2), "Haswell"), "");
  EXPECT_EQ(widerOpenBlasKernels(cpu(kAvx2, true), "Zen"), "");
  EXPECT_EQ(widerOpenBlasKernels(cpu({"sse4.2"}), "Prescott"), "");
  // AVX-512 needs all four of its parts: AVX512F alone stays with AVX2's.
  EXPECT_EQ(
      widerOpenBlasKernels(cpu({"avx", "fma", "avx2", "avx512f"}), "Haswell"),
      "");
}

/// The reference kernel sets loom-bench measures: every set the CPU runs,
/// the best match first.
TEST(CpuFeatures, KernelSetsWidestFirst) {
  EXPECT_EQ(openBlasKernelSets(cpu(kAvx512)),
            (std::vector<std::string>{"SkylakeX", "Haswell", "Zen",
                                      "Sandybridge", "Prescott"}));
  EXPECT_EQ(
      openBlasKernelSets(cpu(kAvx2, true)),
      (std::vector<std::string>{"Zen", "Haswell", "Sandybridge", "Prescott"}));
  EXPECT_EQ(openBlasKernelSets(cpu({})),
            (std::vector<std::string>{"Prescott"}));
}

/// An artifact's requirements against a CPU: what is missing, in order.
TEST(CpuFeatures, MissingFeatures) {
  EXPECT_TRUE(missingCpuFeatures("", cpu(kAvx2)).empty());
  EXPECT_TRUE(missingCpuFeatures(" avx fma avx2", cpu(kAvx2)).empty());
  EXPECT_EQ(missingCpuFeatures(" avx2 avx512f amx-bf16", cpu(kAvx2)),
            (std::vector<std::string>{"avx512f", "amx-bf16"}));
}

/// This machine's own features are reported consistently: AVX-512 only
/// with AVX2, AVX2 only with AVX (the operating system enables them
/// together).
/// bf16 GEMMs run on oneDNN exactly where this CPU multiplies bf16 itself
/// (AMX, else AVX512-BF16), the runtime has oneDNN, and
/// LOOM_CPU_BF16_GEMM=widen did not ask for OpenBLAS's widened SGEMM; the
/// kernels line names the units.
TEST(CpuFeatures, Bf16GemmsMatchTheUnits) {
  const CpuFeatures &host = hostCpuFeatures();
  bool amx = host.has("amx-bf16") && host.has("amx-tile");
  bool units = amx || host.has("avx512bf16");
  const char *wanted = std::getenv("LOOM_CPU_BF16_GEMM");
  bool widen = wanted && std::strcmp(wanted, "widen") == 0;
#ifdef LOOM_HAVE_DNNL
  bool built = true;
#else
  bool built = false;
#endif
  EXPECT_EQ(dnnlGemmAvailable(), built && units && !widen);
  std::string kernels = dnnlKernels();
  EXPECT_EQ(kernels.empty(), !dnnlGemmAvailable());
  if (!kernels.empty()) {
    EXPECT_NE(kernels.find(amx ? "on AMX" : "on AVX512-BF16"),
              std::string::npos)
        << kernels;
  }
}

/// f32 GEMMs: oneDNN's on AVX-512 where the runtime has it, OpenBLAS's
/// elsewhere; LOOM_CPU_GEMM decides outright, and a request that cannot be
/// followed is an error.
TEST(CpuFeatures, SgemmLibraryByUnitsAndRequest) {
  std::string error;
  EXPECT_EQ(chooseSgemmLibrary(cpu(kAvx512), nullptr, true, error),
            SgemmLibrary::OneDnn);
  EXPECT_EQ(chooseSgemmLibrary(cpu(kAvx512, true), "", true, error),
            SgemmLibrary::OneDnn);
  EXPECT_EQ(chooseSgemmLibrary(cpu(kAvx2), nullptr, true, error),
            SgemmLibrary::OpenBlas);
  EXPECT_EQ(chooseSgemmLibrary(cpu(kAvx512), nullptr, false, error),
            SgemmLibrary::OpenBlas);
  EXPECT_EQ(error, "");
  EXPECT_EQ(chooseSgemmLibrary(cpu(kAvx512), "openblas", true, error),
            SgemmLibrary::OpenBlas);
  EXPECT_EQ(chooseSgemmLibrary(cpu(kAvx2), "onednn", true, error),
            SgemmLibrary::OneDnn);
  EXPECT_EQ(error, "");
  EXPECT_EQ(chooseSgemmLibrary(cpu(kAvx512), "onednn", false, error),
            SgemmLibrary::OpenBlas);
  EXPECT_NE(error.find("built without oneDNN"), std::string::npos) << error;
  EXPECT_EQ(chooseSgemmLibrary(cpu(kAvx512), "mkl", true, error),
            SgemmLibrary::OpenBlas);
  EXPECT_EQ(error, "LOOM_CPU_GEMM=mkl: expected 'openblas' or 'onednn'");
}

TEST(CpuFeatures, HostIsConsistent) {
  const CpuFeatures &host = hostCpuFeatures();
  if (host.has("avx512f")) {
    EXPECT_TRUE(host.has("avx2"));
  }
  if (host.has("avx2")) {
    EXPECT_TRUE(host.has("avx"));
  }
}
} // namespace
