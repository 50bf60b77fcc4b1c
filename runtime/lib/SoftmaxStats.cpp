//===- SoftmaxStats.cpp - The loss's softmax statistics on the CPU --------===//

#include "Device.h"
#include "Float.h"
#include "Parallel.h"
#include "loom/rt.h"
#include "loom/runtime.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace {
struct Rows {
  int32_t dtype;
  int64_t columns, classes;
  const void *logits;
  float *max, *sumExp;
};

template <typename Widen>
void statsOfRows(const Rows &s, int64_t from, int64_t to, Widen widen) {
  for (int64_t r = from; r < to; ++r) {
    int64_t first = r * s.columns;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < s.classes; ++c)
      m = std::max(m, widen(first + c));
    // Tens of thousands of terms (a vocabulary) in one f32 sum would drift
    // by 1e-4 of it; the generated loops' sums are split across vector
    // lanes, the GPU's across threads.
    double sum = 0.0;
    for (int64_t c = 0; c < s.classes; ++c)
      sum += std::exp(widen(first + c) - m);
    s.max[r] = m;
    s.sumExp[r] = static_cast<float>(sum);
  }
}

void statsTask(void *context, int64_t from, int64_t to) {
  const Rows &s = *static_cast<const Rows *>(context);
  // A loop per type, the type a constant in each.
  auto rows = [&](auto dtype) {
    statsOfRows(s, from, to, [&](int64_t i) {
      return loom::loadElement(dtype, s.logits, i);
    });
  };
  if (s.dtype == LOOM_DTYPE_BF16)
    rows(std::integral_constant<int32_t, LOOM_DTYPE_BF16>());
  else if (s.dtype == LOOM_DTYPE_F16)
    rows(std::integral_constant<int32_t, LOOM_DTYPE_F16>());
  else
    rows(std::integral_constant<int32_t, LOOM_DTYPE_F32>());
}
} // namespace

extern "C" void loom_rt_softmax_stats(int32_t dtype, int64_t rows,
                                      int64_t columns, int64_t classes,
                                      const void *logits, float *max,
                                      float *sum_exp) {
  if (loom::cudaActive())
    return loom::cudaSoftmaxStats(dtype, rows, columns, classes, logits, max,
                                  sum_exp);
  if (rows <= 0)
    return;
  if (classes < 1 || classes > columns) {
    std::fill(max, max + rows, NAN);
    std::fill(sum_exp, sum_exp + rows, NAN);
    return;
  }
  Rows s{dtype, columns, classes, logits, max, sum_exp};
  if (loom_get_num_threads() > 1 && !loom::isInParallelLoop() && rows > 1)
    loom_rt_parallel_for(statsTask, &s, 0, rows);
  else
    statsTask(&s, 0, rows);
}
