//===- GemmTest.cpp - The runtime's GEMMs of bf16 and f16 matrices --------===//

#include "GeluReference.h"
#include "loom/rt.h"
#include "loom/runtime.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

using loom_test::geluGradReference;
using loom_test::geluReference;

namespace {
uint16_t toBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16);
}

float fromBf16(uint16_t value) {
  uint32_t bits = static_cast<uint32_t>(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

/// bf16 or f16 bits in f32, and f32 rounded to them (to nearest, ties to
/// even; the values here are finite): the compiler's arith.extf and
/// arith.truncf.
float widen(int32_t dtype, uint16_t bits) {
  if (dtype == LOOM_DTYPE_BF16)
    return fromBf16(bits);
  _Float16 half;
  std::memcpy(&half, &bits, sizeof(half));
  return static_cast<float>(half);
}

uint16_t narrow(int32_t dtype, float value) {
  uint16_t bits;
  if (dtype == LOOM_DTYPE_F16) {
    auto half = static_cast<_Float16>(value);
    std::memcpy(&bits, &half, sizeof(bits));
    return bits;
  }
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  uint32_t lower = word & 0xffffu, upper = word >> 16;
  if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u)))
    ++upper;
  return static_cast<uint16_t>(upper);
}

/// A stored `rows` x `cols` bf16 matrix with leading dimension `ld`, its
/// padding filled with NaN, which must never be read.
std::vector<uint16_t> randomMatrix(std::mt19937 &rng, int64_t rows,
                                   int64_t cols, int64_t ld) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint16_t> m(rows * ld, 0x7fc0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      m[i * ld + j] = toBf16(dist(rng));
  return m;
}

/// The operands of an m x n x k product, A and B stored transposed where
/// asked, with padded leading dimensions.
struct Operands {
  std::vector<uint16_t> a;
  int64_t lda;
  std::vector<uint16_t> b;
  int64_t ldb;
};

Operands randomOperands(std::mt19937 &rng, int64_t m, int64_t n, int64_t k,
                        int transA, int transB) {
  int64_t lda = (transA ? m : k) + 2, ldb = (transB ? k : n) + 3;
  auto a = randomMatrix(rng, transA ? k : m, transA ? m : k, lda);
  auto b = randomMatrix(rng, transB ? n : k, transB ? k : n, ldb);
  return {std::move(a), lda, std::move(b), ldb};
}

/// Every combination of transpositions, with blocks from one row or column
/// to the whole operand and over one or several blocks of k, against sums
/// in double of the widened values.
TEST(RuntimeGemm, Bf16MatchesWidenedProduct) {
  std::mt19937 rng(7);
  const int64_t m = 13, n = 11;
  // k = 1100 spans three blocks over k.
  for (int64_t k : {int64_t(9), int64_t(1100)})
    for (int transA : {0, 1})
      for (int transB : {0, 1})
        for (int64_t blockBytes :
             {int64_t(1), int64_t(3 * k * 4), int64_t(4) << 20}) {
          auto [a, lda, b, ldb] = randomOperands(rng, m, n, k, transA, transB);
          int64_t ldc = n + 1;
          std::vector<float> c(m * ldc, 0.5f);
          loom_rt_gemm_blocked(LOOM_DTYPE_BF16, transA, transB, m, n, k, 2.0f,
                               a.data(), lda, b.data(), ldb, 1.0f, c.data(),
                               ldc, blockBytes);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double sum = 0;
              for (int64_t p = 0; p < k; ++p)
                sum +=
                    double(fromBf16(transA ? a[p * lda + i] : a[i * lda + p])) *
                    fromBf16(transB ? b[j * ldb + p] : b[p * ldb + j]);
              EXPECT_NEAR(c[i * ldc + j], 2.0 * sum + 0.5, 1e-4)
                  << "transA " << transA << " transB " << transB << " block "
                  << blockBytes << " at " << i << "," << j;
            }
          // The column of padding in C is left alone.
          for (int64_t i = 0; i < m; ++i)
            EXPECT_EQ(c[i * ldc + n], 0.5f);
        }
}

