//===- CudaAttentionTest.cpp - The fused attention's GPU kernels ----------===//
//
// The runtime's attention kernels on a GPU against the f64 reference, in
// each storage type: sequences that end inside a block of 64 rows, heads
// smaller than their kernels' bound, heads whose rows are not whole 16-byte
// vectors, and GPT-2's 1,024 tokens of 64 channels. A binary of its own,
// since once the CUDA backend is on every call of the process goes to the
// GPU. Without a GPU, or in a runtime built without CUDA, each test is
// skipped (lit counts it skipped, never passed).
//
//===----------------------------------------------------------------------===//

#include "AttentionReference.h"
#include "CudaManaged.h"
#include "loom/abi.h"
#include "loom/rt.h"

#include <cstring>

using namespace loom_test;

namespace {
/// The last three with grouped key/value heads (batch, seq, heads, dim,
/// groups), Llama's 64-channel heads among them.
const std::vector<Problem> kProblems = {
    {2, 70, 3, 8},    {1, 129, 2, 16},    {3, 5, 1, 4},
    {1, 77, 2, 30},   {2, 100, 1, 48},    {1, 1024, 2, 64},
    {2, 70, 6, 8, 2}, {1, 129, 4, 16, 1}, {1, 1024, 8, 64, 2}};

class CudaAttention : public CudaTest {};

AttentionResult runOnGpu(const Problem &p, int32_t dtype,
                         const std::vector<uint8_t> &qkv,
                         const std::vector<uint8_t> &dout, float lseShift) {
  size_t rows = p.batch * p.heads * p.seq;
  // NaN until the GPU's results are copied in.
  AttentionResult r = poisonedResult(p, dtype);
  ManagedCopy<uint8_t> qkvAt(qkv), doutAt(dout), out(r.out.size()),
      dqkv(r.dqkv.size());
  // The scratch the compiler allocates for the cuda target: the query
  // gradient's f32 sums past the dot products, for the tensor cores'
  // kernels.
  ManagedCopy<float> lse(rows),
      delta(loom_attention_grad_scratch(p.batch, p.seq, p.heads, p.dim,
                                        dtype != LOOM_DTYPE_F32));
  if (!qkvAt.at || !doutAt.at || !out.at || !dqkv.at || !lse.at || !delta.at) {
    ADD_FAILURE() << "no managed memory: " << loom_last_error();
    return r;
  }
  loom_rt_attention(dtype, p.batch, p.seq, p.heads, p.groups, p.dim, qkvAt.at,
                    out.at, lse.at);
  if (!loom::cudaSynchronize()) {
    ADD_FAILURE() << "the forward kernel failed: " << loom_last_error();
    return r;
  }
  std::memcpy(r.lse.data(), lse.at, rows * sizeof(float));
  for (size_t i = 0; i < rows; ++i)
    lse.at[i] += lseShift;
  loom_rt_attention_grad(dtype, p.batch, p.seq, p.heads, p.groups, p.dim,
                         qkvAt.at, out.at, doutAt.at, lse.at, dqkv.at,
                         delta.at);
  if (!loom::cudaSynchronize()) {
    ADD_FAILURE() << "the gradient kernels failed: " << loom_last_error();
    return r;
  }
  std::memcpy(r.out.data(), out.at, r.out.size());
  std::memcpy(r.dqkv.data(), dqkv.at, r.dqkv.size());
  return r;
}
} // namespace

// f32 storage: f32 arithmetic on the CUDA cores, as the CPU's.
TEST_F(CudaAttention, F32MatchesReference) {
  checkAttention(LOOM_DTYPE_F32, {2e-5, 1e-5}, kProblems, runOnGpu);
}

// bf16 and f16 storage: the tensor cores' kernels.
TEST_F(CudaAttention, Bf16MatchesReference) {
  checkAttention(LOOM_DTYPE_BF16, kTensorCoreBf16, kProblems, runOnGpu);
}
TEST_F(CudaAttention, F16MatchesReference) {
  checkAttention(LOOM_DTYPE_F16, kTensorCoreF16, kProblems, runOnGpu);
}
