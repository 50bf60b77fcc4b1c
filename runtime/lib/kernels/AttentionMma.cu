//===- AttentionMma.cu - Fused causal attention on the tensor cores -------===//
//
// The GPU's kernels of loom_rt_attention and loom_rt_attention_grad for
// tensors stored in bf16 or f16: FlashAttention-2 on the tensor cores,
// with the warp-level `mma.sync` m16n8k16 of sm_80 and later, f32
// accumulators, and the softmax's statistics in f32.
//
// A block of 4 warps takes 64 queries of one (batch, head) pair, 16 rows a
// warp, and walks the keys and values 64 at a time through shared memory;
// the key gradient's block of 8 warps takes 128 keys of one (batch,
// key/value head) pair and walks the queries of each query head that
// reads them 64 at a time. A warp keeps its rows as matrix fragments in its
// registers; each tile of scores is a 16 x 64 product that never leaves
// them, and its probabilities, rounded to the storage type, are the left
// operand of the next product (the accumulator's layout is the operand's).
// No [T, T] matrix is written to memory.
//
//   forward: S = Q K^T, an online softmax, O += P V, and each query's
//     log-sum-exp, which the backward pass reads;
//   delta: each query's dot product of O and dO, and zeros in the query
//     gradient's f32 sums;
//   key_grad: for the block's keys, over the queries that see them,
//     P^T = exp(K Q^T - lse), dP^T = V dO^T, dS^T = P^T (dP^T - delta),
//     dV += P^T dO, dK += dS^T Q, and dS K added to the query gradient's
//     sums (FlashAttention-2's backward pass: five products a tile);
//   query_grad: the query gradient from its sums, scaled, in the storage
//     type.
//
// Heads smaller than the bound (32 or 64) are padded with zeros in shared
// memory, which leaves every product unchanged. When the head is a
// multiple of 8 channels and the tensor is aligned to 16 bytes, rows come
// by 16-byte asynchronous copies (cp.async) into one of two buffers while
// the block computes on the other; else element by element, at once. The
// right operands go from shared memory to registers by ldmatrix.
//
//===----------------------------------------------------------------------===//

#include "AttentionCommon.cuh"
#include "KernelModules.h"
// test/unit/AttentionMmaKernelsTest.cpp brings the same primitives, on the
// CPU.
#ifndef LOOM_EMULATE_CUDA
#include "MmaPrimitives.cuh"
#endif

#include <cstdint>
#include <type_traits>

