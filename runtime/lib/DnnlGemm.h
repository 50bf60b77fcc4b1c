//===- DnnlGemm.h - bf16 GEMMs on the CPU's matrix units ------*- C++ -*-===//

#ifndef LOOM_RUNTIME_DNNLGEMM_H
#define LOOM_RUNTIME_DNNLGEMM_H

#include <cstdint>
#include <string>

namespace loom {

/// Whether bf16 GEMMs run on oneDNN: the CPU multiplies bf16 itself (AMX
/// or AVX512-BF16), the runtime was built with oneDNN, and
/// LOOM_CPU_BF16_GEMM is not `widen`.
bool dnnlGemmAvailable();

/// C = alpha op(A) op(B) + beta C for bf16 A and B and f32 C, row-major,
/// by oneDNN's matmul where the CPU multiplies bf16 itself (AMX or
/// AVX512-BF16) and the runtime was built with oneDNN; false, with C
/// untouched, where it does not run (the caller widens for SGEMM).
bool dnnlGemmBf16(int32_t transA, int32_t transB, int64_t m, int64_t n,
                  int64_t k, float alpha, const void *a, int64_t lda,
                  const void *b, int64_t ldb, float beta, float *c,
                  int64_t ldc);

/// Which library and units run the bf16 GEMMs ("oneDNN 2.6.3 on AMX"), or
/// empty where OpenBLAS's SGEMM does, on widened operands.
std::string dnnlKernels();

} // namespace loom

#endif // LOOM_RUNTIME_DNNLGEMM_H
