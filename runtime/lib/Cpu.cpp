//===- Cpu.cpp - The CPU backend: the functions generated code calls ------===//

#include "CpuGemm.h"
#include "Device.h"
#include "DnnlGemm.h"
#include "Float.h"
#include "Parallel.h"
#include "VectorMath.h"
#include "loom/rt.h"
#include "loom/runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

LOOM_VECTOR_CLONES
void loom::widenBlock(int32_t dtype, const uint16_t *from, int64_t ld,
                      int64_t rows, int64_t cols, float *to) {
  auto *out = reinterpret_cast<uint32_t *>(to);
  static_assert(sizeof(float) == sizeof(uint32_t), "f32 is 32 bits");
  for (int64_t i = 0; i < rows; ++i) {
    const uint16_t *row = from + i * ld;
    uint32_t *dst = out + i * cols;
    if (dtype == LOOM_DTYPE_BF16)
      for (int64_t j = 0; j < cols; ++j)
        dst[j] = static_cast<uint32_t>(row[j]) << 16;
    else
      for (int64_t j = 0; j < cols; ++j)
        dst[j] = widenHalf(row[j]);
  }
}

namespace {
/// A GEMM split over the runtime's threads into blocks of `unit` rows or
/// columns of C, one call of the SGEMM each: oneDNN's where `onednn`, even
/// for a block too small for it alone, so that the split does not change
/// which library computes the product.
struct GemmParts {
  int32_t transA, transB;
  int64_t m, n, k;
  float alpha;
  const float *a;
  int64_t lda;
  const float *b;
  int64_t ldb;
  float beta;
  float *c;
  int64_t ldc;
  bool columns;
  int64_t unit;
  bool onednn;
};

void gemmParts(void *context, int64_t from, int64_t to) {
  const GemmParts &g = *static_cast<const GemmParts *>(context);
  from *= g.unit;
  int64_t m = g.m, n = g.n;
  const float *a = g.a, *b = g.b;
  float *c = g.c;
  if (g.columns) {
    n = std::min(to * g.unit, g.n) - from;
    b += g.transB ? from * g.ldb : from;
    c += from;
  } else {
    m = std::min(to * g.unit, g.m) - from;
    a += g.transA ? from : from * g.lda;
    c += from * g.ldc;
  }
  if (g.onednn)
    loom::dnnlSgemm(g.transA, g.transB, m, n, g.k, g.alpha, a, g.lda, b, g.ldb,
                    g.beta, c, g.ldc);
  else
    loom::sgemmCall(g.transA, g.transB, m, n, g.k, g.alpha, a, g.lda, b, g.ldb,
                    g.beta, c, g.ldc);
}

/// Below this many elements a block's widening is not worth the threads'
/// wake-up.
constexpr int64_t kParallelWidening = 1 << 15;

/// widenBlock over the runtime's threads, each a range of the rows: the
/// GEMM that reads the block waits for it, and its threads with it.
void widenBlockParallel(int32_t dtype, const uint16_t *from, int64_t ld,
                        int64_t rows, int64_t cols, float *to) {
  struct Block {
    int32_t dtype;
    const uint16_t *from;
    int64_t ld, cols;
    float *to;
  } block{dtype, from, ld, cols, to};
  auto range = [](void *raw, int64_t first, int64_t last) {
    const Block &b = *static_cast<const Block *>(raw);
    loom::widenBlock(b.dtype, b.from + first * b.ld, b.ld, last - first, b.cols,
                     b.to + first * b.cols);
  };
  if (rows > 1 && rows * cols >= kParallelWidening &&
      loom_get_num_threads() > 1 && !loom::isInParallelLoop())
    loom_rt_parallel_for(range, &block, 0, rows);
  else
    range(&block, 0, rows);
}

/// Lines [line, line + lines) over [p, p + depth) of k of a matrix of
/// lines x k, stored so (`transposed` false) or as its transpose, widened
/// into `to` in its stored orientation, packed.
void widenLines(int32_t dtype, const uint16_t *x, int64_t ld, bool transposed,
                int64_t line, int64_t lines, int64_t p, int64_t depth,
                float *to) {
  if (transposed)
    widenBlockParallel(dtype, x + p * ld + line, ld, depth, lines, to);
  else
    widenBlockParallel(dtype, x + line * ld + p, ld, lines, depth, to);
}

/// The most bytes of each widened block of a bf16 or f16 GEMM's operands.
constexpr int64_t kGemmBlockBytes = 4 << 20;
/// The most of k one widened block spans: OpenBLAS's own blocks over k are
/// of this order, and a 4 MiB block of 512-long lines holds 2,048.
constexpr int64_t kGemmDepth = 512;

/// Below this many multiply-adds OpenBLAS's own threads spend much of a
/// GEMM synchronizing (gpt2-tiny's 512 x 384 x 128 runs at half the peak
/// of a large one); one single-threaded GEMM per block of rows of C on the
/// runtime's threads does better. Above it OpenBLAS's threading is the
/// faster.
constexpr double kSplitWork = 1e8;

/// The GEMMs of a batch (loom_rt_gemm_batched), numbered i * count1 + j.
struct GemmBatch {
  int32_t dtype, transA, transB;
  int64_t m, n, k;
  float alpha;
  const char *a;
  int64_t lda;
  const char *b;
  int64_t ldb;
  float beta;
  float *c;
  int64_t ldc, count1;
  int64_t strides0[3], strides1[3];
  size_t bytes;
};

void gemmBatch(void *context, int64_t from, int64_t to) {
  const GemmBatch &g = *static_cast<const GemmBatch *>(context);
  for (int64_t index = from; index < to; ++index) {
    int64_t i = index / g.count1, j = index % g.count1;
    auto offset = [&](int operand) {
      return i * g.strides0[operand] + j * g.strides1[operand];
    };
    loom_rt_gemm(g.dtype, g.transA, g.transB, g.m, g.n, g.k, g.alpha,
                 g.a + offset(0) * g.bytes, g.lda, g.b + offset(1) * g.bytes,
                 g.ldb, g.beta, g.c + offset(2), g.ldc);
  }
}
/// The blocks of a bf16 or f16 GEMM on the CPU: at most kGemmDepth of k,
/// and as many lines of op(A) and of op(B) as fit in `block_bytes` widened.
struct GemmBlocks {
  int64_t k, m, n;
};
GemmBlocks gemmBlocks(int64_t m, int64_t n, int64_t k, int64_t block_bytes) {
  int64_t kb = std::max<int64_t>(1, std::min(k, kGemmDepth));
  int64_t perLine = kb * static_cast<int64_t>(sizeof(float));
  return {kb, std::max<int64_t>(1, std::min(m, block_bytes / perLine)),
          std::max<int64_t>(1, std::min(n, block_bytes / perLine))};
}

/// loom_rt_gemm_gelu's epilogue, or none.
constexpr int32_t kNoGelu = -1;

/// A tile of f32 sums to round into D, a bias added first.
struct RoundTile {
  int32_t dtype;
  const float *tile;
  int64_t cols;
  const uint16_t *bias;
  uint16_t *d;
  int64_t ldd;
  /// A loom_gelu_mode or kNoGelu, and the tile's part of AUX.
  int32_t gelu = kNoGelu;
  uint16_t *aux = nullptr;
  int64_t ldaux = 0;
  /// loom_rt_gemm_add's C, the tile's part of it, or null.
  const uint16_t *addend = nullptr;
  int64_t ldaddend = 0;
};

/// GPT-2's GELU and its derivative in f32, with the loops' constants
/// (lib/Conversion/LoomToLinalg/Gelu.cpp) rounded from the same doubles but
/// written through the logistic function: 0.5 (1 + tanh u) is 1 / (1 +
/// e^-2u), which does not cancel where tanh nears -1, and whose exp
/// (VectorMath.h) lets the epilogues' loops vectorize where libm's tanhf
/// is a call per element. The loops' tanh is a rational approximation:
/// their last bits differ.
constexpr float kGeluC = 0.044715f;
constexpr float kGeluC3 = static_cast<float>(3 * 0.044715);
const float kGeluS = static_cast<float>(std::sqrt(2.0 / M_PI));
/// e^-2u of GELU's u at x.
[[gnu::always_inline]] inline float geluExp(float x) {
  return loom::vectorExp(-2.0f * kGeluS * (x + x * x * x * kGeluC));
}
[[gnu::always_inline]] inline float gelu(float x) {
  return x / (1.0f + geluExp(x));
}
[[gnu::always_inline]] inline float geluGrad(float x) {
  // sigma (1 + 2 x u' (1 - sigma)), with 1 - sigma = e sigma.
  float e = geluExp(x);
  float sigma = 1.0f / (1.0f + e);
  float du = kGeluS * (1.0f + x * x * kGeluC3);
  return sigma * (1.0f + 2.0f * x * du * e * sigma);
}

/// One loop per type, without a branch on it per element, so that the
/// compiler vectorizes it.
template <uint16_t (*Narrow)(float), float (*Widen)(uint16_t)>
[[gnu::always_inline]] inline void roundRows(const RoundTile &t, int64_t from,
                                             int64_t to) {
  for (int64_t r = from; r < to; ++r) {
    const float *sums = t.tile + r * t.cols;
    uint16_t *out = t.d + r * t.ldd;
    uint16_t *aux = t.aux + r * t.ldaux;
    if (t.gelu == LOOM_GELU_FORWARD) {
      // A loop for each case of the bias, so that each vectorizes.
      auto store = [&](int64_t c, float x) {
        aux[c] = Narrow(x);
        out[c] = Narrow(gelu(x));
      };
      if (t.bias)
        for (int64_t c = 0; c < t.cols; ++c)
          store(c, sums[c] + Widen(t.bias[c]));
      else
        for (int64_t c = 0; c < t.cols; ++c)
          store(c, sums[c]);
    } else if (t.gelu == LOOM_GELU_BACKWARD)
      for (int64_t c = 0; c < t.cols; ++c)
        out[c] = Narrow(sums[c] * geluGrad(Widen(aux[c])));
    else if (t.addend) {
      // cuBLASLt's order: the product plus C, then the bias.
      const uint16_t *addend = t.addend + r * t.ldaddend;
      for (int64_t c = 0; c < t.cols; ++c) {
        float x = sums[c] + Widen(addend[c]);
        out[c] = Narrow(t.bias ? x + Widen(t.bias[c]) : x);
      }
    } else if (t.bias)
      for (int64_t c = 0; c < t.cols; ++c)
        out[c] = Narrow(sums[c] + Widen(t.bias[c]));
    else
      for (int64_t c = 0; c < t.cols; ++c)
        out[c] = Narrow(sums[c]);
  }
}

float widenBf16(uint16_t bits) {
  return loom::bitsFloat(static_cast<uint32_t>(bits) << 16);
}
float widenF16(uint16_t bits) { return loom::bitsFloat(loom::widenHalf(bits)); }

/// Each clone has its own copy of the loops (roundRows is inlined).
LOOM_VECTOR_CLONES
void roundTileRows(void *context, int64_t from, int64_t to) {
  const RoundTile &t = *static_cast<const RoundTile *>(context);
  if (t.dtype == LOOM_DTYPE_BF16)
    roundRows<loom::narrowBf16, widenBf16>(t, from, to);
  else
    roundRows<loom::narrowHalf, widenF16>(t, from, to);
}

/// The rows or columns of C in each part of a GEMM split for oneDNN: a
/// multiple of the widest vectors (16 floats), few enough for two parts of
/// the narrowest products of a small model.
constexpr int64_t kOneDnnPartLines = 16;

/// Below this many elements a tile's rounding is not worth the threads'
/// wake-up.
constexpr int64_t kParallelRounding = 1 << 16;
} // namespace

