//===- SoftmaxStatsKernelsTest.cpp - The statistics' GPU kernels, on the CPU
//===//
//
// runtime/lib/kernels/SoftmaxStats.cu compiled for the CPU with CUDA's
// built-ins emulated (EmulatedCuda.h) and launched as the CUDA backend
// launches it: a block of kSoftmaxStatsThreads per row, its threads' online
// statistics merged in shared memory; with 16-byte loads and without. The
// statistics must be the double ones' (SoftmaxStatsReference.h), as a
// GPU's must (CudaSoftmaxStatsTest.cpp).
//
//===----------------------------------------------------------------------===//

#include "KernelModules.h"
#include "SoftmaxStatsReference.h"

#include "EmulatedCuda.h"

#include "kernels/SoftmaxStats.cu"

using namespace loom_test;

namespace {
void runKernels(const SoftmaxCase &c, const SoftmaxProblem &p,
                std::vector<float> &max, std::vector<float> &sum,
                int vectorized) {
  auto run = [&](auto kernel, auto *logits) {
    launch(static_cast<unsigned>(c.rows), 1, loom::kSoftmaxStatsThreads, true,
           kernel, logits, static_cast<long long>(c.columns),
           static_cast<long long>(c.classes), vectorized, max.data(),
           sum.data());
  };
  const void *stored = p.stored.data();
  if (p.dtype == LOOM_DTYPE_BF16)
    run(loom_softmax_stats_bf16, static_cast<const __nv_bfloat16 *>(stored));
  else if (p.dtype == LOOM_DTYPE_F16)
    run(loom_softmax_stats_f16, static_cast<const __half *>(stored));
  else
    run(loom_softmax_stats_f32, static_cast<const float *>(stored));
}
} // namespace

TEST(SoftmaxStatsKernels, OneElementAtATime) {
  checkSoftmaxCases(
      [](const SoftmaxCase &c, const SoftmaxProblem &p, std::vector<float> &max,
         std::vector<float> &sum) { runKernels(c, p, max, sum, 0); });
}

// As the backend launches where rows start on 16 bytes (a vector's
// alignment, which std::vector's buffer has).
TEST(SoftmaxStatsKernels, SixteenBytesAtATime) {
  checkSoftmaxCases([](const SoftmaxCase &c, const SoftmaxProblem &p,
                       std::vector<float> &max, std::vector<float> &sum) {
    size_t size = p.dtype == LOOM_DTYPE_F32 ? 4 : 2;
    if ((c.columns * size) % 16 != 0)
      return runKernels(c, p, max, sum, 0);
    runKernels(c, p, max, sum, 1);
  });
}