/// loom_rt_gemm_rounded equals loom_rt_gemm followed by the bias and the
/// rounding, bit for bit, for the same block size: every transposition,
/// with and without a bias, bf16 and f16, tiles from one element to the
/// whole product, one or several blocks of k. (Products of other tiles may
/// differ in their last bit: an SGEMM's order of sums can depend on its
/// shape, as OpenBLAS's AVX-512 kernels' does.) D's padding is left
/// alone.
TEST(RuntimeGemm, RoundedMatchesGemmThenRounding) {
  std::mt19937 rng(5);
  const int64_t m = 13, n = 11;
  for (int32_t dtype : {LOOM_DTYPE_BF16, LOOM_DTYPE_F16})
    for (int64_t k : {int64_t(9), int64_t(1100)})
      for (int transA : {0, 1})
        for (int transB : {0, 1})
          for (bool withBias : {false, true})
            for (int64_t blockBytes :
                 {int64_t(1), int64_t(3 * k * 4), int64_t(4) << 20}) {
              // bf16 bit patterns of values in [-1, 1] are f16 values in
              // [-2, 2] or tiny ones: either way finite.
              auto [a, lda, b, ldb] =
                  randomOperands(rng, m, n, k, transA, transB);
              int64_t ldd = n + 1;
              auto bias = randomMatrix(rng, 1, n, n);
              std::vector<float> c(m * n);
              loom_rt_gemm_blocked(dtype, transA, transB, m, n, k, 0.5f,
                                   a.data(), lda, b.data(), ldb, 0.0f, c.data(),
                                   n, blockBytes);
              std::vector<uint16_t> expected(m * ldd, 0x7fc0), d(expected);
              for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j)
                  expected[i * ldd + j] = narrow(
                      dtype,
                      c[i * n + j] + (withBias ? widen(dtype, bias[j]) : 0.0f));
              loom_rt_gemm_rounded_blocked(dtype, transA, transB, m, n, k, 0.5f,
                                           a.data(), lda, b.data(), ldb,
                                           withBias ? bias.data() : nullptr,
                                           d.data(), ldd, blockBytes);
              EXPECT_EQ(expected, d)
                  << "dtype " << dtype << " k " << k << " transA " << transA
                  << " transB " << transB << " bias " << withBias << " block "
                  << blockBytes;
            }
}

/// Whether narrow `bits` hold `value` rounded: within one unit in its last
/// place (f32 arithmetic may round the other way near a tie).
bool isRounding(int32_t dtype, uint16_t bits, double value) {
  double ulp = std::ldexp(std::max(std::fabs(value), 1e-3),
                          dtype == LOOM_DTYPE_BF16 ? -7 : -10);
  return std::fabs(widen(dtype, bits) - value) <= ulp;
}

/// Runs `check(dtype, transA, transB, withBias, blockBytes)` for each case
/// the epilogues' tests cover: bf16 and f16, every transposition, with and
/// without a bias, tiles from one element to the whole product.
template <typename F> void forEachEpilogueCase(F check) {
  for (int32_t dtype : {LOOM_DTYPE_BF16, LOOM_DTYPE_F16})
    for (int transA : {0, 1})
      for (int transB : {0, 1})
        for (bool withBias : {false, true})
          for (int64_t blockBytes : {int64_t(1), int64_t(4) << 20}) {
            SCOPED_TRACE(testing::Message()
                         << "dtype " << dtype << " transA " << transA
                         << " transB " << transB << " bias " << withBias
                         << " block " << blockBytes);
            check(dtype, transA, transB, withBias, blockBytes);
          }
}

