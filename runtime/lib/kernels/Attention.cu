//===- Attention.cu - Fused causal attention: the GPU's kernels -----------===//
//
// The kernels of loom_rt_attention and loom_rt_attention_grad on a GPU,
// compiled to PTX when the runtime is built and loaded by its CUDA backend
// (Cuda.cpp) at the first call. They are the FlashAttention algorithm:
// no [T, T] matrix is written to memory. A block of 64 threads takes 64
// queries (or keys) of one (batch, head) pair, one row per thread, and
// reads the keys and values (or queries) 64 at a time through shared
// memory, so that each thread's row stays in its registers; the softmax
// is online (a running maximum rescales the sum and the output).
//
// These are the kernels of tensors stored in f32: f32 arithmetic on the
// GPU's CUDA cores, the same sums as the CPU's kernels up to their order,
// so that an f32 step matches the CPU's (tensor cores would round the
// products to tf32). Tensors stored in bf16 or f16 take AttentionMma.cu's.
//
// Kernels, for a bound on the head size (32 or 64; a smaller head is
// padded with zeros), each bound a module of its own. A larger bound would
// not fit a thread's rows in its registers, nor the tiles in the 48 KiB of
// shared memory a kernel may declare:
//   loom_attention_forward_*: the output and each query's log-sum-exp,
//     which the backward pass reads;
//   loom_attention_delta_*: each query's dot product of the output and its
//     gradient;
//   loom_attention_key_grad_*: the gradients of the keys and values, a
//     thread per key, over the queries that see it;
//   loom_attention_query_grad_*: the gradients of the queries, a thread per
//     query, over the keys it sees.
//
//===----------------------------------------------------------------------===//

#include "AttentionCommon.cuh"

