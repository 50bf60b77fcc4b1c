//===- EmulatedWarp.h - The tensor cores' warp-level PTX on the CPU -------===//
//
// The functions runtime/lib/kernels/MmaPrimitives.cuh reaches PTX through,
// for the CPU, so that the tensor-core attention kernels run in the unit
// tests with EmulatedCuda.h's threads: the warp's lanes leave their
// operands in their slots, meet, and each computes its own share from all
// of them, in the fragment layouts MmaPrimitives.cuh documents. The
// products sum the exact products of the 16-bit operands in f32, as the
// tensor cores do (up to the order of the sums). Copies to shared memory
// complete at once.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_EMULATEDWARP_H
#define LOOM_TEST_UNIT_EMULATEDWARP_H

#include "EmulatedCuda.h"

#include <type_traits>

namespace {
/// Two f32 values rounded to T, the first in the low half.
template <typename T> uint32_t pack(float low, float high);
template <> uint32_t pack<__nv_bfloat16>(float low, float high) {
  return loom::narrowBf16(low) | static_cast<uint32_t>(loom::narrowBf16(high))
                                     << 16;
}
template <> uint32_t pack<__half>(float low, float high) {
  return loom::narrowHalf(low) | static_cast<uint32_t>(loom::narrowHalf(high))
                                     << 16;
}

/// The value of 16 bits of T.
template <typename T> float widenBits(uint32_t bits) {
  bits &= 0xffffu;
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return loom::bitsFloat(bits << 16);
  else
    return loom::bitsFloat(loom::widenHalf(static_cast<uint16_t>(bits)));
}

/// mma.sync's m16n8k16: c += a b, from every lane's fragments.
template <typename T>
void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  uint64_t *mine = warpIn(laneId());
  for (int i = 0; i < 4; ++i)
    mine[i] = a[i];
  mine[4] = b0;
  mine[5] = b1;
  warpMeet([] {
    float am[16][16], bm[16][8];
    for (int t = 0; t < 32; ++t) {
      const uint64_t *in = warpIn(t);
      int g = t / 4, p = t % 4;
      for (int half = 0; half < 2; ++half) {
        int shift = 16 * half;
        am[g][2 * p + half] = widenBits<T>(in[0] >> shift);
        am[g + 8][2 * p + half] = widenBits<T>(in[1] >> shift);
        am[g][2 * p + 8 + half] = widenBits<T>(in[2] >> shift);
        am[g + 8][2 * p + 8 + half] = widenBits<T>(in[3] >> shift);
        bm[2 * p + half][g] = widenBits<T>(in[4] >> shift);
        bm[2 * p + 8 + half][g] = widenBits<T>(in[5] >> shift);
      }
    }
    for (int t = 0; t < 32; ++t)
      for (int e = 0; e < 4; ++e) {
        int row = t / 4 + 8 * (e / 2), column = 2 * (t % 4) + e % 2;
        float sum = 0.0f;
        for (int k = 0; k < 16; ++k)
          sum += am[row][k] * bm[k][column];
        std::memcpy(&warpOut(t)[e], &sum, sizeof(sum));
      }
  });
  for (int e = 0; e < 4; ++e) {
    float sum;
    std::memcpy(&sum, &warpOut(laneId())[e], sizeof(sum));
    c[e] += sum;
  }
}

/// ldmatrix's x4: lane t's word m from the rows lanes 8m..8m + 7 point to.
template <bool Transposed>
void loadMatrices(uint32_t (&m)[4], const uint16_t *row) {
  std::memcpy(warpIn(laneId()), &row, sizeof(row));
  warpMeet([] {
    auto rowOf = [](int lane) {
      const uint16_t *at;
      std::memcpy(&at, warpIn(lane), sizeof(at));
      return at;
    };
    for (int t = 0; t < 32; ++t)
      for (int matrix = 0; matrix < 4; ++matrix) {
        int first = 8 * matrix;
        uint32_t word;
        if (Transposed) {
          // Column t / 4, rows 2 (t % 4) and 2 (t % 4) + 1.
          const uint16_t *top = rowOf(first + 2 * (t % 4));
          const uint16_t *bottom = rowOf(first + 2 * (t % 4) + 1);
          word = top[t / 4] | static_cast<uint32_t>(bottom[t / 4]) << 16;
        } else {
          const uint16_t *at = rowOf(first + t / 4) + 2 * (t % 4);
          word = at[0] | static_cast<uint32_t>(at[1]) << 16;
        }
        warpOut(t)[matrix] = word;
      }
  });
  for (int matrix = 0; matrix < 4; ++matrix)
    m[matrix] = warpOut(laneId())[matrix];
}

/// cp.async: the bytes, or zeros, at once.
template <int Bytes> void copyAsync(void *to, const void *from, bool in) {
  if (in)
    std::memcpy(to, from, Bytes);
  else
    std::memset(to, 0, Bytes);
}
void commitCopies() {}
void waitCopies() {}

/// red.global.add.v4.f32: four additions.
void addFour(float *at, const float (&four)[4]) {
  for (int i = 0; i < 4; ++i)
    atomicAdd(at + i, four[i]);
}
} // namespace

#endif // LOOM_TEST_UNIT_EMULATEDWARP_H
