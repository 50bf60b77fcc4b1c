//===- SoftmaxStatsReference.h - Cases of the softmax statistics -*- C++
//-*-===//
//
// Cases for loom_rt_softmax_stats and their statistics in double: each
// row's maximum over its first `classes` logits (exact, a value of the
// row) and its sum of exponentials (to f32's rounding of thousands of
// terms). Shared by the CPU's test, the kernels' test on the CPU and the
// GPU's (LoomCudaTests).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_SOFTMAXSTATSREFERENCE_H
#define LOOM_TEST_UNIT_SOFTMAXSTATSREFERENCE_H

#include "Float.h"

#include "loom/runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace loom_test {
struct SoftmaxCase {
  std::string name;
  int64_t rows, columns, classes;
  /// Leading columns of each row that hold -inf (an overflowed logit).
  int64_t minusInfinity = 0;
};

/// One logit, rows shorter than a block, tails of 1 and 3 after the
/// 16-byte loads, padding columns past the classes (which hold the largest
/// values, so that reading one shows), -inf before any other value of a
/// thread, GPT-2's padded vocabulary.
inline std::vector<SoftmaxCase> softmaxCases() {
  return {{"one", 1, 1, 1},
          {"short rows", 3, 5, 3},
          {"tail", 7, 300, 257},
          {"longer tail", 2, 304, 299},
          {"whole rows", 5, 1024, 1024},
          {"-inf first", 3, 4096, 4000, 3000},
          // Groups of a thread's loads that are all -inf, then some not.
          {"-inf groups", 2, 16384, 16000, 9000},
          {"gpt2", 3, 50304, 50257}};
}

/// A case's logits stored as `dtype`, and their statistics in double.
struct SoftmaxProblem {
  int32_t dtype;
  std::vector<uint8_t> stored;
  std::vector<double> max, sumExp;
};

inline SoftmaxProblem makeSoftmaxProblem(const SoftmaxCase &c, int32_t dtype) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> logit(-8.0f, 8.0f);
  size_t size = dtype == LOOM_DTYPE_F32 ? 4 : 2;
  SoftmaxProblem p{
      dtype, std::vector<uint8_t>(c.rows * c.columns * size), {}, {}};
  std::vector<double> values(c.rows * c.columns);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t col = 0; col < c.columns; ++col) {
      // Row 1 has one outlier, far above the rest; padding is larger still.
      float x = col >= c.classes                   ? 100.0f
                : col < c.minusInfinity            ? -INFINITY
                : (r == 1 && col == c.classes / 2) ? 30.0f
                                                   : logit(rng);
      int64_t i = r * c.columns + col;
      loom::storeElement(dtype, p.stored.data(), i, x);
      values[i] = loom::loadElement(dtype, p.stored.data(), i);
    }
  for (int64_t r = 0; r < c.rows; ++r) {
    const double *row = &values[r * c.columns];
    double m = row[0];
    for (int64_t col = 1; col < c.classes; ++col)
      m = std::max(m, row[col]);
    double sum = 0;
    for (int64_t col = 0; col < c.classes; ++col)
      sum += std::exp(row[col] - m);
    p.max.push_back(m);
    p.sumExp.push_back(sum);
  }
  return p;
}

/// Runs every case in every storage type through `run`, which fills the
/// maxima and sums, and holds them to the double statistics: the maxima
/// exactly, the sums to 1e-5.
inline void checkSoftmaxCases(
    const std::function<void(const SoftmaxCase &, const SoftmaxProblem &,
                             std::vector<float> &, std::vector<float> &)>
        &run) {
  for (const SoftmaxCase &c : softmaxCases())
    for (int32_t dtype : {LOOM_DTYPE_F32, LOOM_DTYPE_BF16, LOOM_DTYPE_F16}) {
      SCOPED_TRACE(c.name + ", dtype " + std::to_string(dtype));
      SoftmaxProblem p = makeSoftmaxProblem(c, dtype);
      std::vector<float> max(c.rows, NAN), sum(c.rows, NAN);
      run(c, p, max, sum);
      for (int64_t r = 0; r < c.rows; ++r) {
        EXPECT_EQ(max[r], p.max[r]) << "row " << r;
        EXPECT_NEAR(sum[r], p.sumExp[r], 1e-5 * p.sumExp[r]) << "row " << r;
      }
    }
}
} // namespace loom_test

#endif // LOOM_TEST_UNIT_SOFTMAXSTATSREFERENCE_H