/// loom_rt_gemm_gelu's epilogues on loom_rt_gemm's product, every
/// transposition, bf16 and f16, tiles from one element to the whole
/// product: forward, AUX is the rounded sum with the bias (bit for bit)
/// and D its GELU; backward, D is the product times the derivative at
/// AUX. D's and AUX's padding is left alone.
TEST(RuntimeGemm, GeluEpilogues) {
  std::mt19937 rng(11);
  const int64_t m = 13, n = 11, k = 300, ld = 16;
  std::uniform_real_distribution<float> preActivation(-4.0f, 4.0f);
  forEachEpilogueCase([&](int32_t dtype, int transA, int transB, bool withBias,
                          int64_t blockBytes) {
    auto [a, lda, b, ldb] = randomOperands(rng, m, n, k, transA, transB);
    auto bias = randomMatrix(rng, 1, n, n);
    std::vector<float> c(m * n);
    loom_rt_gemm_blocked(dtype, transA, transB, m, n, k, 1.0f, a.data(), lda,
                         b.data(), ldb, 0.0f, c.data(), n, blockBytes);
    std::vector<uint16_t> aux(m * ld, 0x7fc0), d(m * ld, 0x7fc0);
    loom_rt_gemm_gelu_blocked(dtype, LOOM_GELU_FORWARD, transA, transB, m, n, k,
                              1.0f, a.data(), lda, b.data(), ldb,
                              withBias ? bias.data() : nullptr, aux.data(), ld,
                              d.data(), ld, blockBytes);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < ld; ++j) {
        if (j >= n) {
          EXPECT_EQ(aux[i * ld + j], 0x7fc0);
          EXPECT_EQ(d[i * ld + j], 0x7fc0);
          continue;
        }
        float x = c[i * n + j] + (withBias ? widen(dtype, bias[j]) : 0.0f);
        EXPECT_EQ(aux[i * ld + j], narrow(dtype, x)) << i << "," << j;
        EXPECT_TRUE(isRounding(dtype, d[i * ld + j], geluReference(x)))
            << i << "," << j << ": " << widen(dtype, d[i * ld + j])
            << " for gelu(" << x << ")";
      }
    if (withBias)
      return;
    // Backward: AUX holds pre-activations across the GELU's bend.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        aux[i * ld + j] = narrow(dtype, preActivation(rng));
    std::fill(d.begin(), d.end(), 0x7fc0);
    loom_rt_gemm_gelu_blocked(dtype, LOOM_GELU_BACKWARD, transA, transB, m, n,
                              k, 1.0f, a.data(), lda, b.data(), ldb, nullptr,
                              aux.data(), ld, d.data(), ld, blockBytes);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < ld; ++j) {
        if (j >= n) {
          EXPECT_EQ(d[i * ld + j], 0x7fc0);
          continue;
        }
        double expected =
            c[i * n + j] * geluGradReference(widen(dtype, aux[i * ld + j]));
        EXPECT_TRUE(isRounding(dtype, d[i * ld + j], expected))
            << i << "," << j << ": " << widen(dtype, d[i * ld + j]) << " for "
            << expected;
      }
  });
}

/// Arguments the GPU's epilogues do not take leave NaN in D on the CPU, not
/// values that look right: an f32 product, an unknown mode, a bias with
/// the backward mode, AUX's leading dimension not a multiple of 8.
TEST(RuntimeGemm, GeluRefusesOtherArguments) {
  std::mt19937 rng(13);
  const int64_t m = 4, n = 8, k = 5;
  auto [a, lda, b, ldb] = randomOperands(rng, m, n, k, 0, 0);
  auto bias = randomMatrix(rng, 1, n, n);
  std::vector<uint16_t> aux(m * n, 0);
  struct Case {
    int32_t mode;
    bool withBias;
    int64_t ldaux;
  } cases[] = {{2, false, n},
               {LOOM_GELU_BACKWARD, true, n},
               {LOOM_GELU_FORWARD, false, n + 1}};
  for (const Case &c : cases) {
    std::vector<uint16_t> d(m * n, 0);
    std::vector<uint16_t> wideAux(m * (n + 1), 0);
    loom_rt_gemm_gelu(LOOM_DTYPE_BF16, c.mode, 0, 0, m, n, k, 1.0f, a.data(),
                      lda, b.data(), ldb, c.withBias ? bias.data() : nullptr,
                      wideAux.data(), c.ldaux, d.data(), n);
    for (uint16_t x : d)
      EXPECT_TRUE(std::isnan(fromBf16(x))) << "mode " << c.mode;
  }
  std::vector<float> a32(m * k, 1.0f), b32(k * n, 1.0f), d32(m * n, 0.0f);
  loom_rt_gemm_gelu(LOOM_DTYPE_F32, LOOM_GELU_FORWARD, 0, 0, m, n, k, 1.0f,
                    a32.data(), k, b32.data(), n, nullptr, aux.data(), n,
                    d32.data(), n);
  for (float x : d32)
    EXPECT_TRUE(std::isnan(x));
}

