//===- Float.h - bf16 and f16 storage to and from f32 -----------*- C++ -*-===//
//
// The runtime's kernels on the CPU compute in f32 on operands stored in
// bf16 or f16, as generated code does: widening is exact, and narrowing
// rounds to nearest even, as arith.truncf does.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_FLOAT_H
#define LOOM_RUNTIME_FLOAT_H

#include "loom/runtime.h"

#include <cstdint>
#include <cstring>

namespace loom {
inline uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}
inline float bitsFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// An f16 element's bits as f32's, exactly. Selects rather than branches,
/// so that loops of it vectorize: a subnormal half, mantissa x 2^-24, is
/// a normal f32 (zero for a zero mantissa), which the conversion of the
/// mantissa and a scaling by a power of two give exactly.
inline uint32_t widenHalf(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
  uint32_t special = 0x7f800000u | (mantissa << 13);
  uint32_t normal = ((exponent + 112) << 23) | (mantissa << 13);
  float scaled = static_cast<float>(static_cast<int32_t>(mantissa)) * 0x1p-24f;
  uint32_t subnormal = floatBits(scaled);
  return sign | (exponent == 0x1f ? special
                 : exponent != 0  ? normal
                                  : subnormal);
}

/// f32 rounded to the nearest bf16, ties to even; NaN stays a (quiet) NaN.
/// Both values are computed and one selected, without a branch, so that
/// loops of it vectorize.
inline uint16_t narrowBf16(float value) {
  uint32_t bits = floatBits(value);
  uint32_t quietNan = (bits >> 16) | 0x40u;
  uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quietNan
                                                                  : rounded);
}

/// f32 rounded to the nearest f16, ties to even: overflow is infinity,
/// small values become subnormal or zero.
inline uint16_t narrowHalf(float value) {
  uint32_t bits = floatBits(value);
  auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)
    return sign | 0x7e00u;
  if (magnitude >= 0x477ff000u) // rounds to 65520 or more: infinity
    return sign | 0x7c00u;
  if (magnitude < 0x38800000u) { // below f16's smallest normal, 2^-14
    // Scaled by 2^24 the subnormal's mantissa is the integer part; the
    // addition of 0.5 (as an f32 of exponent 2^-1) rounds to nearest even.
    float scaled = bitsFloat(magnitude) + 0.5f;
    return sign | static_cast<uint16_t>(floatBits(scaled) - 0x3f000000u);
  }
  uint32_t mantissaOdd = (magnitude >> 13) & 1u;
  magnitude += 0xc8000fffu + mantissaOdd; // rebias by -112 << 23, round
  return sign | static_cast<uint16_t>(magnitude >> 13);
}

/// Widens the `rows` x `cols` block at `from` (leading dimension `ld`) of a
/// row-major matrix of bf16 or f16 into `to`, packed (leading dimension
/// `cols`); in vector loops (Cpu.cpp).
void widenBlock(int32_t dtype, const uint16_t *from, int64_t ld, int64_t rows,
                int64_t cols, float *to);

/// Element `i` of `data`, stored as `dtype` (a loom_dtype), in f32.
inline float loadElement(int32_t dtype, const void *data, int64_t i) {
  if (dtype == LOOM_DTYPE_F32)
    return static_cast<const float *>(data)[i];
  uint16_t bits = static_cast<const uint16_t *>(data)[i];
  return bitsFloat(dtype == LOOM_DTYPE_BF16 ? static_cast<uint32_t>(bits) << 16
                                            : widenHalf(bits));
}

/// Stores `value` as element `i` of `data`, rounded to `dtype`.
inline void storeElement(int32_t dtype, void *data, int64_t i, float value) {
  if (dtype == LOOM_DTYPE_F32)
    static_cast<float *>(data)[i] = value;
  else
    static_cast<uint16_t *>(data)[i] =
        dtype == LOOM_DTYPE_BF16 ? narrowBf16(value) : narrowHalf(value);
}
} // namespace loom

#endif // LOOM_RUNTIME_FLOAT_H
