//===- AttentionMma.cu - Fused causal attention on the tensor cores -------===//
//
// The GPU's kernels of loom_rt_attention and loom_rt_attention_grad for
// tensors stored in bf16 or f16: FlashAttention-2 on the tensor cores,
// with the warp-level `mma.sync` m16n8k16 of sm_80 and later, f32
// accumulators, and the softmax's statistics in f32.
//
// A block of 4 warps takes 64 queries (or keys) of one (batch, head) pair,
// 16 rows a warp, and walks the keys and values (or queries) 64 at a time
// through shared memory. A warp keeps its rows as matrix fragments in its
// registers; each tile of scores is a 16 x 64 product that never leaves
// them, and its probabilities, rounded to the storage type, are the left
// operand of the next product (the accumulator's layout is the operand's).
// No [T, T] matrix is written to memory.
//
//   forward: S = Q K^T, an online softmax, O += P V;
//   stats: the same without the values, each query's log-sum-exp for the
//     backward pass;
//   key_grad: for the block's keys, over the queries that see them,
//     P^T = exp(K Q^T - lse), dP^T = V dO^T, dS^T = P^T (dP^T - delta),
//     dV += P^T dO and dK += dS^T Q;
//   query_grad: for the block's queries, over the keys they see,
//     dS = P (dO V^T - delta) and dQ += dS K.
//
// Heads smaller than the bound (32 or 64) are padded with zeros in shared
// memory, which leaves every product unchanged. Rows come in 16-byte
// loads when the head is a multiple of 8 channels and the tensor is
// aligned to 16 bytes, else element by element; the next tile's loads are
// issued into registers before the current tile is computed on.
//
//===----------------------------------------------------------------------===//

#include "AttentionCommon.cuh"

#include <cstdint>
#include <type_traits>

namespace {
constexpr int kWarps = kRows / 16, kThreads = 32 * kWarps;
/// Keys (or queries) per tile of scores: 8 fragments of 8 columns.
constexpr int kTile = 64, kFragments = kTile / 8;
/// Pads each shared row by 16 bytes, so that the 8 rows a fragment reads
/// start in different banks.
constexpr int kPad = 8;
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

/// A tile of rows as their storage type's bits.
template <int MaxD> using Tile = uint16_t[kRows][MaxD + kPad];

/// The lane's place in the fragments: its group of 4 lanes (a row) and its
/// place in the group (a pair of columns).
struct Lane {
  int warp = threadIdx.x / 32, group = threadIdx.x % 32 / 4,
      pair = threadIdx.x % 4;
};

__device__ __forceinline__ uint32_t word(const uint16_t *at) {
  return *reinterpret_cast<const uint32_t *>(at);
}
__device__ __forceinline__ uint32_t word(uint16_t low, uint16_t high) {
  return low | static_cast<uint32_t>(high) << 16;
}

/// Two f32 values rounded to T, the first in the low half.
template <typename T> __device__ __forceinline__ uint32_t pack(float, float);
template <>
__device__ __forceinline__ uint32_t pack<__nv_bfloat16>(float low, float high) {
  __nv_bfloat162 v = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<uint32_t *>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack<__half>(float low, float high) {
  __half2 v = __floats2half2_rn(low, high);
  return *reinterpret_cast<uint32_t *>(&v);
}

/// c += a b for a 16 x 16 fragment a (row-major) and a 16 x 8 fragment b
/// (column-major), in f32.
template <typename T>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4],
                                    uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Whether rows of the pair's tensors can come 16 bytes at a time.
__device__ bool wholeVectors(const Pair &p, const void *base) {
  return p.headDim % 8 == 0 && reinterpret_cast<uintptr_t>(base) % 16 == 0;
}

/// Rows [from, from + kRows) of a [seq, headDim] matrix, `stride`
/// elements apart from `base`, on their way to shared memory: each
/// thread's share in registers, zeros past the sequence and past the head
/// size. A loop fetches the next tile before it computes on the current
/// one, so that the loads are in flight meanwhile.
template <int MaxD> struct Staged {
  static constexpr int kChunks = MaxD / 8,
                       kPerThread = kRows * kChunks / kThreads;
  static_assert(kRows * kChunks % kThreads == 0, "whole chunks per thread");
  uint4 part[kPerThread];

  /// The `i`th of the thread's chunks of 8 elements: its row and column.
  static __device__ int row(int i) {
    return (threadIdx.x + i * kThreads) / kChunks;
  }
  static __device__ int column(int i) {
    return (threadIdx.x + i * kThreads) % kChunks * 8;
  }

  /// The chunk of row `row`, from column `column`.
  static __device__ uint4 chunk(const uint16_t *base, long long stride, int row,
                                int column, const Pair &p, bool vectors) {
    if (row >= p.seq || column >= p.headDim)
      return make_uint4(0, 0, 0, 0);
    const uint16_t *src = base + row * stride + column;
    if (vectors)
      return *reinterpret_cast<const uint4 *>(src);
    uint16_t element[8];
#pragma unroll
    for (int k = 0; k < 8; ++k)
      element[k] = column + k < p.headDim ? src[k] : 0;
    return make_uint4(
        word(element[0], element[1]), word(element[2], element[3]),
        word(element[4], element[5]), word(element[6], element[7]));
  }

  __device__ void fetch(const uint16_t *base, long long stride, int from,
                        const Pair &p, bool vectors) {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i)
      part[i] = chunk(base, stride, from + row(i), column(i), p, vectors);
  }

