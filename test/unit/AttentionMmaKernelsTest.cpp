//===- AttentionMmaKernelsTest.cpp - Tensor-core attention on the CPU -----===//
//
// runtime/lib/kernels/AttentionMma.cu compiled for the CPU, with CUDA's
// built-ins and the warp-level matrix instructions emulated
// (EmulatedCuda.h, EmulatedWarp.h), launched on the grids the CUDA backend
// launches them on, in bf16 and f16, with both head bounds: sequences that
// end inside a block of 64 rows, heads smaller than their bound and heads
// whose rows are not whole 16-byte vectors. The kernels' results must be
// the f64 reference's (AttentionReference.h), as a GPU's must
// (CudaAttentionTest.cpp), which checks their indexing, masking and
// fragment layouts wherever the tests run.
//
//===----------------------------------------------------------------------===//

#include "AttentionReference.h"
#include "Device.h"
#include "loom/abi.h"

#include "EmulatedWarp.h"

// The module the file defines; the tests call its templates for the others.
#define LOOM_ATTENTION_TYPE __nv_bfloat16
#define LOOM_ATTENTION_NAME bf16
#define LOOM_ATTENTION_HEAD 64
#include "kernels/AttentionMma.cu"

using namespace loom_test;

namespace {
/// Small enough for a block's threads to be fibers of the process. The
/// last four have grouped key/value heads (batch, seq, heads, dim,
/// groups): a block of the key gradient walks each query head of its
/// group. 300 and 260 tokens take the key gradient past its first two
/// tiles of queries, where no comparison is needed (into a third block of
/// 128 keys with 260), and a head of 36 channels loads element by element.
const std::vector<Problem> kProblems = {
    {2, 70, 3, 8},      {1, 129, 2, 16},    {3, 5, 1, 4},
    {1, 77, 2, 30},     {1, 100, 1, 48},    {1, 150, 1, 64},
    {2, 70, 6, 8, 2},   {1, 129, 4, 16, 1}, {1, 100, 4, 64, 2},
    {1, 300, 4, 64, 2}, {1, 260, 3, 36}};

template <typename T, int Bound>
void runKernels(const Problem &p, AttentionResult &r,
                const std::vector<uint8_t> &qkvData,
                const std::vector<uint8_t> &doutData, float lseShift) {
  Dim3 grid{static_cast<unsigned>((p.seq + kRows - 1) / kRows),
            static_cast<unsigned>(p.heads), static_cast<unsigned>(p.batch)};
  // The key gradient's blocks take 128 keys of a key/value head each.
  Dim3 keyGrid{static_cast<unsigned>((p.seq + kKeyRows - 1) / kKeyRows),
               static_cast<unsigned>(p.groups ? p.groups : p.heads), grid.z};
  int seq = p.seq, heads = p.heads, groups = p.groups, dim = p.dim;
  float scale = loom::attentionScale(p.dim);
  auto *qkv = reinterpret_cast<const T *>(qkvData.data());
  auto *dout = reinterpret_cast<const T *>(doutData.data());
  auto *out = reinterpret_cast<T *>(r.out.data());
  auto *dqkv = reinterpret_cast<T *>(r.dqkv.data());
  // The call's scratch as the backend splits it: each query's dot product,
  // then the query gradient's f32 sums, NaN until the kernels write them.
  int64_t rows = static_cast<int64_t>(r.lse.size());
  std::vector<float> scratch(
      loom_attention_grad_scratch(p.batch, p.seq, p.heads, p.dim, 1), NAN);
  float *deltaAt = scratch.data(),
        *sums = scratch.data() + loom_attention_query_sums_offset(rows);
  launchGrid(grid, kThreads, true, forward<T, Bound>, qkv, out, r.lse.data(),
             seq, heads, groups, dim, scale);
  std::vector<float> lse(r.lse);
  for (float &x : lse)
    x += lseShift;
  const T *written = out;
  launchGrid(grid, kRows, true, gradDelta<T, Bound>, written, dout, deltaAt,
             sums, seq, heads, groups, dim);
  const float *lseAt = lse.data(), *deltaRead = deltaAt;
  launchGrid(keyGrid, kKeyThreads, true, keyGrad<T, Bound>, qkv, lseAt, dout,
             deltaRead, sums, dqkv, seq, heads, groups, dim, scale);
  launchGrid(grid, kThreads, true, queryGrad<T, Bound>, qkv, lseAt, dout,
             deltaRead, sums, dqkv, seq, heads, groups, dim, scale);
}

AttentionResult runEmulated(const Problem &p, int32_t dtype,
                            const std::vector<uint8_t> &qkv,
                            const std::vector<uint8_t> &dout, float lseShift) {
  AttentionResult r = poisonedResult(p, dtype);
  // The backend's choice: the smallest bound that holds the head.
  bool narrow = p.dim <= 32;
  if (dtype == LOOM_DTYPE_BF16)
    narrow ? runKernels<__nv_bfloat16, 32>(p, r, qkv, dout, lseShift)
           : runKernels<__nv_bfloat16, 64>(p, r, qkv, dout, lseShift);
  else
    narrow ? runKernels<__half, 32>(p, r, qkv, dout, lseShift)
           : runKernels<__half, 64>(p, r, qkv, dout, lseShift);
  return r;
}
} // namespace

TEST(AttentionMmaKernels, Bf16MatchesReference) {
  checkAttention(LOOM_DTYPE_BF16, kTensorCoreBf16, kProblems, runEmulated);
}
TEST(AttentionMmaKernels, F16MatchesReference) {
  checkAttention(LOOM_DTYPE_F16, kTensorCoreF16, kProblems, runEmulated);
}
// The block's threads run from the last one first: where a barrier is
// missing, one of the two orders reads shared memory before it is written
// (removing the key gradient's barrier before dS K fails here, not above).
TEST(AttentionMmaKernels, Bf16MatchesReferenceThreadsReversed) {
  theBlock.reversed = true;
  checkAttention(LOOM_DTYPE_BF16, kTensorCoreBf16, kProblems, runEmulated);
  theBlock.reversed = false;
}
