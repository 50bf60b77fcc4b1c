//===- CpuGemm.cpp - Which library runs the CPU's f32 GEMMs ---------------===//

#include "CpuGemm.h"
#include "DnnlGemm.h"

#include "loom/runtime.h"

#include <cblas.h>
#include <cstdlib>
#include <cstring>

using namespace loom;

namespace {
struct Choice {
  SgemmLibrary library;
  std::string error;
};

const Choice &processChoice() {
  static const Choice choice = [] {
    Choice c;
    c.library =
        chooseSgemmLibrary(hostCpuFeatures(), std::getenv("LOOM_CPU_GEMM"),
                           dnnlSgemmAvailable(), c.error);
    return c;
  }();
  return choice;
}
} // namespace

SgemmLibrary loom::chooseSgemmLibrary(const CpuFeatures &cpu,
                                      const char *requested, bool haveOneDnn,
                                      std::string &error) {
  error.clear();
  if (requested && *requested) {
    if (!std::strcmp(requested, "openblas"))
      return SgemmLibrary::OpenBlas;
    if (std::strcmp(requested, "onednn")) {
      error = std::string("LOOM_CPU_GEMM=") + requested +
              ": expected 'openblas' or 'onednn'";
      return SgemmLibrary::OpenBlas;
    }
    if (haveOneDnn)
      return SgemmLibrary::OneDnn;
    error = "LOOM_CPU_GEMM=onednn: this runtime was built without oneDNN "
            "(install libdnnl-dev and build again)";
    return SgemmLibrary::OpenBlas;
  }
  return haveOneDnn && vectorWidth(cpu) >= kAvx512Width
             ? SgemmLibrary::OneDnn
             : SgemmLibrary::OpenBlas;
}

SgemmLibrary loom::sgemmLibrary() { return processChoice().library; }

bool loom::inOneDnn(int64_t m, int64_t n, int64_t k) {
  return sgemmLibrary() == SgemmLibrary::OneDnn &&
         static_cast<double>(m) * n * k >= kOneDnnSmallestProduct;
}

const std::string &loom::sgemmLibraryError() { return processChoice().error; }

void loom::sgemmCall(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float beta, float *c, int64_t ldc) {
  if (inOneDnn(m, n, k))
    return dnnlSgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c,
                     ldc);
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

extern "C" const char *loom_sgemm_library(void) {
  return sgemmLibrary() == SgemmLibrary::OneDnn ? "oneDNN" : "OpenBLAS";
}