namespace {
constexpr int kWarps = kRows / 16, kThreads = 32 * kWarps;
/// The key gradient's blocks: 128 keys, 16 a warp. Each block adds its
/// share of every query's gradient to the f32 sums once per tile of
/// queries, so that the sums' atomic additions are halved against blocks
/// of 64 keys, and each tile of queries is read half as often.
constexpr int kKeyRows = loom::kAttentionMmaKeyRows, kKeyWarps = kKeyRows / 16,
              kKeyThreads = 32 * kKeyWarps;
/// Keys (or queries) per tile of scores: 8 fragments of 8 columns.
constexpr int kTile = 64, kFragments = kTile / 8;
/// Pads each shared row by 16 bytes, so that the 8 rows a fragment reads
/// start in different banks.
constexpr int kPad = 8;
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

/// A tile of rows as their storage type's bits.
template <int MaxD, int Rows = kRows> using Tile = uint16_t[Rows][MaxD + kPad];

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

/// Whether rows of the pair's tensors can come 16 bytes at a time.
__device__ bool wholeVectors(const Pair &p, const void *base) {
  return p.headDim % 8 == 0 && reinterpret_cast<uintptr_t>(base) % 16 == 0;
}

/// How a block's `Threads` threads share a tile of `Rows` rows: chunks of
/// 8 elements, the `i`th of a thread's in row row(i) from column(i).
template <int MaxD, int Rows = kRows, int Threads = kThreads> struct Chunks {
  static constexpr int kPerRow = MaxD / 8,
                       kPerThread = Rows * kPerRow / Threads;
  static_assert(Rows * kPerRow % Threads == 0, "whole chunks per thread");
  static __device__ int row(int i) {
    return (threadIdx.x + i * Threads) / kPerRow;
  }
  static __device__ int column(int i) {
    return (threadIdx.x + i * Threads) % kPerRow * 8;
  }
};

/// The chunk of 8 elements of row `row` from column `column`, zeros past
/// the sequence and past the head size.
__device__ uint4 chunk(const uint16_t *base, long long stride, int row,
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
  return make_uint4(word(element[0], element[1]), word(element[2], element[3]),
                    word(element[4], element[5]), word(element[6], element[7]));
}

/// Rows [from, from + Rows) of a [seq, headDim] matrix, `stride` elements
/// apart from `base`, into `tile` by a block of `Threads`: copied
/// asynchronously 16 bytes at a time when the rows allow it (`vectors`),
/// so that a loop computes on one tile while the next arrives, else loaded
/// element by element at once.
template <int MaxD, int Rows = kRows, int Threads = kThreads>
__device__ void copyTile(Tile<MaxD, Rows> &tile, const uint16_t *base,
                         long long stride, int from, const Pair &p,
                         bool vectors) {
  using C = Chunks<MaxD, Rows, Threads>;
#pragma unroll
  for (int i = 0; i < C::kPerThread; ++i) {
    int row = from + C::row(i), column = C::column(i);
    uint16_t *to = &tile[C::row(i)][column];
    if (vectors) {
      bool in = row < p.seq && column < p.headDim;
      copyAsync<16>(to, in ? base + row * stride + column : base, in);
    } else {
      *reinterpret_cast<uint4 *>(to) =
          chunk(base, stride, row, column, p, false);
    }
  }
}

/// The warp's 16 rows of `tile` from `row0` as left operands, one per 16
/// channels.
template <int MaxD, int Rows = kRows>
__device__ void loadRows(uint32_t (&a)[MaxD / 16][4],
                         const Tile<MaxD, Rows> &tile, int row0,
                         const Lane &l) {
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
                       const Tile<MaxD> &tile) {
  static_assert(MaxD % 32 == 0, "channels come 32 at a time");
  int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < kFragments; ++j) {
    s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
    for (int k = 0; k < MaxD / 16; k += 2) {
      // Rows 8j.. of the tile, channels 16k + 8 (lane / 8)..: the right
      // operands' halves for channels 16k.. and 16(k + 1)...
      uint32_t b[4];
      loadMatrices<false>(b, &tile[8 * j + lane % 8][16 * k + 8 * (lane / 8)]);
      mma<T>(s[j], a[k], b[0], b[1]);
      mma<T>(s[j], a[k + 1], b[2], b[3]);
    }
  }
}

/// acc += a tile[16k..16k + 15][dim0..dim0 + Dims - 1]: a 16 x 16 operand
/// a (mma's layout) times 16 rows of the tile from row 16k, `Dims` of
/// their channels from `dim0`.
template <typename T, int Width, int Dims, int Rows>
__device__ __forceinline__ void
accumulateRows(float (&acc)[Dims / 8][4], const uint32_t (&a)[4],
               const uint16_t (&tile)[Rows][Width], int k, int dim0 = 0) {
  static_assert(Dims % 16 == 0, "channels come 16 at a time");
  int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < Dims / 8; j += 2) {
    // Rows 16k + 8 (lane / 8 % 2).., channels dim0 + 8 (j + lane / 16)..,
    // transposed: the right operands of channels 8j.. and 8(j + 1)...
    uint32_t b[4];
    loadMatrices<true>(b, &tile[16 * k + lane % 8 + 8 * (lane / 8 % 2)]
                               [dim0 + 8 * (j + lane / 16)]);
    mma<T>(acc[j], a, b[0], b[1]);
    mma<T>(acc[j + 1], a, b[2], b[3]);
  }
}

