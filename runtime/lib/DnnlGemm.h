//===- DnnlGemm.h - oneDNN's GEMMs on the CPU -----------------*- C++ -*-===//

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

/// Whether the runtime was built with oneDNN, whose f32 GEMMs may then run
/// the CPU's (CpuGemm.h).
bool dnnlSgemmAvailable();

/// Row-major C = alpha op(A) op(B) + beta C by oneDNN's SGEMM on the calling
/// thread alone; only where dnnlSgemmAvailable().
void dnnlSgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
               float alpha, const float *a, int64_t lda, const float *b,
               int64_t ldb, float beta, float *c, int64_t ldc);

/// oneDNN's version and the vector units its f32 kernels use here ("oneDNN
/// 2.6.3, AVX-512 kernels").
std::string dnnlSgemmKernels();

} // namespace loom

#endif // LOOM_RUNTIME_DNNLGEMM_H
