//===- GeluReference.h - GPT-2's GELU in double, for tests -----*- C++ -*-===//

#ifndef LOOM_TEST_UNIT_GELUREFERENCE_H
#define LOOM_TEST_UNIT_GELUREFERENCE_H

#include <cmath>

namespace loom_test {
/// GPT-2's GELU, its tanh approximation, and its derivative, in double.
inline double geluReference(double x) {
  const double s = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(s * (x + 0.044715 * x * x * x)));
}
inline double geluGradReference(double x) {
  const double s = std::sqrt(2.0 / M_PI);
  double t = std::tanh(s * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) +
         0.5 * x * (1.0 - t * t) * s * (1.0 + 3 * 0.044715 * x * x);
}
} // namespace loom_test

#endif // LOOM_TEST_UNIT_GELUREFERENCE_H