namespace {
/// Loads rows [from, from + Rows) of a [seq, headDim] matrix, `stride`
/// elements apart from `base`, into `tile` as f32, zeros past the end and
/// past the head size; each thread loads every kRows-th element so that
/// neighbouring threads read neighbouring elements.
template <typename T, int MaxD, int Pad, int Rows = kRows>
__device__ void loadTile(float (*tile)[MaxD + Pad], const T *base,
                         long long stride, int from, const Pair &p) {
  for (int e = threadIdx.x; e < Rows * MaxD; e += kRows) {
    int r = e / MaxD, d = e % MaxD, row = from + r;
    tile[r][d] =
        row < p.seq && d < p.headDim ? widen(base[row * stride + d]) : 0.0f;
  }
}

/// Row `row` of a [seq, headDim] matrix into `x`, times `scale`; zeros
/// past the head size.
template <typename T, int MaxD>
__device__ void loadRow(float (&x)[MaxD], const T *base, long long stride,
                        int row, const Pair &p, float scale = 1.0f) {
#pragma unroll
  for (int d = 0; d < MaxD; ++d)
    x[d] = d < p.headDim ? widen(base[row * stride + d]) * scale : 0.0f;
}

template <typename T, int MaxD>
__device__ void storeRow(const float (&x)[MaxD], T *base, long long stride,
                         int row, const Pair &p, float scale = 1.0f) {
#pragma unroll
  for (int d = 0; d < MaxD; ++d)
    if (d < p.headDim)
      base[row * stride + d] = narrow<T>(x[d] * scale);
}

template <int MaxD, int Pad>
__device__ __forceinline__ float dot(const float (&x)[MaxD],
                                     const float (&y)[MaxD + Pad]) {
  float sum = 0.0f;
#pragma unroll
  for (int d = 0; d < MaxD; ++d)
    sum += x[d] * y[d];
  return sum;
}

/// The output and each query's log-sum-exp.
template <typename T, int MaxD>
__device__ void forward(const T *qkv, T *out, float *lse, int seq, int heads,
                        int groups, int headDim, float scale) {
  Pair p(seq, heads, groups, headDim);
  __shared__ float keys[kRows][MaxD], values[kRows][MaxD];
  int first = blockIdx.x * kRows, i = first + threadIdx.x;
  bool active = i < seq;
  float q[MaxD], o[MaxD];
  if (active)
    loadRow(q, qkv + p.qkv[0], p.qkvStride, i, p, scale);
#pragma unroll
  for (int d = 0; d < MaxD; ++d)
    o[d] = 0.0f;
  float max = -INFINITY, sum = 0.0f;
  int end = min(first + kRows, seq);
  for (int j0 = 0; j0 < end; j0 += kRows) {
    loadTile<T, MaxD, 0>(keys, qkv + p.qkv[1], p.qkvStride, j0, p);
    loadTile<T, MaxD, 0>(values, qkv + p.qkv[2], p.qkvStride, j0, p);
    __syncthreads();
    int last = active ? min(i - j0, kRows - 1) : -1;
    for (int r = 0; r <= last; ++r) {
      float s = dot<MaxD, 0>(q, keys[r]);
      if (s > max) {
        float rescale = expf(max - s);
        sum *= rescale;
#pragma unroll
        for (int d = 0; d < MaxD; ++d)
          o[d] *= rescale;
        max = s;
      }
      float e = expf(s - max);
      sum += e;
#pragma unroll
      for (int d = 0; d < MaxD; ++d)
        o[d] += e * values[r][d];
    }
    __syncthreads();
  }
  if (!active)
    return;
  storeRow(o, out + p.out, p.outStride, i, p, 1.0f / sum);
  lse[p.rows + i] = max + logf(sum);
}

/// The gradients of blockIdx.y's key and value heads, summed over the
/// query heads that read them.
template <typename T, int MaxD>
__device__ void keyGrad(const T *qkv, const float *lse, const T *dout,
                        const float *delta, float *, T *dqkv, int seq,
                        int heads, int groups, int headDim, float scale) {
  Pair p(seq, heads, groups, headDim);
  int keyHead = blockIdx.y;
  p.select(p.queryHead(keyHead, 0));
  // The block's own values, a row per thread: padded by one so that the
  // threads' rows fall in different banks. The queries come kQueries at a
  // time, which keeps the block's shared memory under the 48 KiB a kernel
  // may declare.
  constexpr int kQueries = kRows / 2;
  __shared__ float queries[kQueries][MaxD], grads[kQueries][MaxD];
  __shared__ float values[kRows][MaxD + 1];
  __shared__ float rowLse[kQueries], rowDelta[kQueries];
  int first = blockIdx.x * kRows, j = first + threadIdx.x;
  bool active = j < seq;
  loadTile<T, MaxD, 1>(values, qkv + p.qkv[2], p.qkvStride, first, p);
  float k[MaxD], dk[MaxD], dv[MaxD];
  if (active)
    loadRow(k, qkv + p.qkv[1], p.qkvStride, j, p, scale);
#pragma unroll
  for (int d = 0; d < MaxD; ++d)
    dk[d] = dv[d] = 0.0f;
  const float(&v)[MaxD + 1] = values[threadIdx.x];
  for (int member = 0; member < p.perGroup; ++member) {
    p.select(p.queryHead(keyHead, member));
    for (int i0 = first; i0 < seq; i0 += kQueries) {
      loadTile<T, MaxD, 0, kQueries>(queries, qkv + p.qkv[0], p.qkvStride, i0,
                                     p);
      loadTile<T, MaxD, 0, kQueries>(grads, dout + p.out, p.outStride, i0, p);
      int i = i0 + threadIdx.x;
      if (threadIdx.x < kQueries) {
        rowLse[threadIdx.x] = i < seq ? lse[p.rows + i] : 0.0f;
        rowDelta[threadIdx.x] = i < seq ? delta[p.rows + i] : 0.0f;
      }
      __syncthreads();
      if (active) {
        int rows = min(kQueries, seq - i0);
        for (int r = max(j - i0, 0); r < rows; ++r) {
          float e = expf(dot<MaxD, 0>(k, queries[r]) - rowLse[r]);
          float dp = 0.0f;
#pragma unroll
          for (int d = 0; d < MaxD; ++d) {
            dv[d] += e * grads[r][d];
            dp += grads[r][d] * v[d];
          }
          float ds = e * (dp - rowDelta[r]);
#pragma unroll
          for (int d = 0; d < MaxD; ++d)
            dk[d] += ds * queries[r][d];
        }
      }
      __syncthreads();
    }
  }
  if (!active)
    return;
  storeRow(dk, dqkv + p.qkv[1], p.qkvStride, j, p, scale);
  storeRow(dv, dqkv + p.qkv[2], p.qkvStride, j, p);
}

template <typename T, int MaxD>
__device__ void queryGrad(const T *qkv, const float *lse, const T *dout,
                          const float *delta, float *, T *dqkv, int seq,
                          int heads, int groups, int headDim, float scale) {
  Pair p(seq, heads, groups, headDim);
  __shared__ float keys[kRows][MaxD], values[kRows][MaxD];
  int first = blockIdx.x * kRows, i = first + threadIdx.x;
  bool active = i < seq;
  float q[MaxD], g[MaxD], dq[MaxD];
  float rowLse = 0.0f, rowDelta = 0.0f;
  if (active) {
    loadRow(q, qkv + p.qkv[0], p.qkvStride, i, p, scale);
    loadRow(g, dout + p.out, p.outStride, i, p);
    rowLse = lse[p.rows + i];
    rowDelta = delta[p.rows + i];
  }
#pragma unroll
  for (int d = 0; d < MaxD; ++d)
    dq[d] = 0.0f;
  int end = min(first + kRows, seq);
  for (int j0 = 0; j0 < end; j0 += kRows) {
    loadTile<T, MaxD, 0>(keys, qkv + p.qkv[1], p.qkvStride, j0, p);
    loadTile<T, MaxD, 0>(values, qkv + p.qkv[2], p.qkvStride, j0, p);
    __syncthreads();
    int last = active ? min(i - j0, kRows - 1) : -1;
    for (int r = 0; r <= last; ++r) {
      float e = expf(dot<MaxD, 0>(q, keys[r]) - rowLse);
      float ds = e * (dot<MaxD, 0>(g, values[r]) - rowDelta);
#pragma unroll
      for (int d = 0; d < MaxD; ++d)
        dq[d] += ds * keys[r][d];
    }
    __syncthreads();
  }
  if (active)
    storeRow(dq, dqkv + p.qkv[0], p.qkvStride, i, p, scale);
}

/// Each query's dot product; the CUDA cores' kernels sum no query gradient.
template <typename T, int MaxD>
__device__ void gradDelta(const T *out, const T *dout, float *d, float *,
                          int seq, int heads, int groups, int headDim) {
  delta<T>(out, dout, d, seq, heads, groups, headDim);
}
} // namespace

LOOM_ATTENTION_MODULE(LOOM_ATTENTION_TYPE, LOOM_ATTENTION_NAME,
                      LOOM_ATTENTION_HEAD, kRows, 1, kRows, 1)
