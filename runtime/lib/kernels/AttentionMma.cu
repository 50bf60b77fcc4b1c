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
//   forward: S = Q K^T, an online softmax, O += P V, and each query's
//     log-sum-exp, which the backward pass reads;
//   key_grad: for the block's keys, over the queries that see them,
//     P^T = exp(K Q^T - lse), dP^T = V dO^T, dS^T = P^T (dP^T - delta),
//     dV += P^T dO and dK += dS^T Q;
//   query_grad: for the block's queries, over the keys they see,
//     dS = P (dO V^T - delta) and dQ += dS K.
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

/// How a block's threads share a tile of rows: chunks of 8 elements, the
/// `i`th of a thread's in row row(i) from column(i).
template <int MaxD> struct Chunks {
  static constexpr int kPerRow = MaxD / 8,
                       kPerThread = kRows * kPerRow / kThreads;
  static_assert(kRows * kPerRow % kThreads == 0, "whole chunks per thread");
  static __device__ int row(int i) {
    return (threadIdx.x + i * kThreads) / kPerRow;
  }
  static __device__ int column(int i) {
    return (threadIdx.x + i * kThreads) % kPerRow * 8;
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

/// Copies `bytes` (4, 8 or 16) from global memory to shared memory without
/// passing through registers, or zeros where `in` is false; the copy
/// completes at waitCopies.
template <int Bytes>
__device__ __forceinline__ void copyAsync(void *to, const void *from, bool in) {
  auto at = static_cast<uint32_t>(__cvta_generic_to_shared(to));
  if constexpr (Bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :
                 : "r"(at), "l"(from), "r"(in ? 16 : 0)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n"
                 :
                 : "r"(at), "l"(from), "n"(Bytes), "r"(in ? Bytes : 0)
                 : "memory");
}
__device__ __forceinline__ void commitCopies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/// Waits for this thread's copies; a barrier then makes every thread's
/// visible.
__device__ __forceinline__ void waitCopies() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

/// Rows [from, from + kRows) of a [seq, headDim] matrix, `stride` elements
/// apart from `base`, into `tile`: copied asynchronously 16 bytes at a time
/// when the rows allow it (`vectors`), so that a loop computes on one tile
/// while the next arrives, else loaded element by element at once.
template <int MaxD>
__device__ void copyTile(Tile<MaxD> &tile, const uint16_t *base,
                         long long stride, int from, const Pair &p,
                         bool vectors) {
  using C = Chunks<MaxD>;
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

/// Four 8 x 8 matrices of 16-bit elements from shared memory, `row` being
/// the lane's row of matrix lane / 8. Lane t receives, in word m, elements
/// 2 (t % 4) and 2 (t % 4) + 1 of matrix m's row t / 4; `Transposed`, of its
/// column t / 4, which is the layout of an mma operand's fragment either
/// way. One instruction where 32-bit (or, for a column, 16-bit) loads took
/// four (sixteen).
template <bool Transposed>
__device__ __forceinline__ void loadMatrices(uint32_t (&m)[4],
                                             const uint16_t *row) {
  auto at = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (Transposed)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(m[0]), "=r"(m[1]), "=r"(m[2]), "=r"(m[3])
                 : "r"(at));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(m[0]), "=r"(m[1]), "=r"(m[2]), "=r"(m[3])
                 : "r"(at));
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

/// acc += p tile: a 16 x 64 block of f32 values, rounded to T, times the
/// tile's 64 rows.
template <typename T, int MaxD>
__device__ void accumulate(float (&acc)[MaxD / 8][4],
                           const float (&p)[kFragments][4],
                           const Tile<MaxD> &tile) {
  int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < kTile / 16; ++k) {
    // The accumulator's fragments 2k and 2k + 1 are the operand's 16
    // columns k.
    uint32_t a[4] = {pack<T>(p[2 * k][0], p[2 * k][1]),
                     pack<T>(p[2 * k][2], p[2 * k][3]),
                     pack<T>(p[2 * k + 1][0], p[2 * k + 1][1]),
                     pack<T>(p[2 * k + 1][2], p[2 * k + 1][3])};
#pragma unroll
    for (int j = 0; j < MaxD / 8; j += 2) {
      // Rows 16k + 8 (lane / 8 % 2).., channels 8 (j + lane / 16)..,
      // transposed: the right operands of channels 8j.. and 8(j + 1)...
      uint32_t b[4];
      loadMatrices<true>(
          b,
          &tile[16 * k + lane % 8 + 8 * (lane / 8 % 2)][8 * (j + lane / 16)]);
      mma<T>(acc[j], a, b[0], b[1]);
      mma<T>(acc[j + 1], a, b[2], b[3]);
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

/// The output and each query's log-sum-exp. Exponentials are base 2, on
/// scores scaled by log2(e).
template <typename T, int MaxD>
__device__ void forward(const T *qkv, T *out, float *lse, int seq, int heads,
                        int headDim, float scale) {
  Pair p(seq, heads, headDim);
  Lane l;
  // The keys and values in two buffers each: the next tile's copies
  // arrive in one while the block computes on the other.
  __shared__ __align__(16) Tile<MaxD> queries, keys[2], values[2];
  bool vectors = wholeVectors(p, qkv);
  int first = blockIdx.x * kRows, row0 = 16 * l.warp;
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

template <typename T, int MaxD>
__device__ void keyGrad(const T *qkv, const float *lse, const T *dout,
                        const float *delta, T *dqkv, int seq, int heads,
                        int headDim, float scale) {
  Pair p(seq, heads, headDim);
  Lane l;
  // Buffer b holds a tile of queries and their gradients (tiles 2b and
  // 2b + 1) and their rows' statistics, the next tile's copies arriving in
  // one while the block computes on the other. The block's keys and values
  // arrive first in buffer 1's tiles.
  __shared__ __align__(16) Tile<MaxD> tiles[4];
  __shared__ __align__(16) float rowLse[2][kTile], rowDelta[2][kTile];
  static_assert(kThreads == 2 * kTile, "a thread per row statistic");
  bool vectors = wholeVectors(p, qkv) && wholeVectors(p, dout);
  int first = blockIdx.x * kRows, row0 = 16 * l.warp;
  auto fetch = [&](int i0, int buffer) {
    copyTile<MaxD>(tiles[2 * buffer], bits(qkv) + p.qkv[0], p.qkvStride, i0, p,
                   vectors);
    copyTile<MaxD>(tiles[2 * buffer + 1], bits(dout) + p.out, p.outStride, i0,
                   p, vectors);
    int r = threadIdx.x % kTile, i = i0 + r;
    const float *from = threadIdx.x < kTile ? lse : delta;
    float *to = threadIdx.x < kTile ? rowLse[buffer] : rowDelta[buffer];
    copyAsync<4>(&to[r], i < seq ? &from[p.rows + i] : from, i < seq);
    commitCopies();
  };
  copyTile<MaxD>(tiles[2], bits(qkv) + p.qkv[1], p.qkvStride, first, p,
                 vectors);
  copyTile<MaxD>(tiles[3], bits(qkv) + p.qkv[2], p.qkvStride, first, p,
                 vectors);
  fetch(first, 0);
  waitCopies();
  __syncthreads();
  uint32_t k[MaxD / 16][4], v[MaxD / 16][4];
  loadRows<MaxD>(k, tiles[2], row0, l);
  loadRows<MaxD>(v, tiles[3], row0, l);
  float dk[MaxD / 8][4] = {}, dv[MaxD / 8][4] = {};
  float scale2 = scale * kLog2e;
  for (int i0 = first, buffer = 0; i0 < seq; i0 += kTile, buffer ^= 1) {
    // Tile i0 has arrived, and every warp is done with the other buffer
    // (at first, with the keys and values).
    waitCopies();
    __syncthreads();
    if (i0 + kTile < seq)
      fetch(i0 + kTile, buffer ^ 1);
    const Tile<MaxD> &queries = tiles[2 * buffer],
                     &grads = tiles[2 * buffer + 1];
    const float *lseOf = rowLse[buffer], *deltaOf = rowDelta[buffer];
    // Transposed: rows are the warp's keys, columns the tile's queries.
    float probs[kFragments][4], dprobs[kFragments][4];
    scores<T, MaxD>(probs, k, queries);
    scores<T, MaxD>(dprobs, v, grads);
    forEach(probs, l, [&](float &x, int r, int c) {
      int j = first + row0 + r, i = i0 + c;
      x = i >= j && i < seq ? exp2f(x * scale2 - lseOf[c] * kLog2e) : 0.0f;
    });
#pragma unroll
    for (int f = 0; f < kFragments; ++f)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        dprobs[f][e] =
            probs[f][e] * (dprobs[f][e] - deltaOf[8 * f + 2 * l.pair + e % 2]);
    accumulate<T, MaxD>(dv, probs, grads);
    accumulate<T, MaxD>(dk, dprobs, queries);
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
  // Buffer b holds a tile of keys and their values (tiles 2b and 2b + 1),
  // the next tile's copies arriving in one while the block computes on the
  // other. The block's queries and their gradients arrive first in buffer
  // 1's tiles.
  __shared__ __align__(16) Tile<MaxD> tiles[4];
  bool vectors = wholeVectors(p, qkv) && wholeVectors(p, dout);
  int first = blockIdx.x * kRows, row0 = 16 * l.warp;
  auto fetch = [&](int j0, int buffer) {
    copyTile<MaxD>(tiles[2 * buffer], bits(qkv) + p.qkv[1], p.qkvStride, j0, p,
                   vectors);
    copyTile<MaxD>(tiles[2 * buffer + 1], bits(qkv) + p.qkv[2], p.qkvStride, j0,
                   p, vectors);
    commitCopies();
  };
  copyTile<MaxD>(tiles[2], bits(qkv) + p.qkv[0], p.qkvStride, first, p,
                 vectors);
  copyTile<MaxD>(tiles[3], bits(dout) + p.out, p.outStride, first, p, vectors);
  fetch(0, 0);
  float rowLse[2], rowDelta[2];
  for (int h = 0; h < 2; ++h) {
    int i = first + row0 + l.group + 8 * h;
    rowLse[h] = i < seq ? lse[p.rows + i] * kLog2e : 0.0f;
    rowDelta[h] = i < seq ? delta[p.rows + i] : 0.0f;
  }
  waitCopies();
  __syncthreads();
  uint32_t q[MaxD / 16][4], g[MaxD / 16][4];
  loadRows<MaxD>(q, tiles[2], row0, l);
  loadRows<MaxD>(g, tiles[3], row0, l);
  float dq[MaxD / 8][4] = {};
  float scale2 = scale * kLog2e;
  int end = min(first + kRows, seq);
  for (int j0 = 0, buffer = 0; j0 < end; j0 += kTile, buffer ^= 1) {
    // Tile j0 has arrived, and every warp is done with the other buffer
    // (at first, with the queries and their gradients).
    waitCopies();
    __syncthreads();
    if (j0 + kTile < end)
      fetch(j0 + kTile, buffer ^ 1);
    const Tile<MaxD> &keys = tiles[2 * buffer], &values = tiles[2 * buffer + 1];
    float dprobs[kFragments][4], dscores[kFragments][4];
    scores<T, MaxD>(dscores, q, keys);
    scores<T, MaxD>(dprobs, g, values);
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
    accumulate<T, MaxD>(dq, dscores, keys);
  }
  float queryScale[2] = {scale, scale};
  storeRows<T, MaxD>(dq, dqkv + p.qkv[0], p.qkvStride, first + row0, queryScale,
                     p, l);
}
} // namespace

// Three blocks a multiprocessor (at most 170 registers a thread): a block
// waits on its barriers, and the others compute meanwhile.
LOOM_ATTENTION_MODULE(LOOM_ATTENTION_TYPE, LOOM_ATTENTION_NAME,
                      LOOM_ATTENTION_HEAD, kThreads, 3)
