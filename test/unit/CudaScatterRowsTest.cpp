//===- CudaScatterRowsTest.cpp - The rows' scatter-add's GPU kernels ------===//
//
// loom_rt_scatter_add_rows on a GPU against the loop over the indices in
// order, bit for bit: the kernels sort the indices by row and add each
// row's in order, as the CPU does. Skipped without a GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaManaged.h"
#include "Device.h"
#include "ScatterRowsReference.h"
#include "loom/rt.h"

using namespace loom_test;

namespace {
class CudaScatterRows : public CudaTest {};

std::vector<float> runOnGpu(const ScatterCase &c, const ScatterProblem &p) {
  ManagedCopy<int32_t> indices(p.indices);
  ManagedCopy<uint8_t> updates(p.stored);
  ManagedCopy<float> out(p.init);
  ManagedCopy<int32_t> scratch(
      static_cast<size_t>(loom_scatter_add_rows_scratch(c.n, c.rows)));
  // NaN unless the GPU's result is copied in.
  std::vector<float> result(p.init.size(), NAN);
  if (!indices.at || !updates.at || !out.at || !scratch.at) {
    ADD_FAILURE() << "no managed memory: " << loom_last_error();
    return result;
  }
  loom_rt_scatter_add_rows(p.dtype, c.n, c.rows, c.columns, c.rowStart,
                           indices.at, updates.at, out.at, scratch.at);
  if (!loom::cudaSynchronize()) {
    ADD_FAILURE() << "the kernels failed: " << loom_last_error();
    return result;
  }
  std::memcpy(result.data(), out.at, result.size() * sizeof(float));
  return result;
}
} // namespace

TEST_F(CudaScatterRows, MatchesTheLoopBitForBit) {
  checkScatterCases(runOnGpu);
}

// GPT-2's token table at 8 x 1,024 tokens of text-like skew, bf16 updates.
TEST_F(CudaScatterRows, Gpt2TokenTable) {
  ScatterCase c{
      "gpt2", 8 * 1024, 50304, 768, 0, [](int64_t i, std::mt19937 &g) {
        return static_cast<int32_t>(
            i % 4 ? std::uniform_int_distribution<int>(0, 50)(g)
                  : std::uniform_int_distribution<int>(0, 50256)(g));
      }};
  ScatterProblem p = makeScatterProblem(c, LOOM_DTYPE_BF16);
  std::vector<float> expected = scatterReference(c, p);
  std::vector<float> got = runOnGpu(c, p);
  EXPECT_EQ(
      std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
}
