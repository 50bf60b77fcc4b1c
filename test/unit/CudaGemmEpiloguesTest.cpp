//===- CudaGemmEpiloguesTest.cpp - cuBLASLt's GELU and add epilogues ------===//
//
// loom_rt_gemm_gelu on a GPU at the shapes of GPT-2's MLP, against sums in
// double of the same bf16 operands: forward, AUX is the rounded
// pre-activation and D its GELU; backward, D is the product times the
// GELU's derivative at AUX. loom_rt_gemm_add at the shape of an attention
// projection's GEMM: D is the product plus C plus the bias. cuBLASLt sums
// in another order than the CPU and computes its own tanh, so values agree
// to a unit or two in the last place, not bit for bit. Skipped without a
// GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaManaged.h"
#include "Float.h"
#include "GeluReference.h"

#include "loom/rt.h"
#include "gtest/gtest.h"

#include <cmath>
#include <random>

using namespace loom_test;

namespace {
class CudaGemmEpilogue : public CudaTest {};

float widenBf16(uint16_t bits) {
  return loom::bitsFloat(static_cast<uint32_t>(bits) << 16);
}

std::vector<uint16_t> randomBf16(std::mt19937 &rng, size_t count, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<uint16_t> v(count);
  for (uint16_t &x : v)
    x = loom::narrowBf16(dist(rng));
  return v;
}

/// Whether bf16 `bits` are `value` to a unit or two in the last place (or
/// 1e-4 near zero). An erf-based GELU, 4e-4 from the tanh one near -2.5,
/// would not pass.
bool near(uint16_t bits, double value) {
  return std::fabs(widenBf16(bits) - value) <=
         std::max(std::ldexp(std::fabs(value), -7), 1e-4);
}

// An [m, k] activation times a transposed [n, k] weight, as a linear map's
// GEMM is called: GPT-2's first MLP GEMM (k = 768, n = 3,072) on 256 rows.
constexpr int64_t kM = 256, kN = 3072, kK = 768;
} // namespace

TEST_F(CudaGemmEpilogue, ForwardWritesPreActivationAndGelu) {
  std::mt19937 rng(3);
  auto a = randomBf16(rng, kM * kK, 1.0f), b = randomBf16(rng, kN * kK, 0.1f),
       bias = randomBf16(rng, kN, 1.0f);
  ManagedCopy<uint16_t> da(a), db(b), dbias(bias), aux(kM * kN), d(kM * kN);
  ASSERT_TRUE(da.at && db.at && dbias.at && aux.at && d.at)
      << loom_last_error();
  loom_rt_gemm_gelu(LOOM_DTYPE_BF16, LOOM_GELU_FORWARD, 0, 1, kM, kN, kK, 1.0f,
                    da.at, kK, db.at, kK, dbias.at, aux.at, kN, d.at, kN);
  ASSERT_TRUE(loom::cudaSynchronize()) << loom_last_error();
  int64_t bad = 0;
  for (int64_t i = 0; i < kM; ++i)
    for (int64_t j = 0; j < kN; ++j) {
      double x = widenBf16(bias[j]);
      for (int64_t p = 0; p < kK; ++p)
        x += double(widenBf16(a[i * kK + p])) * widenBf16(b[j * kK + p]);
      if (!near(aux.at[i * kN + j], x) ||
          !near(d.at[i * kN + j], geluReference(x)))
        if (++bad <= 5)
          ADD_FAILURE() << i << "," << j << ": aux "
                        << widenBf16(aux.at[i * kN + j]) << ", gelu "
                        << widenBf16(d.at[i * kN + j]) << " for " << x;
    }
  EXPECT_EQ(bad, 0);
}

TEST_F(CudaGemmEpilogue, BackwardMultipliesByTheDerivative) {
  std::mt19937 rng(4);
  // The gradient of the MLP's output times its second weight: [m, 768]
  // times a [768, 3,072] matrix read transposed.
  auto a = randomBf16(rng, kM * kK, 1.0f), b = randomBf16(rng, kN * kK, 0.1f),
       pre = randomBf16(rng, kM * kN, 4.0f);
  ManagedCopy<uint16_t> da(a), db(b), aux(pre), d(kM * kN);
  ASSERT_TRUE(da.at && db.at && aux.at && d.at) << loom_last_error();
  loom_rt_gemm_gelu(LOOM_DTYPE_BF16, LOOM_GELU_BACKWARD, 0, 1, kM, kN, kK, 1.0f,
                    da.at, kK, db.at, kK, nullptr, aux.at, kN, d.at, kN);
  ASSERT_TRUE(loom::cudaSynchronize()) << loom_last_error();
  int64_t bad = 0;
  for (int64_t i = 0; i < kM; ++i)
    for (int64_t j = 0; j < kN; ++j) {
      double g = 0;
      for (int64_t p = 0; p < kK; ++p)
        g += double(widenBf16(a[i * kK + p])) * widenBf16(b[j * kK + p]);
      double expected = g * geluGradReference(widenBf16(pre[i * kN + j]));
      if (!near(d.at[i * kN + j], expected) && ++bad <= 5)
        ADD_FAILURE() << i << "," << j << ": " << widenBf16(d.at[i * kN + j])
                      << " for " << expected;
    }
  EXPECT_EQ(bad, 0);
}

// The residual add after attention's projection: [m, 768] activations times
// a transposed [768, 768] weight, plus the bias, plus the residual stream C
// beside D. (With C in D's buffer, an H100's cuBLASLt added the product
// rounded to bf16: 7,591 of these 196,608 sums were off by more than two
// units in the last place; the runtime refuses C overlapping D.)
TEST_F(CudaGemmEpilogue, AddTakesC) {
  std::mt19937 rng(5);
  const int64_t n = 768;
  auto a = randomBf16(rng, kM * kK, 1.0f), b = randomBf16(rng, n * kK, 0.1f),
       bias = randomBf16(rng, n, 1.0f), c = randomBf16(rng, kM * n, 4.0f);
  ManagedCopy<uint16_t> da(a), db(b), dbias(bias), dc(c), d(kM * n);
  ASSERT_TRUE(da.at && db.at && dbias.at && dc.at && d.at) << loom_last_error();
  loom_rt_gemm_add(LOOM_DTYPE_BF16, 0, 1, kM, n, kK, 1.0f, da.at, kK, db.at, kK,
                   dbias.at, dc.at, n, d.at, n);
  ASSERT_TRUE(loom::cudaSynchronize()) << loom_last_error();
  int64_t bad = 0;
  for (int64_t i = 0; i < kM; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double x = double(widenBf16(c[i * n + j])) + widenBf16(bias[j]);
      for (int64_t p = 0; p < kK; ++p)
        x += double(widenBf16(a[i * kK + p])) * widenBf16(b[j * kK + p]);
      if (!near(d.at[i * n + j], x) && ++bad <= 5)
        ADD_FAILURE() << i << "," << j << ": " << widenBf16(d.at[i * n + j])
                      << " for " << x;
    }
  EXPECT_EQ(bad, 0);
}