/// acc += p tile: a 16 x 64 block of f32 values, rounded to T, times the
/// tile's 64 rows.
template <typename T, int MaxD>
__device__ void accumulate(float (&acc)[MaxD / 8][4],
                           const float (&p)[kFragments][4],
                           const Tile<MaxD> &tile) {
#pragma unroll
  for (int k = 0; k < kTile / 16; ++k) {
    // The accumulator's fragments 2k and 2k + 1 are the operand's 16
    // columns k.
    uint32_t a[4] = {pack<T>(p[2 * k][0], p[2 * k][1]),
                     pack<T>(p[2 * k][2], p[2 * k][3]),
                     pack<T>(p[2 * k + 1][0], p[2 * k + 1][1]),
                     pack<T>(p[2 * k + 1][2], p[2 * k + 1][3])};
    accumulateRows<T, MaxD + kPad, MaxD>(acc, a, tile, k);
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

/// The output and each query's log-sum-exp. Exponentials are base 2, on
/// scores scaled by log2(e).
template <typename T, int MaxD>
__device__ void forward(const T *qkv, T *out, float *lse, int seq, int heads,
                        int groups, int headDim, float scale) {
  Pair p(seq, heads, groups, headDim);
  Lane l;
  // The keys and values in two buffers each: the next tile's copies
  // arrive in one while the block computes on the other.
  __shared__ __align__(16) Tile<MaxD> queries, keys[2], values[2];
  bool vectors = wholeVectors(p, qkv);
  // The blocks of the last queries, which see the most keys, first: the
  // grid's last blocks then have the least to do.
  int first = (gridDim.x - 1 - blockIdx.x) * kRows, row0 = 16 * l.warp;
  auto fetch = [&](int j0, int buffer) {
    copyTile<MaxD>(keys[buffer], bits(qkv) + p.qkv[1], p.qkvStride, j0, p,
                   vectors);
    copyTile<MaxD>(values[buffer], bits(qkv) + p.qkv[2], p.qkvStride, j0, p,
                   vectors);
    commitCopies();
  };
  copyTile<MaxD>(queries, bits(qkv) + p.qkv[0], p.qkvStride, first, p, vectors);
  fetch(0, 0);
  waitCopies();
  __syncthreads();
  uint32_t q[MaxD / 16][4];
  loadRows<MaxD>(q, queries, row0, l);
  float o[MaxD / 8][4] = {};
  float max[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};
  float scale2 = scale * kLog2e;
  int end = min(first + kRows, seq);
  for (int j0 = 0, buffer = 0; j0 < end; j0 += kTile, buffer ^= 1) {
    // Tile j0 has arrived, and every warp is done with the other buffer.
    waitCopies();
    __syncthreads();
    if (j0 + kTile < end)
      fetch(j0 + kTile, buffer ^ 1);
    float s[kFragments][4];
    scores<T, MaxD>(s, q, keys[buffer]);
    // Each row sees key j0 at least, so its maximum is finite.
    float tileMax[2] = {max[0], max[1]};
    // Only the tile on the diagonal, or past the sequence's end, has keys
    // that some row does not see; the others skip the comparisons.
    if (j0 + kTile > first || j0 + kTile > seq)
      forEach(s, l, [&](float &x, int r, int c) {
        int i = first + row0 + r, j = j0 + c;
        x = j <= i && j < seq ? x * scale2 : -INFINITY;
        tileMax[r / 8] = fmaxf(tileMax[r / 8], x);
      });
    else
      forEach(s, l, [&](float &x, int r, int) {
        x *= scale2;
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
#pragma unroll
    for (int j = 0; j < MaxD / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        o[j][e] *= rescale[e / 2];
    accumulate<T, MaxD>(o, s, values[buffer]);
  }
  float total[2] = {rowSum(sum[0]), rowSum(sum[1])};
  float inverse[2] = {1.0f / total[0], 1.0f / total[1]};
  storeRows<T, MaxD>(o, out + p.out, p.outStride, first + row0, inverse, p, l);
  if (l.pair == 0)
    for (int h = 0; h < 2; ++h) {
      int i = first + row0 + l.group + 8 * h;
      if (i < seq)
        lse[p.rows + i] = (max[h] + log2f(total[h])) * kLn2;
    }
}

/// The key gradient's shared memory, more than a block's 48 KB of static
/// shared memory: two tiles each of queries and of their output gradients
/// and statistics (the next arriving while the block computes on the
/// other), the block's keys, which the query gradient's products read, and
/// the block's dS^T for the tile of queries, a row per key, in the memory
/// the block's values pass through first on their way to the warps'
/// registers.
template <int MaxD> struct GradTiles {
  Tile<MaxD> queries[2], grads[2];
  Tile<MaxD, kKeyRows> keys;
  union {
    Tile<MaxD, kKeyRows> values;
    uint16_t dscores[kKeyRows][kTile + kPad];
  };
  float lse[2][kTile], delta[2][kTile];
};
static_assert(sizeof(GradTiles<32>) == loom::attentionGradSharedBytes(32) &&
                  sizeof(GradTiles<64>) == loom::attentionGradSharedBytes(64),
              "the backend launches the key gradient with this layout");

/// The pair's rows of the query gradient's f32 sums [seq, headDim].
__device__ float *pairSums(float *sums, const Pair &p) {
  return sums + p.rows * p.headDim;
}

/// Each query's dot product of its output and the output's gradient, and
/// zeros in the block's rows of the query gradient's sums, which the key
/// gradient's blocks add to. Where rows are whole 16-byte vectors, 8 lanes
/// take a row (8 channels a lane) and a warp 4 rows at once, each lane
/// reading 16 bytes where a warp per row read 2 bytes a lane.
template <typename T, int MaxD>
__device__ void gradDelta(const T *out, const T *dout, float *d, float *sums,
                          int seq, int heads, int groups, int headDim) {
  static_assert(MaxD <= 64, "8 lanes of 8 channels hold a row");
  Pair p(seq, heads, groups, headDim);
  int first = blockIdx.x * kRows, end = min(first + kRows, seq);
  float *rows = pairSums(sums, p) + static_cast<long long>(first) * headDim;
  long long count = static_cast<long long>(end - first) * headDim;
  for (long long i = threadIdx.x; i < count; i += kRows)
    rows[i] = 0.0f;
  if (!wholeVectors(p, out) || !wholeVectors(p, dout))
    return delta<T>(out, dout, d, seq, heads, groups, headDim);
  int chunk = threadIdx.x % 8, chunks = headDim / 8;
  for (int pass = 0; pass < kRows / (kRows / 8); ++pass) {
    int i = first + pass * (kRows / 8) + threadIdx.x / 8;
    float sum = 0.0f;
    if (i < end && chunk < chunks) {
      long long at = p.out + i * p.outStride + 8 * chunk;
      uint4 a = *reinterpret_cast<const uint4 *>(out + at);
      uint4 b = *reinterpret_cast<const uint4 *>(dout + at);
      const T *x = reinterpret_cast<const T *>(&a);
      const T *y = reinterpret_cast<const T *>(&b);
#pragma unroll
      for (int k = 0; k < 8; ++k)
        sum += widen(x[k]) * widen(y[k]);
    }
    // Every lane takes part: the 8 lanes of a row sum their parts.
    for (int offset = 4; offset > 0; offset /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (i < end && chunk == 0)
      d[p.rows + i] = sum;
  }
}

/// Adds the warp's 16 x (8 Frags) block `acc` to rows row0.. and channels
/// dim0.. of the pair's query gradient sums. Lanes 2q and 2q + 1 swap
/// halves first, so that each holds four neighbouring channels of one row:
/// one 16-byte addition where four of 4 bytes went (one instruction from
/// sm_90).
template <int Frags>
__device__ void addSums(const float (&acc)[Frags][4], float *sums, int row0,
                        int dim0, const Pair &p, const Lane &l) {
  bool odd = l.pair % 2;
  int row = row0 + l.group + 8 * odd;
  bool vectors =
      p.headDim % 4 == 0 && reinterpret_cast<uintptr_t>(sums) % 16 == 0;
#pragma unroll
  for (int j = 0; j < Frags; ++j) {
    // The even lane keeps row g's pair and takes its neighbour's; the odd
    // one keeps row g + 8's.
    float give0 = odd ? acc[j][0] : acc[j][2];
    float give1 = odd ? acc[j][1] : acc[j][3];
    float got0 = __shfl_xor_sync(0xffffffffu, give0, 1);
    float got1 = __shfl_xor_sync(0xffffffffu, give1, 1);
    float four[4] = {odd ? got0 : acc[j][0], odd ? got1 : acc[j][1],
                     odd ? acc[j][2] : got0, odd ? acc[j][3] : got1};
    int d = dim0 + 8 * j + 2 * (l.pair - odd);
    if (row >= p.seq || d >= p.headDim)
      continue;
    float *at = sums + static_cast<long long>(row) * p.headDim + d;
    if (vectors) {
      addFour(at, four);
      continue;
    }
    for (int c = 0; c < 4 && d + c < p.headDim; ++c)
      atomicAdd(at + c, four[c]);
  }
}

/// For the block's 128 keys, over the queries that see them
/// (FlashAttention-2's backward pass): P^T = exp(K Q^T - lse), dP^T =
/// V dO^T, dS^T = P^T (dP^T - delta), dV += P^T dO, dK += dS^T Q, and the
/// query gradient's share of these keys, dS K, added to its f32 sums: five
/// products a tile, where a kernel of its own for the query gradient
/// recomputed S and dP. A warp holds 16 keys' gradients; for dS K, each
/// takes 16 queries of the tile and half the channels, over all the keys.
/// The block takes blockIdx.y's key and value heads, and the tiles of each
/// query head that reads them in turn, so that a group's key and value
/// gradients sum in f32 before they are rounded once.
template <typename T, int MaxD>
__device__ void keyGrad(const T *qkv, const float *lse, const T *dout,
                        const float *delta, float *sums, T *dqkv, int seq,
                        int heads, int groups, int headDim, float scale) {
  Pair p(seq, heads, groups, headDim);
  Lane l;
  LOOM_DYNAMIC_SHARED(GradTiles<MaxD>, t);
  static_assert(kKeyThreads >= 2 * kTile, "a thread per row statistic");
  static_assert(kKeyWarps == 2 * (kTile / 16), "two warps per 16 queries");
  bool vectors = wholeVectors(p, qkv) && wholeVectors(p, dout);
  int first = blockIdx.x * kKeyRows, row0 = 16 * l.warp, keyHead = blockIdx.y;
  // The tiles the block walks: each query head's from `first`, one query
  // head after the other; `p` has the offsets of the tile computed on.
  int tiles = (seq - first + kTile - 1) / kTile, count = tiles * p.perGroup;
  auto fetch = [&](int n, int buffer) {
    Pair fetching = p;
    fetching.select(p.queryHead(keyHead, n / tiles));
    int i0 = first + n % tiles * kTile;
    copyTile<MaxD, kTile, kKeyThreads>(
        t.queries[buffer], bits(qkv) + fetching.qkv[0], fetching.qkvStride, i0,
        fetching, vectors);
    copyTile<MaxD, kTile, kKeyThreads>(
        t.grads[buffer], bits(dout) + fetching.out, fetching.outStride, i0,
        fetching, vectors);
    if (threadIdx.x < 2 * kTile) {
      int r = threadIdx.x % kTile, i = i0 + r;
      const float *from = threadIdx.x < kTile ? lse : delta;
      float *to = threadIdx.x < kTile ? t.lse[buffer] : t.delta[buffer];
      copyAsync<4>(&to[r], i < seq ? &from[fetching.rows + i] : from, i < seq);
    }
    commitCopies();
  };
  p.select(p.queryHead(keyHead, 0));
  copyTile<MaxD, kKeyRows, kKeyThreads>(t.keys, bits(qkv) + p.qkv[1],
                                        p.qkvStride, first, p, vectors);
  copyTile<MaxD, kKeyRows, kKeyThreads>(t.values, bits(qkv) + p.qkv[2],
                                        p.qkvStride, first, p, vectors);
  fetch(0, 0);
  waitCopies();
  __syncthreads();
  // The values stay in registers; the keys, which stay in shared memory
  // for the query gradient anyway, come again each tile, which leaves
  // registers enough for a block of 8 warps (255 a thread, a few bytes
  // spilled for heads of 64). Every warp has its values before the
  // first tile's barrier, after which dS^T overwrites them.
  uint32_t v[MaxD / 16][4];
  loadRows<MaxD, kKeyRows>(v, t.values, row0, l);
  float dk[MaxD / 8][4] = {}, dv[MaxD / 8][4] = {};
  float scale2 = scale * kLog2e;
  // dS K: the warp's 16 queries of the tile and half of the channels.
  int queryRow0 = 16 * (l.warp % (kTile / 16)),
      dim0 = MaxD / 2 * (l.warp / (kTile / 16));
  for (int n = 0, buffer = 0; n < count; ++n, buffer ^= 1) {
    // Tile n has arrived, and every warp is done with the other buffer
    // and with the last tile's dS^T.
    waitCopies();
    __syncthreads();
    if (n + 1 < count)
      fetch(n + 1, buffer ^ 1);
    if (n % tiles == 0)
      p.select(p.queryHead(keyHead, n / tiles));
    int i0 = first + n % tiles * kTile;
    const Tile<MaxD> &queries = t.queries[buffer], &grads = t.grads[buffer];
    const float *lseOf = t.lse[buffer], *deltaOf = t.delta[buffer];
    // Transposed: rows are the warp's keys, columns the tile's queries.
    float probs[kFragments][4], dprobs[kFragments][4];
    {
      uint32_t k[MaxD / 16][4];
      loadRows<MaxD, kKeyRows>(k, t.keys, row0, l);
      scores<T, MaxD>(probs, k, queries);
    }
    scores<T, MaxD>(dprobs, v, grads);
    // Only the tiles before the block's last key, or past the sequence's
    // end, have queries that some key does not see; the others skip the
    // comparisons.
    if (i0 < first + kKeyRows || i0 + kTile > seq)
      forEach(probs, l, [&](float &x, int r, int c) {
        int j = first + row0 + r, i = i0 + c;
        x = i >= j && i < seq ? exp2f(x * scale2 - lseOf[c] * kLog2e) : 0.0f;
      });
    else
      forEach(probs, l, [&](float &x, int, int c) {
        x = exp2f(x * scale2 - lseOf[c] * kLog2e);
      });
#pragma unroll
    for (int f = 0; f < kFragments; ++f)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        dprobs[f][e] =
            probs[f][e] * (dprobs[f][e] - deltaOf[8 * f + 2 * l.pair + e % 2]);
    accumulate<T, MaxD>(dv, probs, grads);
    accumulate<T, MaxD>(dk, dprobs, queries);
    // dS^T as the storage type, a row per key, for the query gradient.
#pragma unroll
    for (int f = 0; f < kFragments; ++f)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        *reinterpret_cast<uint32_t *>(
            &t.dscores[row0 + l.group + 8 * h][8 * f + 2 * l.pair]) =
            pack<T>(dprobs[f][2 * h], dprobs[f][2 * h + 1]);
    __syncthreads();
    // dS's rows come transposed from dS^T's columns (matrix m of the
    // operand: keys 8 (m / 2).., queries 8 (m % 2)..).
    float dq[MaxD / 16][4] = {};
    int lane = threadIdx.x % 32, matrix = lane / 8;
#pragma unroll
    for (int kk = 0; kk < kKeyRows / 16; ++kk) {
      uint32_t a[4];
      loadMatrices<true>(a, &t.dscores[16 * kk + 8 * (matrix / 2) + lane % 8]
                                      [queryRow0 + 8 * (matrix % 2)]);
      accumulateRows<T, MaxD + kPad, MaxD / 2>(dq, a, t.keys, kk, dim0);
    }
    addSums(dq, pairSums(sums, p), i0 + queryRow0, dim0, p, l);
  }
  float keyScale[2] = {scale, scale}, one[2] = {1.0f, 1.0f};
  storeRows<T, MaxD>(dk, dqkv + p.qkv[1], p.qkvStride, first + row0, keyScale,
                     p, l);
  storeRows<T, MaxD>(dv, dqkv + p.qkv[2], p.qkvStride, first + row0, one, p, l);
}

/// The block's queries' gradient from its f32 sums, scaled, as the storage
/// type.
template <typename T, int MaxD>
__device__ void queryGrad(const T *, const float *, const T *, const float *,
                          float *sums, T *dqkv, int seq, int heads, int groups,
                          int headDim, float scale) {
  Pair p(seq, heads, groups, headDim);
  int first = blockIdx.x * kRows, end = min(first + kRows, seq);
  const float *rows =
      pairSums(sums, p) + static_cast<long long>(first) * headDim;
  int count = (end - first) * headDim;
  for (int i = threadIdx.x; i < count; i += kThreads) {
    int row = first + i / headDim, d = i % headDim;
    dqkv[p.qkv[0] + row * p.qkvStride + d] = narrow<T>(scale * rows[i]);
  }
}
} // namespace

// Three blocks a multiprocessor (at most 170 registers a thread) for the
// forward pass: a block waits on its barriers, and the others compute
// meanwhile. One of 8 warps for the key gradient, whose shared memory (73
// KB for heads of 64) and registers hold more.
LOOM_ATTENTION_MODULE(LOOM_ATTENTION_TYPE, LOOM_ATTENTION_NAME,
                      LOOM_ATTENTION_HEAD, kThreads, 3, kKeyThreads, 1)
