//===- ScatterRows.cu - loom_rt_scatter_add_rows on the GPU ---------------===//
//
// The token table's gradient, as a counting sort of the tokens by row and a
// sum per (row, column), with no atomics: each element's additions happen
// in token order, as the CPU's loops make them, so that f32 results are
// the CPU's bit for bit and the same on every run. Where a thread per
// column that walks every token takes time that grows with the tokens
// (9.8 ms of an H100's GPT-2 step at 64 x 1,024), these kernels read each
// token's gradient once.
//
// The sort, for n indices into R rows in chunks of LOOM_SCATTER_CHUNK:
//   rank:    a block per chunk ranks each index among its chunk's indices
//            of its row, and counts them: counts[chunk][row];
//   offsets: a thread per row turns its counts into where each chunk's
//            indices of the row start among the row's, and sums them;
//   scan:    one block turns the rows' sums into where each row starts;
//   place:   a thread per index writes it where its row, chunk and rank
//            say: the indices sorted by row, each row's in index order.
// Then add: a thread per (row, column) adds the row's updates in order.
//
// The scratch (loom_scatter_add_rows_scratch, abi.h), in int32s: counts
// [chunks][R], rank [n], order [n], begin [R + 1] (ScatterRowsPlan.h).
//
//===----------------------------------------------------------------------===//

#include "ScatterRowsPlan.h"

// test/unit/ScatterRowsKernelsTest.cpp compiles these kernels for the CPU,
// with types and built-ins of its own.
#ifndef LOOM_EMULATE_CUDA
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace {
constexpr int kChunk = LOOM_SCATTER_CHUNK;
constexpr int kThreads = loom::kScatterThreads;
constexpr int kScanThreads = loom::kScatterScanThreads;

/// The row index `i` names, or -1 outside [rowStart, rowStart + rows).
__device__ __forceinline__ int rowOf(const int *indices, int i,
                                     long long rowStart, int rows) {
  long long row = static_cast<long long>(indices[i]) - rowStart;
  return row >= 0 && row < rows ? static_cast<int>(row) : -1;
}
} // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    loom_scatter_rank(const int *indices, int n, long long rowStart, int rows,
                      int *counts, int *rank) {
  __shared__ int chunk[kChunk];
  int first = blockIdx.x * kChunk;
  int size = min(kChunk, n - first);
  for (int i = threadIdx.x; i < size; i += kThreads)
    chunk[i] = rowOf(indices, first + i, rowStart, rows);
  int *mine = counts + static_cast<long long>(blockIdx.x) * rows;
  for (int row = threadIdx.x; row < rows; row += kThreads)
    mine[row] = 0;
  // The zeros before any count: a block's writes before the barrier are
  // seen by its threads after it.
  __syncthreads();
  for (int i = threadIdx.x; i < size; i += kThreads) {
    int row = chunk[i];
    if (row < 0)
      continue;
    // The lanes of a warp read the same element at once: a broadcast.
    int before = 0;
    for (int j = 0; j < i; ++j)
      before += chunk[j] == row;
    bool last = true;
    for (int j = i + 1; j < size && last; ++j)
      last = chunk[j] != row;
    rank[first + i] = before;
    if (last)
      mine[row] = before + 1;
  }
}

extern "C" __global__ void __launch_bounds__(kThreads)
    loom_scatter_offsets(int *counts, int chunks, int rows, int *begin) {
  int row = blockIdx.x * kThreads + threadIdx.x;
  if (row >= rows)
    return;
  // Neighbouring threads read neighbouring rows of each chunk's counts.
  int sum = 0;
  for (int c = 0; c < chunks; ++c) {
    int *count = counts + static_cast<long long>(c) * rows + row;
    int here = *count;
    *count = sum;
    sum += here;
  }
  begin[row] = sum;
}

extern "C" __global__ void __launch_bounds__(kScanThreads)
    loom_scatter_scan(int rows, int *begin) {
  __shared__ int sums[kScanThreads];
  int per = (rows + kScanThreads - 1) / kScanThreads;
  int from = min(rows, static_cast<int>(threadIdx.x) * per);
  int to = min(rows, from + per);
  int own = 0;
  for (int row = from; row < to; ++row)
    own += begin[row];
  sums[threadIdx.x] = own;
  __syncthreads();
  int self = threadIdx.x;
  for (int step = 1; step < kScanThreads; step *= 2) {
    int add = self >= step ? sums[self - step] : 0;
    __syncthreads();
    sums[threadIdx.x] += add;
    __syncthreads();
  }
  int running = sums[threadIdx.x] - own;
  for (int row = from; row < to; ++row) {
    int here = begin[row];
    begin[row] = running;
    running += here;
  }
  if (threadIdx.x == kScanThreads - 1)
    begin[rows] = sums[kScanThreads - 1];
}

extern "C" __global__ void __launch_bounds__(kThreads)
    loom_scatter_place(const int *indices, int n, long long rowStart, int rows,
                       const int *counts, const int *rank, const int *begin,
                       int *order) {
  int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= n)
    return;
  int row = rowOf(indices, i, rowStart, rows);
  if (row < 0)
    return;
  long long chunk = i / kChunk;
  order[begin[row] + counts[chunk * rows + row] + rank[i]] = i;
}

namespace {
__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ float widen(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ void addRow(const T *updates, int columns,
                                       const int *begin, const int *order,
                                       float *out) {
  int row = blockIdx.x;
  int column = blockIdx.y * kThreads + threadIdx.x;
  int from = begin[row], to = begin[row + 1];
  if (from == to || column >= columns)
    return;
  float *at = out + static_cast<long long>(row) * columns + column;
  float sum = *at;
  // The index is the same for the whole block (a broadcast); its row's
  // columns are neighbouring threads'.
  for (int k = from; k < to; ++k)
    sum += widen(updates[static_cast<long long>(order[k]) * columns + column]);
  *at = sum;
}
} // namespace

// A kernel per storage type of the updates.
#define LOOM_SCATTER_ADD(NAME, TYPE)                                           \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      loom_scatter_add_##NAME(const TYPE *updates, int columns,                \
                              const int *begin, const int *order,              \
                              float *out) {                                    \
    addRow(updates, columns, begin, order, out);                               \
  }
LOOM_SCATTER_ADD(f32, float)
LOOM_SCATTER_ADD(bf16, __nv_bfloat16)
LOOM_SCATTER_ADD(f16, __half)
