//===- FloatTest.cpp - The runtime's conversions of f16 and bf16 ----------===//

#include "Float.h"

#include <cmath>
#include <gtest/gtest.h>

namespace {
/// An f16's value from its fields, by IEEE 754's definition.
double halfValue(uint16_t bits) {
  int exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  double magnitude = exponent == 0 ? std::ldexp(mantissa, -24)
                                   : std::ldexp(1024 + mantissa, exponent - 25);
  return bits & 0x8000 ? -magnitude : magnitude;
}
} // namespace

TEST(RuntimeFloat, WidensEveryHalfExactly) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    auto half = static_cast<uint16_t>(bits);
    float widened = loom::bitsFloat(loom::widenHalf(half));
    int exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
    if (exponent == 0x1f && mantissa != 0) {
      EXPECT_TRUE(std::isnan(widened)) << bits;
      // The payload moves up with the mantissa, and the sign stays.
      EXPECT_EQ(loom::widenHalf(half),
                ((bits & 0x8000u) << 16) | 0x7f800000u | (mantissa << 13))
          << bits;
    } else if (exponent == 0x1f) {
      EXPECT_EQ(widened, bits & 0x8000 ? -INFINITY : INFINITY) << bits;
    } else {
      EXPECT_EQ(static_cast<double>(widened), halfValue(half)) << bits;
      // Zero keeps its sign.
      EXPECT_EQ(std::signbit(widened), (bits & 0x8000) != 0) << bits;
      // And comes back: every half is an f32 that narrows to itself.
      EXPECT_EQ(loom::narrowHalf(widened), half) << bits;
    }
  }
}
