//===- CudaGemm.cpp - The CUDA backend's GEMMs ----------------------------===//
//
// loom_rt_gemm and its variants on the GPU: cuBLASLt matmuls with the
// plans Backend::plan makes once per shape, and their epilogues (bias,
// rounding, GELU and its gradient, an added matrix).
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"
#include "loom/rt.h"

#if LOOM_HAVE_CUDA

using namespace loom::cuda;

//===----------------------------------------------------------------------===//
// Plans
//===----------------------------------------------------------------------===//

GemmPlan *Backend::plan(const GemmKey &key, const void *biasPointer,
                        void *auxPointer) {
  auto it = plans.find(key);
  if (it != plans.end())
    return &it->second;
  GemmPlan p;
  bool kept = false;
  // The descriptors outlive this call only in a plan that is kept.
  AtExit release([&] {
    if (kept)
      return;
    if (p.desc)
      api.cublasLtMatmulDescDestroy(p.desc);
    for (cublasLtMatrixLayout_t layout : {p.a, p.b, p.c, p.addend})
      if (layout)
        api.cublasLtMatrixLayoutDestroy(layout);
  });
  if (!describeGemm(p, key, biasPointer, auxPointer) || !pickAlgorithm(p, key))
    return nullptr;
  kept = true;
  return &(plans[key] = p);
}

bool Backend::describeGemm(GemmPlan &p, const GemmKey &key,
                           const void *biasPointer, void *auxPointer) {
  auto [dtype, transA, transB, m, n, k, lda, ldb, ldc, alignA, alignB, alignC,
        count, strideA, strideB, strideC, cDtype, bias, gelu, ldaux, alignAux,
        ldaddend, alignAddend] = key;
  cudaDataType_t operands = operandType(dtype), product = operandType(cDtype);
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B's
  // buffer is cuBLASLt's first operand, A's the second. A row-major
  // buffer read column-major is its transpose.
  cublasOperation_t opFirst = transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                    opSecond = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  auto setDesc = [&](cublasLtMatmulDescAttributes_t attribute,
                     const void *value, size_t bytes) {
    return check(
        api.cublasLtMatmulDescSetAttribute(p.desc, attribute, value, bytes),
        "cublasLtMatmulDescSetAttribute");
  };
  auto layout = [&](cublasLtMatrixLayout_t &l, cudaDataType_t type,
                    int64_t rows, int64_t columns, int64_t ld) {
    return check(api.cublasLtMatrixLayoutCreate(&l, type, rows, columns, ld),
                 "cublasLtMatrixLayoutCreate");
  };
  if (!check(
          api.cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
          "cublasLtMatmulDescCreate") ||
      !setDesc(CUBLASLT_MATMUL_DESC_TRANSA, &opFirst, sizeof(opFirst)) ||
      !setDesc(CUBLASLT_MATMUL_DESC_TRANSB, &opSecond, sizeof(opSecond)) ||
      !layout(p.a, operands, transB ? k : n, transB ? n : k, ldb) ||
      !layout(p.b, operands, transA ? m : k, transA ? k : m, lda) ||
      !layout(p.c, product, n, m, ldc))
    return false;
  // loom_rt_gemm_add's C: D's type, its own leading dimension.
  if (alignAddend && !layout(p.addend, product, n, m, ldaddend))
    return false;
  // The bias of C's rows is, column-major, a bias of C^T's columns: the
  // epilogue's vector, one element per row of C^T (n of them), of the
  // operands' type.
  if (bias && (!setDesc(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &operands,
                        sizeof(operands)) ||
               !setDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &biasPointer,
                        sizeof(biasPointer))))
    return false;
  // The GELU's input, AUX, is a matrix like D, of D's type: written by
  // the forward epilogue, read by the backward one. Column-major it is
  // AUX^T, as D is D^T.
  cublasLtEpilogue_t epilogue =
      gelu == LOOM_GELU_FORWARD    ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                           : CUBLASLT_EPILOGUE_GELU_AUX)
      : gelu == LOOM_GELU_BACKWARD ? CUBLASLT_EPILOGUE_DGELU
      : bias                       ? CUBLASLT_EPILOGUE_BIAS
                                   : CUBLASLT_EPILOGUE_DEFAULT;
  if (!setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)))
    return false;
  if (gelu != kNoGelu &&
      (!setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ldaux, sizeof(ldaux)) ||
       !setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &auxPointer,
                sizeof(auxPointer))))
    return false;
  if (count <= 1)
    return true;
  auto batch = static_cast<int32_t>(count);
  std::pair<cublasLtMatrixLayout_t, int64_t> layouts[] = {
      {p.a, strideB}, {p.b, strideA}, {p.c, strideC}};
  for (auto &[matrix, stride] : layouts)
    if (!check(api.cublasLtMatrixLayoutSetAttribute(
                   matrix, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                   sizeof(batch)),
               "cublasLtMatrixLayoutSetAttribute") ||
        !check(api.cublasLtMatrixLayoutSetAttribute(
                   matrix, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                   sizeof(stride)),
               "cublasLtMatrixLayoutSetAttribute"))
      return false;
  return true;
}

