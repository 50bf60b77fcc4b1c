//===- AttentionReference.h - Fused attention against f64 -------*- C++ -*-===//
//
// The textbook causal attention in f64 and the check of the runtime's
// fused attention against it, shared by the CPU's tests (AttentionTest.cpp)
// and the GPU's (CudaAttentionTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_ATTENTIONREFERENCE_H
#define LOOM_TEST_UNIT_ATTENTIONREFERENCE_H

#include "Float.h"
#include "loom/runtime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace loom_test {
/// Attention's shapes, and its tensors in f64 for the reference.
struct Problem {
  int64_t batch, seq, heads, dim;
  /// Key/value heads under grouped-query attention (rt.h's layout); 0:
  /// every head's queries, keys and values.
  int64_t groups = 0;
  int64_t rowHeads() const {
    return groups ? groups * (heads / groups + 2) : 3 * heads;
  }
  int64_t qkvSize() const { return batch * seq * rowHeads() * dim; }
  int64_t outSize() const { return batch * seq * heads * dim; }
  /// Element d of part `part` (0: queries, 1: keys, 2: values) that query
  /// head h reads at token t.
  int64_t qkvAt(int64_t b, int64_t t, int64_t part, int64_t h,
                int64_t d) const {
    int64_t column = part * heads + h;
    if (groups) {
      int64_t r = heads / groups;
      column = h / r * (r + 2) + (part == 0 ? h % r : r + part - 1);
    }
    return ((b * seq + t) * rowHeads() + column) * dim + d;
  }
  int64_t outAt(int64_t b, int64_t t, int64_t h, int64_t d) const {
    return ((b * seq + t) * heads + h) * dim + d;
  }
};

/// Causal attention and its gradient by the textbook formulas, in f64.
inline void reference(const Problem &p, const std::vector<double> &qkv,
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
inline std::vector<uint8_t> randomTensor(std::mt19937 &rng, int32_t dtype,
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

inline void expectClose(int32_t dtype, const std::vector<uint8_t> &actual,
                        const std::vector<double> &expected, double tolerance,
                        const char *what) {
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_NEAR(loom::loadElement(dtype, actual.data(), i), expected[i],
                tolerance * (1.0 + std::abs(expected[i])))
        << what << " element " << i;
}

/// What one run of the fused attention computed: the output and the
/// log-sum-exp of the forward pass, and the gradient of the backward pass.
struct AttentionResult {
  std::vector<uint8_t> out, dqkv;
  std::vector<float> lse;
};

/// The bytes of one stored element of `dtype`.
inline size_t elementBytes(int32_t dtype) {
  return dtype == LOOM_DTYPE_F32 ? 4 : 2;
}

/// A result of NaNs, in `dtype`, until a run writes it: an element it
/// misses fails the comparisons.
inline AttentionResult poisonedResult(const Problem &p, int32_t dtype) {
  size_t bytes = elementBytes(dtype);
  return AttentionResult{std::vector<uint8_t>(p.outSize() * bytes, 0xff),
                         std::vector<uint8_t>(p.qkvSize() * bytes, 0xff),
                         std::vector<float>(p.batch * p.heads * p.seq, NAN)};
}

/// Runs loom_rt_attention and loom_rt_attention_grad on a problem's
/// stored inputs, wherever the runtime computes, the backward pass on the
/// forward's log-sum-exp plus `lseShift`.
using AttentionRunner = std::function<AttentionResult(
    const Problem &, int32_t dtype, const std::vector<uint8_t> &qkv,
    const std::vector<uint8_t> &dout, float lseShift)>;

/// How far a run may be from the reference: the stored values (relative
/// to 1 + |expected|) and the log-sum-exp.
struct Tolerances {
  double values, lse;
};

/// The tensor cores' kernels (the GPU's, and the CPU's emulation of them):
/// products of the stored values summed in f32, the probabilities and the
/// scores' gradients rounded to the storage type before their products.
constexpr Tolerances kTensorCoreBf16{2e-2, 1e-5}, kTensorCoreF16{3e-3, 1e-5};

/// Forward and backward against the reference, for each problem. Then the
/// backward pass again on a log-sum-exp ln 2 larger: every probability it
/// computes from it is half, and so is every gradient, which shows that it
/// reads the forward's statistics rather than computing its own.
inline void checkAttention(int32_t dtype, Tolerances tolerance,
                           const std::vector<Problem> &problems,
                           const AttentionRunner &run) {
  std::mt19937 rng(11);
  for (const Problem &p : problems) {
    SCOPED_TRACE(::testing::Message()
                 << p.batch << " x " << p.seq << " tokens, " << p.heads
                 << " heads of " << p.dim << " in " << p.groups << " groups");
    std::vector<double> qkv, dout, out, lse, dqkv;
    auto qkvData = randomTensor(rng, dtype, p.qkvSize(), 2.0, qkv);
    auto doutData = randomTensor(rng, dtype, p.outSize(), 1.0, dout);
    reference(p, qkv, dout, out, lse, dqkv);
    AttentionResult r = run(p, dtype, qkvData, doutData, 0.0f);
    expectClose(dtype, r.out, out, tolerance.values, "output");
    for (size_t i = 0; i < lse.size(); ++i)
      ASSERT_NEAR(r.lse[i], lse[i], tolerance.lse * (1.0 + std::abs(lse[i])))
          << "log-sum-exp " << i;
    expectClose(dtype, r.dqkv, dqkv, tolerance.values, "gradient");
    AttentionResult shifted =
        run(p, dtype, qkvData, doutData, static_cast<float>(std::log(2.0)));
    for (double &g : dqkv)
      g /= 2;
    expectClose(dtype, shifted.dqkv, dqkv, tolerance.values,
                "gradient from a shifted log-sum-exp");
  }
}

} // namespace loom_test

#endif // LOOM_TEST_UNIT_ATTENTIONREFERENCE_H
