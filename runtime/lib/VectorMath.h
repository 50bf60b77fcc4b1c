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

namespace loom {
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
