//===- AttentionTest.cpp - The runtime's fused attention on the CPU -------===//

#include "AttentionReference.h"
#include "loom/rt.h"

#include <cstring>

using namespace loom_test;

namespace {
/// Sequences that end inside a block of 64 queries and span several;
/// grouped-query attention with groups of several query heads, one head
/// (multi-query) and one query head a group.
const std::vector<Problem> kProblems = {{2, 70, 3, 8},      {1, 129, 2, 16},
                                        {3, 5, 1, 4},       {2, 70, 6, 8, 2},
                                        {1, 129, 4, 16, 1}, {2, 9, 2, 4, 2}};

AttentionResult runOnCpu(const Problem &p, int32_t dtype,
                         const std::vector<uint8_t> &qkv,
                         const std::vector<uint8_t> &dout, float lseShift) {
  size_t bytes = elementBytes(dtype), rows = p.batch * p.heads * p.seq;
  AttentionResult r{std::vector<uint8_t>(p.outSize() * bytes),
                    std::vector<uint8_t>(p.qkvSize() * bytes),
                    std::vector<float>(rows)};
  std::vector<float> delta(rows);
  loom_rt_attention(dtype, p.batch, p.seq, p.heads, p.groups, p.dim, qkv.data(),
                    r.out.data(), r.lse.data());
  std::vector<float> lse(r.lse);
  for (float &x : lse)
    x += lseShift;
  loom_rt_attention_grad(dtype, p.batch, p.seq, p.heads, p.groups, p.dim,
                         qkv.data(), r.out.data(), dout.data(), lse.data(),
                         r.dqkv.data(), delta.data());
  return r;
}

/// The CPU computes in f32 on the stored values.
void checkAttention(int32_t dtype, double tolerance) {
  loom_test::checkAttention(dtype, {tolerance, 1e-5}, kProblems, runOnCpu);
}
} // namespace

TEST(RuntimeAttention, F32MatchesReference) {
  checkAttention(LOOM_DTYPE_F32, 2e-5);
}

// bf16 and f16 storage: the arithmetic is f32 on the stored values, the
// results rounded once (8 and 11 bits of mantissa), and the backward pass
// reads the rounded output.
TEST(RuntimeAttention, Bf16MatchesReference) {
  checkAttention(LOOM_DTYPE_BF16, 2e-2);
}
TEST(RuntimeAttention, F16MatchesReference) {
  checkAttention(LOOM_DTYPE_F16, 3e-3);
}

#ifdef __FLT16_MAX__
/// The runtime's f32 to f16 rounding is the compiler's, for every
/// exponent's edges, subnormals, ties, overflow and NaN.
TEST(RuntimeFloat, NarrowHalfMatchesCompiler) {
  std::mt19937 rng(3);
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               65504.0f,
                               65519.0f,
                               65520.0f,
                               1e6f,
                               -1e6f,
                               6.1e-5f,
                               5.96e-8f,
                               2.98e-8f,
                               2.99e-8f,
                               1e-10f,
                               INFINITY,
                               NAN,
                               1.00048828125f,
                               1.0009765625f + 0.00048828125f};
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    values.push_back(loom::bitsFloat(bits));
  }
  for (float v : values) {
    _Float16 h = static_cast<_Float16>(v);
    uint16_t expected;
    std::memcpy(&expected, &h, sizeof(expected));
    uint16_t actual = loom::narrowHalf(v);
    if (std::isnan(v)) {
      EXPECT_TRUE((actual & 0x7c00u) == 0x7c00u && (actual & 0x3ffu));
      continue;
    }
    ASSERT_EQ(actual, expected) << "value " << v;
    ASSERT_EQ(loom::loadElement(LOOM_DTYPE_F16, &actual, 0),
              static_cast<float>(h));
  }
}
#endif

/// bf16 rounding ties to even and keeps NaN a NaN.
TEST(RuntimeFloat, NarrowBf16RoundsToNearestEven) {
  EXPECT_EQ(loom::narrowBf16(1.0f), 0x3f80);
  EXPECT_EQ(loom::narrowBf16(loom::bitsFloat(0x3f808000u)), 0x3f80); // tie
  EXPECT_EQ(loom::narrowBf16(loom::bitsFloat(0x3f818000u)), 0x3f82); // tie
  EXPECT_EQ(loom::narrowBf16(loom::bitsFloat(0x3f808001u)), 0x3f81);
  EXPECT_EQ(loom::narrowBf16(loom::bitsFloat(0x7f7fffffu)), 0x7f80);
  uint16_t nan = loom::narrowBf16(NAN);
  EXPECT_TRUE((nan & 0x7f80u) == 0x7f80u && (nan & 0x7fu));
}
