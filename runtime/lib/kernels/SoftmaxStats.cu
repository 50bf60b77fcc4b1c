//===- SoftmaxStats.cu - loom_rt_softmax_stats on the GPU -----------------===//
//
// The loss's softmax statistics, a block per row of the logits: each
// thread keeps a running maximum and the sum of exponentials rescaled to
// it whenever the maximum grows (an online softmax), so that the row is
// read once where a maximum and then the sums read it twice; the threads'
// pairs are then merged in shared memory. Threads read 16 contiguous bytes
// at a time where the rows are 16-byte aligned (8 bf16 or f16, or 4 f32
// logits), four such loads at once, one logit at a time otherwise and for
// the row's tail.
//
//===----------------------------------------------------------------------===//

#include "KernelModules.h"

// test/unit/SoftmaxStatsKernelsTest.cpp compiles these kernels for the CPU,
// with types and built-ins of its own.
#ifndef LOOM_EMULATE_CUDA
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace {
constexpr int kThreads = loom::kSoftmaxStatsThreads;

/// The largest value seen, and the sum of exp(x - max) over the values.
struct Stats {
  float max, sum;
};

__device__ __forceinline__ void add(Stats &s, float x) {
  if (x > s.max) {
    // exp(-inf) is 0: the first value starts the sum at 1.
    s.sum = s.sum * expf(s.max - x) + 1.0f;
    s.max = x;
  } else if (s.max != -INFINITY) {
    // Not before a value above -inf: exp(-inf - -inf) would be NaN where
    // the row's sum has 0 for this term.
    s.sum += expf(x - s.max);
  }
}

__device__ __forceinline__ Stats merge(Stats a, Stats b) {
  float m = fmaxf(a.max, b.max);
  // Two threads that saw no value (a row shorter than the block).
  if (m == -INFINITY)
    return {m, a.sum + b.sum};
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ float widen(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ void rowStats(const T *logits, long long columns,
                                         long long classes, int vectorized,
                                         float *max, float *sumExp) {
  __shared__ float maxes[kThreads], sums[kThreads];
  const T *row = logits + static_cast<long long>(blockIdx.x) * columns;
  int self = threadIdx.x;
  Stats s{-INFINITY, 0.0f};
  long long done = 0;
  if (vectorized) {
    constexpr int kLanes = 16 / sizeof(T);
    long long vectors = classes / kLanes;
    const uint4 *packed = reinterpret_cast<const uint4 *>(row);
    long long i = self;
    // kGroup vectors a thread at once, a block's width apart: their loads
    // in flight together, then one maximum and one rescale for all their
    // values, whose exponentials do not wait on each other. One vector at
    // a time, each value's update waiting on the last, a GPT-2 124M step's
    // logits took 3.1 ms on an H200, a latency-bound 2.1 TB/s.
    constexpr int kGroup = 4;
    for (; i + (kGroup - 1) * kThreads < vectors; i += kGroup * kThreads) {
      uint4 bits[kGroup];
#pragma unroll
      for (int g = 0; g < kGroup; ++g)
        bits[g] = packed[i + g * kThreads];
      float x[kGroup * kLanes];
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        T lanes[kLanes];
        memcpy(lanes, &bits[g], sizeof(bits[g]));
#pragma unroll
        for (int k = 0; k < kLanes; ++k)
          x[g * kLanes + k] = widen(lanes[k]);
      }
      float m = s.max;
#pragma unroll
      for (int k = 0; k < kGroup * kLanes; ++k)
        m = fmaxf(m, x[k]);
      // Every value -inf so far: nothing to add, and exp(-inf - -inf)
      // would be NaN.
      if (m == -INFINITY)
        continue;
      float sum = s.sum * expf(s.max - m);
#pragma unroll
      for (int k = 0; k < kGroup * kLanes; ++k)
        sum += expf(x[k] - m);
      s = {m, sum};
    }
    for (; i < vectors; i += kThreads) {
      uint4 bits = packed[i];
      T lanes[kLanes];
      memcpy(lanes, &bits, sizeof(bits));
      for (int k = 0; k < kLanes; ++k)
        add(s, widen(lanes[k]));
    }
    done = vectors * kLanes;
  }
  for (long long c = done + self; c < classes; c += kThreads)
    add(s, widen(row[c]));
  maxes[self] = s.max;
  sums[self] = s.sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (self < half) {
      Stats m = merge({maxes[self], sums[self]},
                      {maxes[self + half], sums[self + half]});
      maxes[self] = m.max;
      sums[self] = m.sum;
    }
    __syncthreads();
  }
  if (self == 0) {
    max[blockIdx.x] = maxes[0];
    sumExp[blockIdx.x] = sums[0];
  }
}
} // namespace

// A kernel per storage type of the logits.
#define LOOM_SOFTMAX_STATS(NAME, TYPE)                                         \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      loom_softmax_stats_##NAME(const TYPE *logits, long long columns,         \
                                long long classes, int vectorized, float *max, \
                                float *sumExp) {                               \
    rowStats(logits, columns, classes, vectorized, max, sumExp);               \
  }
LOOM_SOFTMAX_STATS(f32, float)
LOOM_SOFTMAX_STATS(bf16, __nv_bfloat16)
LOOM_SOFTMAX_STATS(f16, __half)
