//===- ScatterRowsTest.cpp - The rows' scatter-add on the CPU -------------===//

#include "ScatterRowsReference.h"
#include "loom/rt.h"

using namespace loom_test;

namespace {
std::vector<float> runOnCpu(const ScatterCase &c, const ScatterProblem &p) {
  std::vector<float> out(p.init);
  // Poisoned: the runtime may read no scratch it did not write.
  std::vector<int32_t> scratch(loom_scatter_add_rows_scratch(c.n, c.rows), -7);
  loom_rt_scatter_add_rows(p.dtype, c.n, c.rows, c.columns, c.rowStart,
                           p.indices.data(), p.stored.data(), out.data(),
                           scratch.data());
  return out;
}
} // namespace

TEST(RuntimeScatterRows, MatchesTheLoopBitForBit) {
  checkScatterCases(runOnCpu);
}

// A row whose sums were not in index order would differ: the cases'
// updates make such sums round differently.
TEST(RuntimeScatterRows, ReferenceSeesTheOrder) {
  ScatterCase c = scatterCases()[2]; // Every index on one row.
  ScatterProblem p = makeScatterProblem(c);
  std::vector<float> inOrder = scatterReference(c, p);
  std::vector<float> reversed(p.init);
  for (int64_t i = c.n - 1; i >= 0; --i)
    for (int64_t col = 0; col < c.columns; ++col)
      reversed[9 * c.columns + col] += p.updates[i * c.columns + col];
  EXPECT_NE(std::memcmp(inOrder.data(), reversed.data(),
                        inOrder.size() * sizeof(float)),
            0);
}