extern "C" {

void loom_rt_sgemm(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                   int64_t k, float alpha, const float *a, int64_t lda,
                   const float *b, int64_t ldb, float beta, float *c,
                   int64_t ldc) {
  if (loom::cudaActive())
    return loom::cudaGemm(LOOM_DTYPE_F32, trans_a, trans_b, m, n, k, alpha, a,
                          lda, b, ldb, beta, c, ldc);
  int64_t threads = loom_get_num_threads();
  GemmParts parts{trans_a, trans_b, m,    n, k,   alpha, a, lda,
                  b,       ldb,     beta, c, ldc, false, 1, false};
  bool split = threads > 1 && !loom::isInParallelLoop();
  if (loom::inOneDnn(m, n, k)) {
    parts.onednn = true;
    // oneDNN's SGEMM runs on one thread per part: blocks of C along its
    // longer side, of whole vectors.
    parts.columns = n >= m;
    parts.unit = kOneDnnPartLines;
    int64_t lines = parts.columns ? n : m;
    split = split && lines > parts.unit;
    if (split)
      loom_rt_parallel_for(gemmParts, &parts, 0,
                           (lines + parts.unit - 1) / parts.unit);
    else
      loom::dnnlSgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                      ldc);
    return;
  }
  if (split && m >= 64 * threads &&
      static_cast<double>(m) * n * k < kSplitWork) {
    loom_rt_parallel_for(gemmParts, &parts, 0, m);
    return;
  }
  loom::sgemmCall(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                  ldc);
}