  __device__ void store(Tile<MaxD> &tile) const {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i)
      *reinterpret_cast<uint4 *>(&tile[row(i)][column(i)]) = part[i];
  }
};

/// Loads a tile at once, each chunk stored as it comes, which keeps no
/// registers for the tile.
template <int MaxD>
__device__ void loadTile(Tile<MaxD> &tile, const uint16_t *base,
                         long long stride, int from, const Pair &p,
                         bool vectors) {
  using S = Staged<MaxD>;
#pragma unroll
  for (int i = 0; i < S::kPerThread; ++i)
    *reinterpret_cast<uint4 *>(&tile[S::row(i)][S::column(i)]) =
        S::chunk(base, stride, from + S::row(i), S::column(i), p, vectors);
}

/// The warp's 16 rows of `tile` from `row0` as left operands, one per 16
/// channels.
template <int MaxD>
__device__ void loadRows(uint32_t (&a)[MaxD / 16][4], const Tile<MaxD> &tile,
                         int row0, const Lane &l) {
#pragma unroll
  for (int k = 0; k < MaxD / 16; ++k) {
    const uint16_t *top = &tile[row0 + l.group][16 * k + 2 * l.pair];
    const uint16_t *bottom = &tile[row0 + l.group + 8][16 * k + 2 * l.pair];
    a[k][0] = word(top);
    a[k][1] = word(bottom);
    a[k][2] = word(top + 8);
    a[k][3] = word(bottom + 8);
  }
}

/// s = a tile^T: the warp's rows against the tile's 64 rows, a 16 x 64
/// block of scores (fragment j holds columns 8j..8j+7).
template <typename T, int MaxD>
__device__ void scores(float (&s)[kFragments][4],
                       const uint32_t (&a)[MaxD / 16][4],
                       const Tile<MaxD> &tile, const Lane &l) {
#pragma unroll
  for (int j = 0; j < kFragments; ++j) {
    s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
    for (int k = 0; k < MaxD / 16; ++k) {
      const uint16_t *col = &tile[8 * j + l.group][16 * k + 2 * l.pair];
      mma<T>(s[j], a[k], word(col), word(col + 8));
    }
  }
}

