//===- AttentionTest.cpp - The runtime's fused attention on the CPU -------===//

#include "Float.h"
#include "loom/runtime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {
/// Attention's shapes, and its tensors in f64 for the reference.
struct Problem {
  int64_t batch, seq, heads, dim;
  int64_t qkvSize() const { return batch * seq * 3 * heads * dim; }
  int64_t outSize() const { return batch * seq * heads * dim; }
  int64_t qkvAt(int64_t b, int64_t t, int64_t part, int64_t h,
                int64_t d) const {
    return (((b * seq + t) * 3 + part) * heads + h) * dim + d;
  }
  int64_t outAt(int64_t b, int64_t t, int64_t h, int64_t d) const {
    return ((b * seq + t) * heads + h) * dim + d;
  }
};

/// Causal attention and its gradient by the textbook formulas, in f64.
void reference(const Problem &p, const std::vector<double> &qkv,
               const std::vector<double> &dout, std::vector<double> &out,
               std::vector<double> &lse, std::vector<double> &dqkv) {
  double scale = 1.0 / std::sqrt(static_cast<double>(p.dim));
  out.assign(p.outSize(), 0.0);
  lse.assign(p.batch * p.heads * p.seq, 0.0);
  dqkv.assign(p.qkvSize(), 0.0);
  std::vector<double> probs(p.seq), dprobs(p.seq);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads; ++h)
      for (int64_t i = 0; i < p.seq; ++i) {
        double max = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (int64_t d = 0; d < p.dim; ++d)
            s += qkv[p.qkvAt(b, i, 0, h, d)] * qkv[p.qkvAt(b, j, 1, h, d)];
          probs[j] = s * scale;
          max = std::max(max, probs[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j)
          sum += probs[j] = std::exp(probs[j] - max);
        lse[(b * p.heads + h) * p.seq + i] = max + std::log(sum);
        double rowDot = 0;
        for (int64_t j = 0; j <= i; ++j) {
          probs[j] /= sum;
          dprobs[j] = 0;
          for (int64_t d = 0; d < p.dim; ++d) {
            out[p.outAt(b, i, h, d)] += probs[j] * qkv[p.qkvAt(b, j, 2, h, d)];
            dprobs[j] +=
                dout[p.outAt(b, i, h, d)] * qkv[p.qkvAt(b, j, 2, h, d)];
          }
          rowDot += probs[j] * dprobs[j];
        }
        for (int64_t j = 0; j <= i; ++j) {
          double ds = probs[j] * (dprobs[j] - rowDot) * scale;
          for (int64_t d = 0; d < p.dim; ++d) {
            dqkv[p.qkvAt(b, i, 0, h, d)] += ds * qkv[p.qkvAt(b, j, 1, h, d)];
            dqkv[p.qkvAt(b, j, 1, h, d)] += ds * qkv[p.qkvAt(b, i, 0, h, d)];
            dqkv[p.qkvAt(b, j, 2, h, d)] +=
                probs[j] * dout[p.outAt(b, i, h, d)];
          }
        }
      }
}

/// Random values stored as `dtype`, and the stored values in f64.
std::vector<uint8_t> randomTensor(std::mt19937 &rng, int32_t dtype,
                                  int64_t size, double range,
                                  std::vector<double> &values) {
  std::uniform_real_distribution<float> dist(-range, range);
  size_t bytes = dtype == LOOM_DTYPE_F32 ? 4 : 2;
  std::vector<uint8_t> data(size * bytes);
  values.resize(size);
  for (int64_t i = 0; i < size; ++i) {
    loom::storeElement(dtype, data.data(), i, dist(rng));
    values[i] = loom::loadElement(dtype, data.data(), i);
  }
  return data;
}

void expectClose(int32_t dtype, const std::vector<uint8_t> &actual,
                 const std::vector<double> &expected, double tolerance,
                 const char *what) {
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_NEAR(loom::loadElement(dtype, actual.data(), i), expected[i],
                tolerance * (1.0 + std::abs(expected[i])))
        << what << " element " << i;
}

/// Forward and backward against the reference, with sequences that end
/// inside a block of 64 queries and span several.
void checkAttention(int32_t dtype, double tolerance) {
  std::mt19937 rng(11);
  for (Problem p :
       {Problem{2, 70, 3, 8}, Problem{1, 129, 2, 16}, Problem{3, 5, 1, 4}}) {
    std::vector<double> qkv, dout, out, lse, dqkv;
    auto qkvData = randomTensor(rng, dtype, p.qkvSize(), 2.0, qkv);
    auto doutData = randomTensor(rng, dtype, p.outSize(), 1.0, dout);
    reference(p, qkv, dout, out, lse, dqkv);

    size_t bytes = dtype == LOOM_DTYPE_F32 ? 4 : 2;
    std::vector<uint8_t> outData(p.outSize() * bytes),
        dqkvData(p.qkvSize() * bytes);
    std::vector<float> lseData(lse.size()), gradLse(lse.size()),
        delta(lse.size());
    loom_rt_attention(dtype, p.batch, p.seq, p.heads, p.dim, qkvData.data(),
                      outData.data(), lseData.data());
    expectClose(dtype, outData, out, tolerance, "output");
    for (size_t i = 0; i < lse.size(); ++i)
      ASSERT_NEAR(lseData[i], lse[i], 1e-5 * (1.0 + std::abs(lse[i])))
          << "log-sum-exp " << i;
    loom_rt_attention_grad(dtype, p.batch, p.seq, p.heads, p.dim,
                           qkvData.data(), outData.data(), doutData.data(),
                           dqkvData.data(), gradLse.data(), delta.data());
    expectClose(dtype, dqkvData, dqkv, tolerance, "gradient");
    // The backward pass's own log-sum-exp is the forward's.
    for (size_t i = 0; i < lse.size(); ++i)
      ASSERT_NEAR(gradLse[i], lseData[i], 1e-6 * (1.0 + std::abs(lse[i])))
          << "backward log-sum-exp " << i;
  }
}

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
} // namespace