void loom_rt_gemm(int32_t dtype, int32_t trans_a, int32_t trans_b, int64_t m,
                  int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
                  const void *b, int64_t ldb, float beta, float *c,
                  int64_t ldc) {
  loom_rt_gemm_blocked(dtype, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                       beta, c, ldc, kGemmBlockBytes);
}

void loom_rt_gemm_batched(int32_t dtype, int32_t trans_a, int32_t trans_b,
                          int64_t m, int64_t n, int64_t k, float alpha,
                          const void *a, int64_t lda, const void *b,
                          int64_t ldb, float beta, float *c, int64_t ldc,
                          int64_t count0, int64_t a_stride0, int64_t b_stride0,
                          int64_t c_stride0, int64_t count1, int64_t a_stride1,
                          int64_t b_stride1, int64_t c_stride1) {
  GemmBatch batch{dtype,
                  trans_a,
                  trans_b,
                  m,
                  n,
                  k,
                  alpha,
                  static_cast<const char *>(a),
                  lda,
                  static_cast<const char *>(b),
                  ldb,
                  beta,
                  c,
                  ldc,
                  count1,
                  {a_stride0, b_stride0, c_stride0},
                  {a_stride1, b_stride1, c_stride1},
                  static_cast<size_t>(loom::elementSize(dtype))};
  if (loom::cudaActive())
    return loom::cudaGemmBatched(dtype, trans_a, trans_b, m, n, k, alpha, a,
                                 lda, b, ldb, beta, c, ldc, count0,
                                 batch.strides0, count1, batch.strides1);
  if (count0 <= 0 || count1 <= 0)
    return;
  int64_t total = count0 * count1;
  if (loom_get_num_threads() > 1 && !loom::isInParallelLoop() && total > 1)
    loom_rt_parallel_for(gemmBatch, &batch, 0, total);
  else
    gemmBatch(&batch, 0, total);
}

} // extern "C"