/// acc += p tile: a 16 x 64 block of f32 values, rounded to T, times the
/// tile's 64 rows.
template <typename T, int MaxD>
__device__ void accumulate(float (&acc)[MaxD / 8][4],
                           const float (&p)[kFragments][4],
                           const Tile<MaxD> &tile, const Lane &l) {
#pragma unroll
  for (int k = 0; k < kTile / 16; ++k) {
    // The accumulator's fragments 2k and 2k + 1 are the operand's 16
    // columns k.
    uint32_t a[4] = {pack<T>(p[2 * k][0], p[2 * k][1]),
                     pack<T>(p[2 * k][2], p[2 * k][3]),
                     pack<T>(p[2 * k + 1][0], p[2 * k + 1][1]),
                     pack<T>(p[2 * k + 1][2], p[2 * k + 1][3])};
    int r = 16 * k + 2 * l.pair;
#pragma unroll
    for (int j = 0; j < MaxD / 8; ++j) {
      int c = 8 * j + l.group;
      mma<T>(acc[j], a, word(tile[r][c], tile[r + 1][c]),
             word(tile[r + 8][c], tile[r + 9][c]));
    }
  }
}

/// Visits each element of a 16 x 64 block of scores with its row (0..15)
/// and column (0..63) in the block.
template <typename F>
__device__ __forceinline__ void forEach(float (&s)[kFragments][4],
                                        const Lane &l, F f) {
#pragma unroll
  for (int j = 0; j < kFragments; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      f(s[j][e], l.group + 8 * (e / 2), 8 * j + 2 * l.pair + e % 2);
}

/// The sum (or maximum) over the 4 lanes that hold a row.
__device__ __forceinline__ float rowSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float rowMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

/// Stores the warp's 16 x MaxD block `acc` times `scale` (one per half of
/// the rows) as rows `row0`.. of a [seq, headDim] matrix.
template <typename T, int MaxD>
__device__ void storeRows(const float (&acc)[MaxD / 8][4], T *base,
                          long long stride, int row0, const float (&scale)[2],
                          const Pair &p, const Lane &l) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    int row = row0 + l.group + 8 * half;
    if (row >= p.seq)
      continue;
#pragma unroll
    for (int j = 0; j < MaxD / 8; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        int d = 8 * j + 2 * l.pair + c;
        if (d < p.headDim)
          base[row * stride + d] =
              narrow<T>(acc[j][2 * half + c] * scale[half]);
      }
  }
}

template <typename T> __device__ const uint16_t *bits(const T *x) {
  return reinterpret_cast<const uint16_t *>(x);
}

