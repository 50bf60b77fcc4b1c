//===- CpuGemm.h - Which library runs the CPU's f32 GEMMs -----*- C++ -*-===//
//
// The CPU's f32 GEMMs run in OpenBLAS or in oneDNN. On a CPU with AVX-512,
// oneDNN's kernels multiply the shapes of a training step faster than
// OpenBLAS 0.3.21's (docs/loom-run.md, "GEMMs"); elsewhere the two are even
// and OpenBLAS stays. LOOM_CPU_GEMM names the library outright.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CPUGEMM_H
#define LOOM_RUNTIME_CPUGEMM_H

#include "CpuFeatures.h"

#include <cstdint>
#include <string>

namespace loom {

/// The library that runs the CPU's f32 GEMMs.
enum class SgemmLibrary { OpenBlas, OneDnn };

/// The library a process on `cpu` uses: `requested` (LOOM_CPU_GEMM's value:
/// `openblas` or `onednn`) where given, else oneDNN where the runtime has it
/// (`haveOneDnn`) and `cpu` has AVX-512, else OpenBLAS. A request that cannot
/// be followed (an unknown name, or oneDNN without it) sets `error` and
/// gives OpenBLAS.
SgemmLibrary chooseSgemmLibrary(const CpuFeatures &cpu, const char *requested,
                                bool haveOneDnn, std::string &error);

/// This process's choice, made once from the host's features and
/// LOOM_CPU_GEMM.
SgemmLibrary sgemmLibrary();

/// The fewest multiply-adds of a product oneDNN computes. OpenBLAS keeps
/// the smaller ones, attention's blocks among them: its small-matrix
/// kernels take them without the per-call work of oneDNN's SGEMM, which
/// slowed GPT-2 124M's bf16 step by 5-15% on a 2-core AVX-512 EPYC.
constexpr double kOneDnnSmallestProduct = 1 << 20;

/// Whether the process's f32 GEMM of m x n x k runs in oneDNN.
bool inOneDnn(int64_t m, int64_t n, int64_t k);

/// Why this process's LOOM_CPU_GEMM cannot be followed; empty where it can.
const std::string &sgemmLibraryError();

/// Row-major C = alpha op(A) op(B) + beta C in one call of the library
/// inOneDnn picks: on the calling thread alone inside the runtime's
/// parallel loops and with oneDNN, on OpenBLAS's threads otherwise.
void sgemmCall(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
               float alpha, const float *a, int64_t lda, const float *b,
               int64_t ldb, float beta, float *c, int64_t ldc);

} // namespace loom

#endif // LOOM_RUNTIME_CPUGEMM_H