namespace {
/// A bf16 or f16 GEMM on OpenBLAS's SGEMM, in blocks of the operands
/// widened to f32.
void gemmWidened(int32_t dtype, int32_t trans_a, int32_t trans_b, int64_t m,
                 int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
                 const void *b, int64_t ldb, float beta, float *c, int64_t ldc,
                 int64_t block_bytes) {
  // OpenBLAS has no bf16 GEMM here: blocks of op(A) and op(B) are widened
  // into f32 and multiplied by SGEMM, which adds each block's products
  // over k to C, as it does between its own blocks over k. The blocks
  // bound the runtime's scratch, which would otherwise be as large as the
  // f32 copies the compiler no longer makes; the depth keeps them from
  // shrinking to slivers where k is the vocabulary.
  if (k <= 0) {
    // No products: C = beta C. BLAS would reject the leading dimensions of
    // operands that have no elements and leave C as it was.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  auto [kb, mb, nb] = gemmBlocks(m, n, k, block_bytes);
  thread_local std::vector<float> aBlock, bBlock;
  aBlock.resize(mb * kb);
  bBlock.resize(nb * kb);
  const auto *a16 = static_cast<const uint16_t *>(a);
  const auto *b16 = static_cast<const uint16_t *>(b);
  for (int64_t p = 0; p < k; p += kb) {
    int64_t depth = std::min(kb, k - p);
    float blockBeta = p == 0 ? beta : 1.0f;
    for (int64_t i = 0; i < m; i += mb) {
      int64_t rows = std::min(mb, m - i);
      widenLines(dtype, a16, lda, trans_a, i, rows, p, depth, aBlock.data());
      for (int64_t j = 0; j < n; j += nb) {
        int64_t cols = std::min(nb, n - j);
        // op(B)'s columns are the lines of B read transposed.
        widenLines(dtype, b16, ldb, !trans_b, j, cols, p, depth, bBlock.data());
        loom_rt_sgemm(trans_a, trans_b, rows, cols, depth, alpha, aBlock.data(),
                      trans_a ? rows : depth, bBlock.data(),
                      trans_b ? depth : cols, blockBeta, c + i * ldc + j, ldc);
      }
    }
  }
}

} // namespace

extern "C" {

void loom_rt_gemm_blocked(int32_t dtype, int32_t trans_a, int32_t trans_b,
                          int64_t m, int64_t n, int64_t k, float alpha,
                          const void *a, int64_t lda, const void *b,
                          int64_t ldb, float beta, float *c, int64_t ldc,
                          int64_t block_bytes) {
  if (dtype == LOOM_DTYPE_F32)
    return loom_rt_sgemm(trans_a, trans_b, m, n, k, alpha,
                         static_cast<const float *>(a), lda,
                         static_cast<const float *>(b), ldb, beta, c, ldc);
  if (loom::cudaActive())
    return loom::cudaGemm(dtype, trans_a, trans_b, m, n, k, alpha, a, lda, b,
                          ldb, beta, c, ldc);
  if (m <= 0 || n <= 0)
    return;
  if (dtype != LOOM_DTYPE_BF16 || !loom::dnnlGemmAvailable())
    return gemmWidened(dtype, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                       beta, c, ldc, block_bytes);
  // On the CPU's bf16 units, in the tiles of C that a rounded product
  // (gemmRoundedTiles) is made in: each tile is the same call either way,
  // so a product rounded as it is made is the product rounded after.
  GemmBlocks blocks = gemmBlocks(m, n, k, block_bytes);
  const auto *a16 = static_cast<const uint16_t *>(a);
  const auto *b16 = static_cast<const uint16_t *>(b);
  for (int64_t i = 0; i < m; i += blocks.m) {
    int64_t rows = std::min(blocks.m, m - i);
    const uint16_t *ai = a16 + (trans_a ? i : i * lda);
    for (int64_t j = 0; j < n; j += blocks.n) {
      int64_t cols = std::min(blocks.n, n - j);
      const uint16_t *bj = b16 + (trans_b ? j * ldb : j);
      float *cij = c + i * ldc + j;
      if (!loom::dnnlGemmBf16(trans_a, trans_b, rows, cols, k, alpha, ai, lda,
                              bj, ldb, beta, cij, ldc))
        gemmWidened(dtype, trans_a, trans_b, rows, cols, k, alpha, ai, lda, bj,
                    ldb, beta, cij, ldc, block_bytes);
    }
  }
}

} // extern "C"

namespace {
/// Quiet NaNs into the [m, n] matrix D of `dtype` (nothing for a type the
/// runtime does not know).
void fillNaN(int32_t dtype, int64_t m, int64_t n, void *d, int64_t ldd) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      if (dtype == LOOM_DTYPE_F32)
        static_cast<float *>(d)[i * ldd + j] = NAN;
      else if (dtype == LOOM_DTYPE_BF16 || dtype == LOOM_DTYPE_F16)
        static_cast<uint16_t *>(d)[i * ldd + j] =
            dtype == LOOM_DTYPE_BF16 ? 0x7fc0 : 0x7e00;
    }
}