/// The output (with `Output`) and each query's log-sum-exp. Exponentials
/// are base 2, on scores scaled by log2(e).
template <typename T, int MaxD, bool Output>
__device__ void forward(const T *qkv, T *out, float *lse, int seq, int heads,
                        int headDim, float scale) {
  Pair p(seq, heads, headDim);
  Lane l;
  __shared__ __align__(16) Tile<MaxD> queries, keys;
  // Without the output, no values.
  __shared__ __align__(16) std::conditional_t<Output, Tile<MaxD>, uint16_t[1]>
      values;
  bool vectors = wholeVectors(p, qkv);
  int first = blockIdx.x * kRows, row0 = 16 * l.warp;
  loadTile<MaxD>(queries, bits(qkv) + p.qkv[0], p.qkvStride, first, p, vectors);
  __syncthreads();
  uint32_t q[MaxD / 16][4];
  loadRows<MaxD>(q, queries, row0, l);
  float o[MaxD / 8][4] = {};
  float max[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};
  float scale2 = scale * kLog2e;
  int end = min(first + kRows, seq);
  Staged<MaxD> nextKeys, nextValues;
  auto fetch = [&](int j0) {
    nextKeys.fetch(bits(qkv) + p.qkv[1], p.qkvStride, j0, p, vectors);
    if constexpr (Output)
      nextValues.fetch(bits(qkv) + p.qkv[2], p.qkvStride, j0, p, vectors);
  };
  fetch(0);
  for (int j0 = 0; j0 < end; j0 += kTile) {
    __syncthreads();
    nextKeys.store(keys);
    if constexpr (Output)
      nextValues.store(values);
    __syncthreads();
    if (j0 + kTile < end)
      fetch(j0 + kTile);
    float s[kFragments][4];
    scores<T, MaxD>(s, q, keys, l);
    // Each row sees key j0 at least, so its maximum is finite.
    float tileMax[2] = {max[0], max[1]};
    forEach(s, l, [&](float &x, int r, int c) {
      int i = first + row0 + r, j = j0 + c;
      x = j <= i && j < seq ? x * scale2 : -INFINITY;
      tileMax[r / 8] = fmaxf(tileMax[r / 8], x);
    });
    float rescale[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = rowMax(tileMax[h]);
      rescale[h] = exp2f(max[h] - m);
      sum[h] *= rescale[h];
      max[h] = m;
    }
    forEach(s, l, [&](float &x, int r, int) {
      x = exp2f(x - max[r / 8]);
      sum[r / 8] += x;
    });
    if constexpr (Output) {
#pragma unroll
      for (int j = 0; j < MaxD / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          o[j][e] *= rescale[e / 2];
      accumulate<T, MaxD>(o, s, values, l);
    }
  }
  float total[2] = {rowSum(sum[0]), rowSum(sum[1])};
  if constexpr (Output) {
    float inverse[2] = {1.0f / total[0], 1.0f / total[1]};
    storeRows<T, MaxD>(o, out + p.out, p.outStride, first + row0, inverse, p,
                       l);
  }
  if (l.pair == 0)
    for (int h = 0; h < 2; ++h) {
      int i = first + row0 + l.group + 8 * h;
      if (i < seq)
        lse[p.rows + i] = (max[h] + log2f(total[h])) * kLn2;
    }
}

template <typename T, int MaxD>
__device__ void keyGrad(const T *qkv, const float *lse, const T *dout,
                        const float *delta, T *dqkv, int seq, int heads,
                        int headDim, float scale) {
  Pair p(seq, heads, headDim);
  Lane l;
  __shared__ __align__(16) Tile<MaxD> keys, values, queries, grads;
  __shared__ float rowLse[kTile], rowDelta[kTile];
  bool vectors = wholeVectors(p, qkv) && wholeVectors(p, dout);
  int first = blockIdx.x * kRows, row0 = 16 * l.warp;
  loadTile<MaxD>(keys, bits(qkv) + p.qkv[1], p.qkvStride, first, p, vectors);
  loadTile<MaxD>(values, bits(qkv) + p.qkv[2], p.qkvStride, first, p, vectors);
  __syncthreads();
  uint32_t k[MaxD / 16][4], v[MaxD / 16][4];
  loadRows<MaxD>(k, keys, row0, l);
  loadRows<MaxD>(v, values, row0, l);
  float dk[MaxD / 8][4] = {}, dv[MaxD / 8][4] = {};
  float scale2 = scale * kLog2e;
  // The queries come tile by tile without a prefetch: the gradients'
  // accumulators leave no registers for one within three blocks a
  // multiprocessor.
  for (int i0 = first; i0 < seq; i0 += kTile) {
    __syncthreads();
    loadTile<MaxD>(queries, bits(qkv) + p.qkv[0], p.qkvStride, i0, p, vectors);
    loadTile<MaxD>(grads, bits(dout) + p.out, p.outStride, i0, p, vectors);
    for (int r = threadIdx.x; r < kTile; r += kThreads) {
      bool in = i0 + r < seq;
      rowLse[r] = in ? lse[p.rows + i0 + r] * kLog2e : 0.0f;
      rowDelta[r] = in ? delta[p.rows + i0 + r] : 0.0f;
    }
    __syncthreads();
    // Transposed: rows are the warp's keys, columns the tile's queries.
    float probs[kFragments][4], dprobs[kFragments][4];
    scores<T, MaxD>(probs, k, queries, l);
    scores<T, MaxD>(dprobs, v, grads, l);
    forEach(probs, l, [&](float &x, int r, int c) {
      int j = first + row0 + r, i = i0 + c;
      x = i >= j && i < seq ? exp2f(x * scale2 - rowLse[c]) : 0.0f;
    });
#pragma unroll
    for (int f = 0; f < kFragments; ++f)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        dprobs[f][e] =
            probs[f][e] * (dprobs[f][e] - rowDelta[8 * f + 2 * l.pair + e % 2]);
    accumulate<T, MaxD>(dv, probs, grads, l);
    accumulate<T, MaxD>(dk, dprobs, queries, l);
  }
  float keyScale[2] = {scale, scale}, one[2] = {1.0f, 1.0f};
  storeRows<T, MaxD>(dk, dqkv + p.qkv[1], p.qkvStride, first + row0, keyScale,
                     p, l);
  storeRows<T, MaxD>(dv, dqkv + p.qkv[2], p.qkvStride, first + row0, one, p, l);
}

template <typename T, int MaxD>
__device__ void queryGrad(const T *qkv, const float *lse, const T *dout,
                          const float *delta, T *dqkv, int seq, int heads,
                          int headDim, float scale) {
  Pair p(seq, heads, headDim);
  Lane l;
  __shared__ __align__(16) Tile<MaxD> queries, grads, keys, values;
  bool vectors = wholeVectors(p, qkv) && wholeVectors(p, dout);
  int first = blockIdx.x * kRows, row0 = 16 * l.warp;
  loadTile<MaxD>(queries, bits(qkv) + p.qkv[0], p.qkvStride, first, p, vectors);
  loadTile<MaxD>(grads, bits(dout) + p.out, p.outStride, first, p, vectors);
  __syncthreads();
  uint32_t q[MaxD / 16][4], g[MaxD / 16][4];
  loadRows<MaxD>(q, queries, row0, l);
  loadRows<MaxD>(g, grads, row0, l);
  float rowLse[2], rowDelta[2];
  for (int h = 0; h < 2; ++h) {
    int i = first + row0 + l.group + 8 * h;
    rowLse[h] = i < seq ? lse[p.rows + i] * kLog2e : 0.0f;
    rowDelta[h] = i < seq ? delta[p.rows + i] : 0.0f;
  }
  float dq[MaxD / 8][4] = {};
  float scale2 = scale * kLog2e;
  int end = min(first + kRows, seq);
  Staged<MaxD> nextKeys, nextValues;
  auto fetch = [&](int j0) {
    nextKeys.fetch(bits(qkv) + p.qkv[1], p.qkvStride, j0, p, vectors);
    nextValues.fetch(bits(qkv) + p.qkv[2], p.qkvStride, j0, p, vectors);
  };
  fetch(0);
  for (int j0 = 0; j0 < end; j0 += kTile) {
    __syncthreads();
    nextKeys.store(keys);
    nextValues.store(values);
    __syncthreads();
    if (j0 + kTile < end)
      fetch(j0 + kTile);
    float dprobs[kFragments][4], dscores[kFragments][4];
    scores<T, MaxD>(dscores, q, keys, l);
    scores<T, MaxD>(dprobs, g, values, l);
#pragma unroll
    for (int f = 0; f < kFragments; ++f)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int h = e / 2, i = first + row0 + l.group + 8 * h,
            j = j0 + 8 * f + 2 * l.pair + e % 2;
        float prob = j <= i && i < seq
                         ? exp2f(dscores[f][e] * scale2 - rowLse[h])
                         : 0.0f;
        dscores[f][e] = prob * (dprobs[f][e] - rowDelta[h]);
      }
    accumulate<T, MaxD>(dq, dscores, keys, l);
  }
  float queryScale[2] = {scale, scale};
  storeRows<T, MaxD>(dq, dqkv + p.qkv[0], p.qkvStride, first + row0, queryScale,
                     p, l);
}
} // namespace

// Three blocks a multiprocessor (at most 170 registers a thread): a block
// waits on its loads and barriers, and the others compute meanwhile.
LOOM_ATTENTION_MODULE(LOOM_ATTENTION_TYPE, LOOM_ATTENTION_NAME,
                      LOOM_ATTENTION_HEAD, kThreads, 3)
