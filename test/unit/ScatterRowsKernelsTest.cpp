//===- ScatterRowsKernelsTest.cpp - The scatter's GPU kernels, on the CPU -===//
//
// runtime/lib/kernels/ScatterRows.cu compiled for the CPU with CUDA's
// built-ins emulated, and run as the CUDA backend launches it
// (ScatterRowsPlan.h): blocks one after the other, so that a kernel's
// __shared__ arrays (static here) hold one block's data at a time; a
// block's threads as threads of the process that meet at __syncthreads (a
// barrier) in the kernels that synchronize, one after the other in those
// that do not. The results must equal the loop's bit for bit, as a GPU's
// must (CudaScatterRowsTest.cpp): this checks the kernels' ranks, offsets,
// scan and placement on every machine, GPU or not.
//
//===----------------------------------------------------------------------===//

#include "Float.h"
#include "ScatterRowsPlan.h"
#include "ScatterRowsReference.h"

#include <pthread.h>

#include <thread>

namespace {
struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
thread_local Dim3 threadIdx, blockIdx;
pthread_barrier_t *blockBarrier = nullptr;
void __syncthreads() { pthread_barrier_wait(blockBarrier); }
int min(int a, int b) { return a < b ? a : b; }
struct __nv_bfloat16 {
  uint16_t bits;
};
struct __half {
  uint16_t bits;
};
float __bfloat162float(__nv_bfloat16 x) {
  return loom::bitsFloat(static_cast<uint32_t>(x.bits) << 16);
}
float __half2float(__half x) {
  return loom::bitsFloat(loom::widenHalf(x.bits));
}
} // namespace

#define LOOM_EMULATE_CUDA 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(threads)
#define __shared__ static
#include "kernels/ScatterRows.cu"
#undef __shared__
#undef __launch_bounds__
#undef __forceinline__
#undef __device__
#undef __global__

using namespace loom_test;

namespace {
/// Runs `kernel(args...)` on a grid of blocksX x blocksY blocks of
/// `threads`; `synchronizes`: whether its threads meet at __syncthreads.
template <typename Kernel, typename... Args>
void launch(unsigned blocksX, unsigned blocksY, int threads, bool synchronizes,
            Kernel kernel, Args... args) {
  pthread_barrier_t barrier;
  if (synchronizes)
    pthread_barrier_init(&barrier, nullptr, threads);
  blockBarrier = &barrier;
  for (unsigned y = 0; y < blocksY; ++y)
    for (unsigned x = 0; x < blocksX; ++x) {
      auto run = [&, x, y](unsigned t) {
        blockIdx = {x, y, 0};
        threadIdx = {t, 0, 0};
        kernel(args...);
      };
      if (!synchronizes) {
        for (int t = 0; t < threads; ++t)
          run(t);
        continue;
      }
      std::vector<std::thread> block;
      for (int t = 0; t < threads; ++t)
        block.emplace_back(run, t);
      for (std::thread &thread : block)
        thread.join();
    }
  blockBarrier = nullptr;
  if (synchronizes)
    pthread_barrier_destroy(&barrier);
}

/// What the CUDA backend launches for loom_rt_scatter_add_rows (Cuda.cpp),
/// in the same order with the same arguments.
std::vector<float> runKernels(const ScatterCase &c, const ScatterProblem &p) {
  std::vector<float> out(p.init);
  std::vector<int32_t> scratch(loom_scatter_add_rows_scratch(c.n, c.rows), -7);
  loom::ScatterRowsPlan plan =
      loom::planScatterRows(c.n, c.rows, c.columns, c.rowStart, scratch.data());
  const int *indices = p.indices.data();
  launch(plan.rankBlocks, 1, loom::kScatterThreads, true, loom_scatter_rank,
         indices, plan.n, plan.rowStart, plan.rows, plan.counts, plan.rank);
  launch(plan.offsetBlocks, 1, loom::kScatterThreads, false,
         loom_scatter_offsets, plan.counts, plan.chunks, plan.rows, plan.begin);
  launch(1, 1, loom::kScatterScanThreads, true, loom_scatter_scan, plan.rows,
         plan.begin);
  launch(plan.placeBlocks, 1, loom::kScatterThreads, false, loom_scatter_place,
         indices, plan.n, plan.rowStart, plan.rows, plan.counts, plan.rank,
         plan.begin, plan.order);
  auto add = [&](auto kernel, auto *updates) {
    launch(plan.addBlocksX, plan.addBlocksY, loom::kScatterThreads, false,
           kernel, updates, plan.columns, plan.begin, plan.order, out.data());
  };
  const void *stored = p.stored.data();
  if (p.dtype == LOOM_DTYPE_BF16)
    add(loom_scatter_add_bf16, static_cast<const __nv_bfloat16 *>(stored));
  else if (p.dtype == LOOM_DTYPE_F16)
    add(loom_scatter_add_f16, static_cast<const __half *>(stored));
  else
    add(loom_scatter_add_f32, static_cast<const float *>(stored));
  return out;
}
} // namespace

TEST(ScatterRowsKernels, MatchTheLoopBitForBit) {
  checkScatterCases(runKernels);
}