/// loom_rt_gemm_rounded and loom_rt_gemm_gelu on the CPU: the product in
/// tiles, each rounded (through its epilogue, `gelu`) as it is made.
void gemmRoundedTiles(int32_t dtype, int32_t trans_a, int32_t trans_b,
                      int64_t m, int64_t n, int64_t k, float alpha,
                      const void *a, int64_t lda, const void *b, int64_t ldb,
                      const void *bias, void *d, int64_t ldd,
                      int64_t block_bytes, int32_t gelu, void *aux,
                      int64_t ldaux, const void *addend = nullptr,
                      int64_t ldaddend = 0) {
  if (m <= 0 || n <= 0)
    return;
  if (dtype == LOOM_DTYPE_F32) {
    // Nothing to round to: the GEMM into D, then the bias.
    auto *c = static_cast<float *>(d);
    loom_rt_sgemm(trans_a, trans_b, m, n, k, alpha,
                  static_cast<const float *>(a), lda,
                  static_cast<const float *>(b), ldb, 0.0f, c, ldd);
    if (bias)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          c[i * ldd + j] += static_cast<const float *>(bias)[j];
    return;
  }
  // Tiles of C of loom_rt_gemm_blocked's blocks: each tile's GEMM makes
  // the SGEMM calls the whole product would make for it, so the sums, and
  // with them the rounded values, are those of loom_rt_gemm followed by
  // the rounding.
  size_t size = loom::elementSize(dtype);
  GemmBlocks blocks = gemmBlocks(m, n, k, block_bytes);
  int64_t mb = blocks.m, nb = blocks.n;
  thread_local std::vector<float> tile;
  tile.resize(mb * nb);
  const auto *aBytes = static_cast<const char *>(a);
  const auto *bBytes = static_cast<const char *>(b);
  for (int64_t i = 0; i < m; i += mb) {
    int64_t rows = std::min(mb, m - i);
    // Row i of op(A): a row of A, or a column of A read transposed.
    const char *ai = aBytes + (trans_a ? i : i * lda) * size;
    for (int64_t j = 0; j < n; j += nb) {
      int64_t cols = std::min(nb, n - j);
      const char *bj = bBytes + (trans_b ? j * ldb : j) * size;
      loom_rt_gemm_blocked(dtype, trans_a, trans_b, rows, cols, k, alpha, ai,
                           lda, bj, ldb, 0.0f, tile.data(), cols, block_bytes);
      RoundTile round{
          dtype,
          tile.data(),
          cols,
          bias ? static_cast<const uint16_t *>(bias) + j : nullptr,
          static_cast<uint16_t *>(d) + i * ldd + j,
          ldd,
          gelu,
          aux ? static_cast<uint16_t *>(aux) + i * ldaux + j : nullptr,
          ldaux,
          addend ? static_cast<const uint16_t *>(addend) + i * ldaddend + j
                 : nullptr,
          ldaddend};
      if (loom_get_num_threads() > 1 && !loom::isInParallelLoop() &&
          rows * cols >= kParallelRounding)
        loom_rt_parallel_for(roundTileRows, &round, 0, rows);
      else
        roundTileRows(&round, 0, rows);
    }
  }
}
} // namespace