bool Backend::pickAlgorithm(GemmPlan &p, const GemmKey &key) {
  auto [dtype, transA, transB, m, n, k, lda, ldb, ldc, alignA, alignB, alignC,
        count, strideA, strideB, strideC, cDtype, bias, gelu, ldaux, alignAux,
        ldaddend, alignAddend] = key;
  cublasLtMatmulPreference_t preference = nullptr;
  AtExit release([&] {
    if (preference)
      api.cublasLtMatmulPreferenceDestroy(preference);
  });
  auto prefer = [&](cublasLtMatmulPreferenceAttributes_t attribute,
                    const void *value, size_t bytes) {
    return check(api.cublasLtMatmulPreferenceSetAttribute(preference, attribute,
                                                          value, bytes),
                 "cublasLtMatmulPreferenceSetAttribute");
  };
  size_t workspaceBytes = kWorkspaceBytes;
  if (!check(api.cublasLtMatmulPreferenceCreate(&preference),
             "cublasLtMatmulPreferenceCreate") ||
      !prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
              sizeof(workspaceBytes)))
    return false;
  // cuBLASLt's first operand is B's buffer, its second A's.
  std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignB},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignA},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
       alignAddend ? alignAddend : alignC},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignC}};
  // A split-K sum's parts add up in f32, in the workspace: the in-place
  // and output-type schemes would round each part to D's type (bf16),
  // and a rounded GEMM rounds once.
  uint32_t reductions =
      CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  if (!prefer(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions,
              sizeof(reductions)))
    return false;
  for (auto &[attribute, bytes] : alignments)
    if (!prefer(attribute, &bytes, sizeof(bytes)))
      return false;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (!check(api.cublasLtMatmulAlgoGetHeuristic(blas, p.desc, p.a, p.b,
                                                p.addend ? p.addend : p.c, p.c,
                                                preference, 1, &result, &found),
             "cublasLtMatmulAlgoGetHeuristic"))
    return false;
  if (found == 0) {
    fail("cuBLASLt has no algorithm for a " + std::to_string(m) + "x" +
         std::to_string(n) + "x" + std::to_string(k) + " GEMM of " +
         dtypeName(dtype) + " matrices into " + dtypeName(cDtype) +
         (bias ? " with a bias" : "") +
         (gelu == LOOM_GELU_FORWARD    ? " and a GELU"
          : gelu == LOOM_GELU_BACKWARD ? " through a GELU's derivative"
                                       : "") +
         (alignAddend ? " and a matrix to add" : "") +
         (gelu != kNoGelu ? " (compile with --gelu=loops to keep the GELU "
                            "out of the GEMM)"
          : alignAddend   ? " (compile with --residual-add=loops to keep "
                            "the add out of the GEMM)"
                          : ""));
    return false;
  }
  p.algo = result.algo;
  return true;
}

