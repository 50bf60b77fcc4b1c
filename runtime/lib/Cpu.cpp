//===- Cpu.cpp - The CPU backend: the functions generated code calls ------===//

#include "Device.h"
#include "Parallel.h"
#include "loom/runtime.h"

#include <cblas.h>
#include <cstdint>
#include <cstring>

namespace {
/// A GEMM split by rows of C over the runtime's threads.
struct GemmRows {
  int32_t transA, transB;
  int64_t n, k;
  float alpha;
  const float *a;
  int64_t lda;
  const float *b;
  int64_t ldb;
  float beta;
  float *c;
  int64_t ldc;
};

void gemmRows(void *context, int64_t from, int64_t to) {
  const GemmRows &g = *static_cast<const GemmRows *>(context);
  const float *a = g.transA ? g.a + from : g.a + from * g.lda;
  cblas_sgemm(CblasRowMajor, g.transA ? CblasTrans : CblasNoTrans,
              g.transB ? CblasTrans : CblasNoTrans, static_cast<int>(to - from),
              static_cast<int>(g.n), static_cast<int>(g.k), g.alpha, a,
              static_cast<int>(g.lda), g.b, static_cast<int>(g.ldb), g.beta,
              g.c + from * g.ldc, static_cast<int>(g.ldc));
}

/// Below this many multiply-adds OpenBLAS's own threads spend much of a
/// GEMM synchronizing (gpt2-tiny's 512 x 384 x 128 runs at half the peak
/// of a large one); one single-threaded GEMM per block of rows of C on the
/// runtime's threads does better. Above it OpenBLAS's threading is the
/// faster.
constexpr double kSplitWork = 1e8;
} // namespace

extern "C" {

void loom_rt_sgemm(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                   int64_t k, float alpha, const float *a, int64_t lda,
                   const float *b, int64_t ldb, float beta, float *c,
                   int64_t ldc) {
  if (loom::cudaActive())
    return loom::cudaSgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                           beta, c, ldc);
  int64_t threads = loom_get_num_threads();
  if (threads > 1 && !loom::isInParallelLoop() && m >= 64 * threads &&
      static_cast<double>(m) * n * k < kSplitWork) {
    GemmRows rows{trans_a, trans_b, n, k, alpha, a, lda, b, ldb, beta, c, ldc};
    loom_rt_parallel_for(gemmRows, &rows, 0, m);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

/// MLIR's memref-to-LLVM lowering calls this for copies between
/// non-contiguous views; it receives unranked descriptors:
/// {rank, pointer to {allocated, aligned, offset, sizes[rank],
/// strides[rank]}}.
struct UnrankedDescriptor {
  int64_t rank;
  void *descriptor;
};

void memrefCopy(int64_t elementSize, UnrankedDescriptor *src,
                UnrankedDescriptor *dst) {
  int64_t rank = src->rank;
  auto fieldsOf = [](UnrankedDescriptor *d) {
    return reinterpret_cast<int64_t *>(static_cast<char **>(d->descriptor) + 2);
  };
  char *srcBase = static_cast<char **>(src->descriptor)[1];
  char *dstBase = static_cast<char **>(dst->descriptor)[1];
  const int64_t *s = fieldsOf(src), *d = fieldsOf(dst);
  int64_t srcOffset = s[0], dstOffset = d[0];
  const int64_t *sizes = s + 1, *srcStrides = s + 1 + rank,
                *dstStrides = d + 1 + rank;
  if (rank == 0) {
    std::memcpy(dstBase + dstOffset * elementSize,
                srcBase + srcOffset * elementSize, elementSize);
    return;
  }
  for (int64_t i = 0; i < rank; ++i)
    if (sizes[i] == 0)
      return;
  // Odometer over all but the innermost dimension.
  int64_t index[16] = {};
  if (rank > 16)
    return;
  while (true) {
    int64_t so = srcOffset, dOff = dstOffset;
    for (int64_t i = 0; i + 1 < rank; ++i) {
      so += index[i] * srcStrides[i];
      dOff += index[i] * dstStrides[i];
    }
    int64_t inner = sizes[rank - 1];
    if (srcStrides[rank - 1] == 1 && dstStrides[rank - 1] == 1) {
      std::memcpy(dstBase + dOff * elementSize, srcBase + so * elementSize,
                  inner * elementSize);
    } else {
      for (int64_t j = 0; j < inner; ++j)
        std::memcpy(dstBase + (dOff + j * dstStrides[rank - 1]) * elementSize,
                    srcBase + (so + j * srcStrides[rank - 1]) * elementSize,
                    elementSize);
    }
    int64_t dim = rank - 2;
    while (dim >= 0 && ++index[dim] == sizes[dim])
      index[dim--] = 0;
    if (dim < 0)
      return;
  }
}

} // extern "C"