/// loom_rt_gemm_add: D is the product plus C, then the bias, rounded once,
/// bit for bit in f32 from loom_rt_gemm's sums, every transposition, bf16
/// and f16, tiles from one element to the whole product; C with its own
/// leading dimension. D's padding is left alone.
TEST(RuntimeGemm, AddEpilogue) {
  std::mt19937 rng(17);
  const int64_t m = 13, n = 11, k = 300, ldd = 16, ldc = 12;
  forEachEpilogueCase([&](int32_t dtype, int transA, int transB, bool withBias,
                          int64_t blockBytes) {
    auto [a, lda, b, ldb] = randomOperands(rng, m, n, k, transA, transB);
    auto bias = randomMatrix(rng, 1, n, n);
    auto addend = randomMatrix(rng, m, n, ldc);
    std::vector<float> c(m * n);
    loom_rt_gemm_blocked(dtype, transA, transB, m, n, k, 0.5f, a.data(), lda,
                         b.data(), ldb, 0.0f, c.data(), n, blockBytes);
    std::vector<uint16_t> expected(m * ldd, 0x7fc0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float x = c[i * n + j] + widen(dtype, addend[i * ldc + j]);
        expected[i * ldd + j] =
            narrow(dtype, withBias ? x + widen(dtype, bias[j]) : x);
      }
    std::vector<uint16_t> d(m * ldd, 0x7fc0);
    loom_rt_gemm_add_blocked(dtype, transA, transB, m, n, k, 0.5f, a.data(),
                             lda, b.data(), ldb,
                             withBias ? bias.data() : nullptr, addend.data(),
                             ldc, d.data(), ldd, blockBytes);
    EXPECT_EQ(expected, d);
  });
}

/// Arguments the GPU does not take leave NaN in D on the CPU: an f32
/// product, no C, C's leading dimension below n, and C sharing memory with
/// D: D itself, one row below it, or its first or last element alone.
TEST(RuntimeGemm, AddRefusesOtherArguments) {
  std::mt19937 rng(19);
  const int64_t m = 4, n = 8, k = 5;
  auto [a, lda, b, ldb] = randomOperands(rng, m, n, k, 0, 0);
  auto addend = randomMatrix(rng, m, n + 1, n + 1);
  // D in the middle of a buffer of three times its size, C around it.
  std::vector<uint16_t> buffer;
  uint16_t *d = nullptr;
  struct Case {
    const char *what;
    std::function<const void *()> c;
    int64_t ldc;
  } cases[] = {{"no C", [] { return nullptr; }, n},
               {"ldc below n", [&] { return addend.data(); }, n - 1},
               {"D itself", [&] { return d; }, n},
               {"a row below D", [&] { return d + n; }, n},
               {"D's last element", [&] { return d + m * n - 1; }, n},
               {"D's first element", [&] { return d - m * n + 1; }, n}};
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    buffer.assign(3 * m * n, 0);
    d = buffer.data() + m * n;
    loom_rt_gemm_add(LOOM_DTYPE_BF16, 0, 0, m, n, k, 1.0f, a.data(), lda,
                     b.data(), ldb, nullptr, c.c(), c.ldc, d, n);
    for (int64_t i = 0; i < m * n; ++i)
      EXPECT_TRUE(std::isnan(fromBf16(d[i]))) << i;
  }
  // Right before D and right after it, C is taken.
  for (int64_t shift : {-m * n, m * n}) {
    buffer.assign(3 * m * n, 0);
    d = buffer.data() + m * n;
    loom_rt_gemm_add(LOOM_DTYPE_BF16, 0, 0, m, n, k, 1.0f, a.data(), lda,
                     b.data(), ldb, nullptr, d + shift, n, d, n);
    for (int64_t i = 0; i < m * n; ++i)
      EXPECT_FALSE(std::isnan(fromBf16(d[i]))) << "shift " << shift;
  }
  std::vector<float> a32(m * k, 1.0f), b32(k * n, 1.0f), c32(m * n, 1.0f),
      d32(m * n, 0.0f);
  loom_rt_gemm_add(LOOM_DTYPE_F32, 0, 0, m, n, k, 1.0f, a32.data(), k,
                   b32.data(), n, nullptr, c32.data(), n, d32.data(), n);
  for (float x : d32)
    EXPECT_TRUE(std::isnan(x));
}