namespace {
/// A GEMM's operands beyond loom_rt_gemm_batched's: C's element type, the
/// bias of its rows (null for none), loom_rt_gemm_gelu's epilogue, and
/// loom_rt_gemm_add's C (the GEMM's C then being its D).
struct GemmOutput {
  int32_t dtype;
  const void *bias;
  int32_t gelu = kNoGelu;
  void *aux = nullptr;
  int64_t ldaux = 0;
  const void *addend = nullptr;
  int64_t ldaddend = 0;
};

void runGemm(int32_t dtype, int32_t transA, int32_t transB, int64_t m,
             int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
             const void *b, int64_t ldb, float beta, void *c, int64_t ldc,
             int64_t count0, const int64_t strides0[3], int64_t count1,
             const int64_t strides1[3], GemmOutput output) {
  Backend &be = backend();
  if (!be.failure.empty() || count0 <= 0 || count1 <= 0)
    return;
  size_t bytes = loom::elementSize(dtype),
         cBytes = loom::elementSize(output.dtype);
  auto at = [](const void *base, int64_t elements, size_t size) {
    return static_cast<const char *>(base) + elements * size;
  };
  // The alignment every matrix of a batch has: the first's, and that of
  // the steps between them.
  auto alignment = [&](const void *first, int64_t stride0, int64_t stride1,
                       size_t size) {
    return std::min({alignmentOf(first),
                     alignmentOf(static_cast<uintptr_t>(stride0) * size),
                     alignmentOf(static_cast<uintptr_t>(stride1) * size)});
  };
  GemmPlan *p = be.plan(GemmKey{dtype,
                                transA,
                                transB,
                                m,
                                n,
                                k,
                                lda,
                                ldb,
                                ldc,
                                alignment(a, strides0[0], strides1[0], bytes),
                                alignment(b, strides0[1], strides1[1], bytes),
                                alignment(c, strides0[2], strides1[2], cBytes),
                                count1,
                                count1 > 1 ? strides1[0] : 0,
                                count1 > 1 ? strides1[1] : 0,
                                count1 > 1 ? strides1[2] : 0,
                                output.dtype,
                                output.bias ? alignmentOf(output.bias) : 0,
                                output.gelu,
                                output.ldaux,
                                output.aux ? alignmentOf(output.aux) : 0,
                                output.ldaddend,
                                output.addend ? alignmentOf(output.addend) : 0},
                        output.bias, output.aux);
  if (!p)
    return;
  // The plan is kept per shape; the bias and AUX move from call to call (a
  // layer's slice of the stacked biases and activations).
  if (output.bias && !be.check(be.api.cublasLtMatmulDescSetAttribute(
                                   p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                   &output.bias, sizeof(output.bias)),
                               "cublasLtMatmulDescSetAttribute"))
    return;
  if (output.aux &&
      !be.check(be.api.cublasLtMatmulDescSetAttribute(
                    p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                    &output.aux, sizeof(output.aux)),
                "cublasLtMatmulDescSetAttribute"))
    return;
  // One strided-batched matmul of the inner GEMMs per outer one.
  CUevent timing = be.beginTimed();
  for (int64_t i = 0; i < count0 && be.failure.empty(); ++i) {
    const void *ai = at(a, i * strides0[0], bytes),
               *bi = at(b, i * strides0[1], bytes);
    void *ci = const_cast<char *>(at(c, i * strides0[2], cBytes));
    // loom_rt_gemm_add reads its own C; other GEMMs update theirs in place.
    const void *in = output.addend ? output.addend : ci;
    be.check(be.api.cublasLtMatmul(be.blas, p->desc, &alpha, bi, p->a, ai, p->b,
                                   &beta, in, p->addend ? p->addend : p->c, ci,
                                   p->c, &p->algo,
                                   reinterpret_cast<void *>(be.workspace),
                                   kWorkspaceBytes, be.stream),
             "cublasLtMatmul");
  }
  if (timing)
    be.endTimed(timing, "GEMM " + std::to_string(count0 * count1) + "x " +
                            std::to_string(m) + "x" + std::to_string(n) + "x" +
                            std::to_string(k) +
                            (output.dtype != LOOM_DTYPE_F32 ? " rounded" : "") +
                            (output.gelu == LOOM_GELU_FORWARD    ? " gelu"
                             : output.gelu == LOOM_GELU_BACKWARD ? " dgelu"
                                                                 : "") +
                            (output.addend ? " add" : ""));
  be.queued();
}

const int64_t kNoStrides[3] = {0, 0, 0};
} // namespace