extern "C" {

void loom_rt_gemm_rounded(int32_t dtype, int32_t trans_a, int32_t trans_b,
                          int64_t m, int64_t n, int64_t k, float alpha,
                          const void *a, int64_t lda, const void *b,
                          int64_t ldb, const void *bias, void *d, int64_t ldd) {
  loom_rt_gemm_rounded_blocked(dtype, trans_a, trans_b, m, n, k, alpha, a, lda,
                               b, ldb, bias, d, ldd, kGemmBlockBytes);
}

void loom_rt_gemm_rounded_blocked(int32_t dtype, int32_t trans_a,
                                  int32_t trans_b, int64_t m, int64_t n,
                                  int64_t k, float alpha, const void *a,
                                  int64_t lda, const void *b, int64_t ldb,
                                  const void *bias, void *d, int64_t ldd,
                                  int64_t block_bytes) {
  if (loom::cudaActive())
    return loom::cudaGemmRounded(dtype, trans_a, trans_b, m, n, k, alpha, a,
                                 lda, b, ldb, bias, d, ldd);
  gemmRoundedTiles(dtype, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                   bias, d, ldd, block_bytes, kNoGelu, nullptr, 0);
}

void loom_rt_gemm_add(int32_t dtype, int32_t trans_a, int32_t trans_b,
                      int64_t m, int64_t n, int64_t k, float alpha,
                      const void *a, int64_t lda, const void *b, int64_t ldb,
                      const void *bias, const void *c, int64_t ldc, void *d,
                      int64_t ldd) {
  loom_rt_gemm_add_blocked(dtype, trans_a, trans_b, m, n, k, alpha, a, lda, b,
                           ldb, bias, c, ldc, d, ldd, kGemmBlockBytes);
}

void loom_rt_gemm_add_blocked(int32_t dtype, int32_t trans_a, int32_t trans_b,
                              int64_t m, int64_t n, int64_t k, float alpha,
                              const void *a, int64_t lda, const void *b,
                              int64_t ldb, const void *bias, const void *c,
                              int64_t ldc, void *d, int64_t ldd,
                              int64_t block_bytes) {
  if (loom::cudaActive())
    return loom::cudaGemmAdd(dtype, trans_a, trans_b, m, n, k, alpha, a, lda, b,
                             ldb, bias, c, ldc, d, ldd);
  // What the GPU takes (the compiler emits nothing else); any other call
  // leaves NaN in D rather than values that look right.
  if (!loom::gemmAddTakes(dtype, m, n, c, ldc, d, ldd)) {
    fillNaN(dtype, m, n, d, ldd);
    return;
  }
  gemmRoundedTiles(dtype, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                   bias, d, ldd, block_bytes, kNoGelu, nullptr, 0, c, ldc);
}

void loom_rt_gemm_gelu(int32_t dtype, int32_t mode, int32_t trans_a,
                       int32_t trans_b, int64_t m, int64_t n, int64_t k,
                       float alpha, const void *a, int64_t lda, const void *b,
                       int64_t ldb, const void *bias, void *aux, int64_t ldaux,
                       void *d, int64_t ldd) {
  loom_rt_gemm_gelu_blocked(dtype, mode, trans_a, trans_b, m, n, k, alpha, a,
                            lda, b, ldb, bias, aux, ldaux, d, ldd,
                            kGemmBlockBytes);
}

void loom_rt_gemm_gelu_blocked(int32_t dtype, int32_t mode, int32_t trans_a,
                               int32_t trans_b, int64_t m, int64_t n, int64_t k,
                               float alpha, const void *a, int64_t lda,
                               const void *b, int64_t ldb, const void *bias,
                               void *aux, int64_t ldaux, void *d, int64_t ldd,
                               int64_t block_bytes) {
  if (loom::cudaActive())
    return loom::cudaGemmGelu(dtype, mode, trans_a, trans_b, m, n, k, alpha, a,
                              lda, b, ldb, bias, aux, ldaux, d, ldd);
  // What the GPU's epilogues take (the compiler emits nothing else); any
  // other call leaves NaN in D rather than values that look right.
  if ((dtype != LOOM_DTYPE_BF16 && dtype != LOOM_DTYPE_F16) ||
      (mode != LOOM_GELU_FORWARD && mode != LOOM_GELU_BACKWARD) ||
      (mode == LOOM_GELU_BACKWARD && bias) || ldaux % 8 != 0 || ldaux < n) {
    fillNaN(dtype, m, n, d, ldd);
    return;
  }
  gemmRoundedTiles(dtype, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                   bias, d, ldd, block_bytes, mode, aux, ldaux);
}

/// MLIR's memref-to-LLVM lowering calls this for copies between
/// non-contiguous views; it receives unranked descriptors:
/// {rank, pointer to {allocated, aligned, offset, sizes[rank],
/// strides[rank]}}.
struct UnrankedDescriptor {
  int64_t rank;
  void *descriptor;
};

void memrefCopy(int64_t elementSize, UnrankedDescriptor *src,
                UnrankedDescriptor *dst) {
  int64_t rank = src->rank;
  auto fieldsOf = [](UnrankedDescriptor *d) {
    return reinterpret_cast<int64_t *>(static_cast<char **>(d->descriptor) + 2);
  };
  char *srcBase = static_cast<char **>(src->descriptor)[1];
  char *dstBase = static_cast<char **>(dst->descriptor)[1];
  const int64_t *s = fieldsOf(src), *d = fieldsOf(dst);
  int64_t srcOffset = s[0], dstOffset = d[0];
  const int64_t *sizes = s + 1, *srcStrides = s + 1 + rank,
                *dstStrides = d + 1 + rank;
  if (rank == 0) {
    std::memcpy(dstBase + dstOffset * elementSize,
                srcBase + srcOffset * elementSize, elementSize);
    return;
  }
  for (int64_t i = 0; i < rank; ++i)
    if (sizes[i] == 0)
      return;
  // Odometer over all but the innermost dimension.
  int64_t index[16] = {};
  if (rank > 16)
    return;
  while (true) {
    int64_t so = srcOffset, dOff = dstOffset;
    for (int64_t i = 0; i + 1 < rank; ++i) {
      so += index[i] * srcStrides[i];
      dOff += index[i] * dstStrides[i];
    }
    int64_t inner = sizes[rank - 1];
    if (srcStrides[rank - 1] == 1 && dstStrides[rank - 1] == 1) {
      std::memcpy(dstBase + dOff * elementSize, srcBase + so * elementSize,
                  inner * elementSize);
    } else {
      for (int64_t j = 0; j < inner; ++j)
        std::memcpy(dstBase + (dOff + j * dstStrides[rank - 1]) * elementSize,
                    srcBase + (so + j * srcStrides[rank - 1]) * elementSize,
                    elementSize);
    }
    int64_t dim = rank - 2;
    while (dim >= 0 && ++index[dim] == sizes[dim])
      index[dim--] = 0;
    if (dim < 0)
      return;
  }
}

} // extern "C"
