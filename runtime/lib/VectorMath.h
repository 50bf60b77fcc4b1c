//===- VectorMath.h - Elementary functions that loops vectorize -*- C++ -*-===//
//
// libm's functions are a call per element, which keeps the loops around them
// scalar; these are plain arithmetic (selects, no branches), which the
// compiler vectorizes.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_VECTORMATH_H
#define LOOM_RUNTIME_VECTORMATH_H

#include "Float.h"

#include <algorithm>
#include <cstdint>

/// Compiles a function for each x86-64 level whose vectors its loops can
/// use, AVX-512 (x86-64-v4) and AVX2 with FMA (v3), beside the baseline,
/// and picks one when the runtime loads. The runtime is built for the
/// baseline, which keeps its own loops at SSE's four lanes; the generated
/// loops are compiled for the host instead. The clones round as the
/// baseline does: the runtime fuses no multiply-add (runtime/CMakeLists.txt),
/// and a sum in them keeps its order.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define LOOM_VECTOR_CLONES                                                     \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LOOM_VECTOR_CLONES
#endif

namespace loom {
/// Lanes of laneMax: the widest vector's floats.
constexpr int64_t kMaxLanes = 16;

/// The largest of `values[0, n)`, n > 0, in kMaxLanes running maxima,
/// which vectorize where std::max_element does not; the largest does not
/// depend on the order.
inline float laneMax(int64_t n, const float *values) {
  float lanes[kMaxLanes];
  std::fill(lanes, lanes + kMaxLanes, values[0]);
  int64_t j = 0;
  for (; j + kMaxLanes <= n; j += kMaxLanes)
    for (int64_t l = 0; l < kMaxLanes; ++l)
      lanes[l] = std::max(lanes[l], values[j + l]);
  for (int64_t l = 0; j + l < n; ++l)
    lanes[l] = std::max(lanes[l], values[j + l]);
  return *std::max_element(lanes, lanes + kMaxLanes);
}

/// e^x within 2 ulp for x in [-87, 88], clamped there: 2^n e^r with x =
/// n ln 2 + r, |r| <= ln 2 / 2 (ln 2 in Cody and Waite's two parts), and e^r
/// by Cephes's polynomial. Below -87 the result is 2^-126 or less.
inline float vectorExp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer.
  constexpr float kRound = 12582912.0f;
  float n = (x * 1.44269504088896341f + kRound) - kRound;
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float er = p * r * r + r + 1.0f;
  return er *
         bitsFloat(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
}
} // namespace loom

#endif // LOOM_RUNTIME_VECTORMATH_H