void loom::cudaGemm(int32_t dtype, int32_t transA, int32_t transB, int64_t m,
                    int64_t n, int64_t k, float alpha, const void *a,
                    int64_t lda, const void *b, int64_t ldb, float beta,
                    float *c, int64_t ldc) {
  runGemm(dtype, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
          1, kNoStrides, 1, kNoStrides, GemmOutput{LOOM_DTYPE_F32, nullptr});
}

void loom::cudaGemmBatched(int32_t dtype, int32_t transA, int32_t transB,
                           int64_t m, int64_t n, int64_t k, float alpha,
                           const void *a, int64_t lda, const void *b,
                           int64_t ldb, float beta, float *c, int64_t ldc,
                           int64_t count0, const int64_t strides0[3],
                           int64_t count1, const int64_t strides1[3]) {
  runGemm(dtype, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
          count0, strides0, count1, strides1,
          GemmOutput{LOOM_DTYPE_F32, nullptr});
}

void loom::cudaGemmRounded(int32_t dtype, int32_t transA, int32_t transB,
                           int64_t m, int64_t n, int64_t k, float alpha,
                           const void *a, int64_t lda, const void *b,
                           int64_t ldb, const void *bias, void *d,
                           int64_t ldd) {
  runGemm(dtype, transA, transB, m, n, k, alpha, a, lda, b, ldb, 0.0f, d, ldd,
          1, kNoStrides, 1, kNoStrides, GemmOutput{dtype, bias});
}

void loom::cudaGemmAdd(int32_t dtype, int32_t transA, int32_t transB, int64_t m,
                       int64_t n, int64_t k, float alpha, const void *a,
                       int64_t lda, const void *b, int64_t ldb,
                       const void *bias, const void *c, int64_t ldc, void *d,
                       int64_t ldd) {
  Backend &be = backend();
  // The compiler emits nothing else.
  if (!gemmAddTakes(dtype, m, n, c, ldc, d, ldd)) {
    if (be.failure.empty())
      be.fail("loom_rt_gemm_add: dtype " + std::to_string(dtype) +
              ", leading dimension " + std::to_string(ldc) + " of " +
              std::to_string(n) + " columns" +
              (c && matricesOverlap(m, n, c, ldc, d, ldd) ? ", C overlapping D"
                                                          : "") +
              ": the add takes bf16 or f16 and a matrix C of D's shape that "
              "shares no memory with D");
    return;
  }
  GemmOutput output{dtype, bias};
  output.addend = c;
  output.ldaddend = ldc;
  runGemm(dtype, transA, transB, m, n, k, alpha, a, lda, b, ldb, 1.0f, d, ldd,
          1, kNoStrides, 1, kNoStrides, output);
}

void loom::cudaGemmGelu(int32_t dtype, int32_t mode, int32_t transA,
                        int32_t transB, int64_t m, int64_t n, int64_t k,
                        float alpha, const void *a, int64_t lda, const void *b,
                        int64_t ldb, const void *bias, void *aux, int64_t ldaux,
                        void *d, int64_t ldd) {
  Backend &be = backend();
  // What cuBLASLt's epilogues take; the compiler emits nothing else.
  if ((dtype != LOOM_DTYPE_BF16 && dtype != LOOM_DTYPE_F16) ||
      (mode != LOOM_GELU_FORWARD && mode != LOOM_GELU_BACKWARD) ||
      (mode == LOOM_GELU_BACKWARD && bias) || ldaux % 8 != 0 || ldaux < n) {
    if (be.failure.empty())
      be.fail("loom_rt_gemm_gelu: dtype " + std::to_string(dtype) + ", mode " +
              std::to_string(mode) + ", leading dimension " +
              std::to_string(ldaux) + " of " + std::to_string(n) +
              " columns: cuBLASLt's GELU epilogues take bf16 or f16, the "
              "forward or backward mode, a bias forward only and a leading "
              "dimension that is a multiple of 8");
    return;
  }
  runGemm(dtype, transA, transB, m, n, k, alpha, a, lda, b, ldb, 0.0f, d, ldd,
          1, kNoStrides, 1, kNoStrides,
          GemmOutput{dtype, bias, mode, aux, ldaux});
}

#endif // LOOM_HAVE_CUDA