/// With k = 0 there are no products: C becomes beta C (zeros for beta =
/// 0, whatever it held), for every transposition.
TEST(RuntimeGemm, EmptySumScalesC) {
  for (int transA : {0, 1})
    for (int transB : {0, 1})
      for (float beta : {0.0f, 2.0f}) {
        std::vector<float> c(2 * 3, std::nanf(""));
        if (beta != 0.0f)
          c.assign(2 * 3, 1.5f);
        uint16_t none = 0;
        loom_rt_gemm(LOOM_DTYPE_BF16, transA, transB, 2, 3, 0, 1.0f, &none,
                     transA ? 2 : 1, &none, transB ? 1 : 3, beta, c.data(), 3);
        for (float value : c)
          EXPECT_EQ(value, beta == 0.0f ? 0.0f : 3.0f)
              << "transA " << transA << " transB " << transB;
      }
}

/// f16's special values widen exactly: 1 x 1 products by one.
TEST(RuntimeGemm, F16WidensExactly) {
  const uint16_t one = 0x3c00;
  struct Case {
    uint16_t bits;
    float value;
  } cases[] = {
      {0x3c00, 1.0f},
      {0xc000, -2.0f},
      {0x7bff, 65504.0f},
      {0x0400, std::ldexp(1.0f, -14)},
      {0x0001, std::ldexp(1.0f, -24)},
      {0x03ff, std::ldexp(1023.0f, -24)},
      {0x7c00, std::numeric_limits<float>::infinity()},
      {0xfc00, -std::numeric_limits<float>::infinity()},
  };
  for (const Case &t : cases) {
    float c = 0.0f;
    loom_rt_gemm(LOOM_DTYPE_F16, 0, 0, 1, 1, 1, 1.0f, &t.bits, 1, &one, 1, 0.0f,
                 &c, 1);
    EXPECT_EQ(c, t.value) << std::hex << t.bits;
  }
  uint16_t nan = 0x7e00;
  float c = 0.0f;
  loom_rt_gemm(LOOM_DTYPE_F16, 0, 0, 1, 1, 1, 1.0f, &nan, 1, &one, 1, 0.0f, &c,
               1);
  EXPECT_TRUE(std::isnan(c));
}
} // namespace

namespace {
/// A batch of 2 x 3 GEMMs on interleaved views, as attention's heads are:
/// each GEMM of the batch equals the same GEMM called alone, bit for bit,
/// and writes only its own part of C.
TEST(RuntimeGemm, BatchedMatchesEachGemm) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // [2, T=5, 3 heads, D=4] operands, C [2, 3, 5, 5].
  const int64_t batch = 2, seq = 5, heads = 3, dim = 4;
  std::vector<float> q(batch * seq * heads * dim), k(q.size());
  for (float &x : q)
    x = dist(rng);
  for (float &x : k)
    x = dist(rng);
  const int64_t ld = heads * dim;
  std::vector<float> batched(batch * heads * seq * seq, 0.25f), alone(batched);
  loom_rt_gemm_batched(LOOM_DTYPE_F32, 0, 1, seq, seq, dim, 1.5f, q.data(), ld,
                       k.data(), ld, 1.0f, batched.data(), seq, batch, seq * ld,
                       seq * ld, heads * seq * seq, heads, dim, dim, seq * seq);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      loom_rt_sgemm(0, 1, seq, seq, dim, 1.5f,
                    q.data() + b * seq * ld + h * dim, ld,
                    k.data() + b * seq * ld + h * dim, ld, 1.0f,
                    alone.data() + (b * heads + h) * seq * seq, seq);
  EXPECT_EQ(0, std::memcmp(batched.data(), alone.data(),
                           batched.size() * sizeof(float)));
  // An empty batch writes nothing.
  std::vector<float> untouched(batched);
  loom_rt_gemm_batched(LOOM_DTYPE_F32, 0, 1, seq, seq, dim, 1.0f, q.data(), ld,
                       k.data(), ld, 0.0f, batched.data(), seq, 0, 0, 0, 0,
                       heads, dim, dim, seq * seq);
  EXPECT_EQ(untouched, batched);
}
} // namespace
