//===- MmaPrimitives.cuh - The tensor cores' warp-level PTX ----*- CUDA -*-===//
//
// The instructions the attention kernels (AttentionMma.cu) reach through
// inline PTX, each behind a function: the warp's matrix product
// (mma.sync), its loads of matrix fragments from shared memory (ldmatrix),
// asynchronous copies from global to shared memory (cp.async), vector
// reductions into global memory (red) and the packing of two f32 values
// into one register. The unit tests compile the
// kernels for the CPU with these functions emulated
// (test/unit/EmulatedWarp.h), which is why nothing else in the kernels is
// PTX: the fragment layouts these functions document are the contract
// both sides keep.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_KERNELS_MMAPRIMITIVES_CUH
#define LOOM_RUNTIME_KERNELS_MMAPRIMITIVES_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace {
/// Two f32 values rounded to T, the first in the low half.
template <typename T> __device__ __forceinline__ uint32_t pack(float, float);
template <>
__device__ __forceinline__ uint32_t pack<__nv_bfloat16>(float low, float high) {
  __nv_bfloat162 v = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<uint32_t *>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack<__half>(float low, float high) {
  __half2 v = __floats2half2_rn(low, high);
  return *reinterpret_cast<uint32_t *>(&v);
}

/// c += a b for a 16 x 16 matrix a and a 16 x 8 matrix b of T, in f32,
/// each spread over the warp's lanes as mma.sync's m16n8k16 spreads them.
/// Lane t, of group g = t / 4 and pair p = t % 4, holds a's elements
/// (g, 2p) and (g, 2p + 1) in a[0] (the first in the low half), (g + 8,
/// 2p..) in a[1], (g, 2p + 8..) in a[2] and (g + 8, 2p + 8..) in a[3]; b's
/// (2p, g) and (2p + 1, g) in b0, (2p + 8, g) and (2p + 9, g) in b1; and
/// c's (g, 2p), (g, 2p + 1), (g + 8, 2p) and (g + 8, 2p + 1).
template <typename T>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4],
                                    uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Copies `bytes` (4, 8 or 16) from global memory to shared memory without
/// passing through registers, or zeros where `in` is false; the copy
/// completes at waitCopies.
template <int Bytes>
__device__ __forceinline__ void copyAsync(void *to, const void *from, bool in) {
  auto at = static_cast<uint32_t>(__cvta_generic_to_shared(to));
  if constexpr (Bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :
                 : "r"(at), "l"(from), "r"(in ? 16 : 0)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n"
                 :
                 : "r"(at), "l"(from), "n"(Bytes), "r"(in ? Bytes : 0)
                 : "memory");
}
__device__ __forceinline__ void commitCopies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/// Waits for this thread's copies; a barrier then makes every thread's
/// visible.
__device__ __forceinline__ void waitCopies() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

/// Four 8 x 8 matrices of 16-bit elements from shared memory, `row` being
/// the lane's row of matrix lane / 8. Lane t receives, in word m, elements
/// 2 (t % 4) and 2 (t % 4) + 1 of matrix m's row t / 4; `Transposed`, of its
/// column t / 4, which is the layout of an mma operand's fragment either
/// way. One instruction where 32-bit (or, for a column, 16-bit) loads took
/// four (sixteen).
template <bool Transposed>
__device__ __forceinline__ void loadMatrices(uint32_t (&m)[4],
                                             const uint16_t *row) {
  auto at = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (Transposed)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(m[0]), "=r"(m[1]), "=r"(m[2]), "=r"(m[3])
                 : "r"(at));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(m[0]), "=r"(m[1]), "=r"(m[2]), "=r"(m[3])
                 : "r"(at));
}

/// Adds four f32 values to the four at `at` in global memory (16-byte
/// aligned), atomically each: one vector reduction from sm_90, whose PTX
/// has it, else four.
__device__ __forceinline__ void addFour(float *at, const float (&four)[4]) {
#if __CUDA_ARCH__ >= 900
  asm volatile("{\n"
               "  .reg .u64 address;\n"
               "  cvta.to.global.u64 address, %0;\n"
               "  red.global.add.v4.f32 [address], {%1, %2, %3, %4};\n"
               "}\n"
               :
               : "l"(at), "f"(four[0]), "f"(four[1]), "f"(four[2]), "f"(four[3])
               : "memory");
#else
  for (int i = 0; i < 4; ++i)
    atomicAdd(at + i, four[i]);
#endif
}
} // namespace

#endif // LOOM_RUNTIME_KERNELS_MMAPRIMITIVES_CUH
