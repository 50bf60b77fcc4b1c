//===- EmulatedCuda.h - CUDA's built-ins on the CPU, for kernel tests --===//
//
// The runtime's own kernels (runtime/lib/kernels) compiled for the CPU: a
// test includes this, then the kernels' .cu file, and runs them with
// launch() as the CUDA backend launches them. Blocks run one after another,
// so that a kernel's __shared__ arrays (static here) hold one block's data
// at a time; a block's threads are threads of the process that meet at
// __syncthreads (a barrier) in the kernels that synchronize, one after the
// other in those that do not.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_EMULATEDCUDA_H
#define LOOM_TEST_UNIT_EMULATEDCUDA_H

#include "Float.h"

#include <pthread.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

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
struct uint4 {
  uint32_t x, y, z, w;
};
float __bfloat162float(__nv_bfloat16 x) {
  return loom::bitsFloat(static_cast<uint32_t>(x.bits) << 16);
}
float __half2float(__half x) {
  return loom::bitsFloat(loom::widenHalf(x.bits));
}

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
} // namespace

// What the kernels' sources expect of nvcc.
#define LOOM_EMULATE_CUDA 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(threads)
#define __shared__ static

#endif // LOOM_TEST_UNIT_EMULATEDCUDA_H
