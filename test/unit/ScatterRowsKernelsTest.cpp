//===- ScatterRowsKernelsTest.cpp - The scatter's GPU kernels, on the CPU -===//
//
// runtime/lib/kernels/ScatterRows.cu compiled for the CPU with CUDA's
// built-ins emulated (EmulatedCuda.h), and run as the CUDA backend launches
// it (ScatterRowsPlan.h). The results must equal the loop's bit for bit, as a
// GPU's must (CudaScatterRowsTest.cpp): this checks the kernels' ranks,
// offsets, scan and placement on every machine, GPU or not.
//
//===----------------------------------------------------------------------===//

#include "ScatterRowsPlan.h"
#include "ScatterRowsReference.h"

#include "EmulatedCuda.h"

#include "kernels/ScatterRows.cu"

using namespace loom_test;

namespace {
/// What the CUDA backend launches for loom_rt_scatter_add_rows (Cuda.cpp),
/// in the same order with the same arguments.
std::vector<float> runKernels(const ScatterCase &c, const ScatterProblem &p) {
  std::vector<float> out(p.init);
  std::vector<int32_t> scratch(loom_scatter_add_rows_scratch(c.n, c.rows), -7);
  loom::ScatterRowsPlan plan =
      loom::planScatterRows(c.n, c.rows, c.columns, c.rowStart, scratch.data());
  const int *indices = p.indices.data();
  launch(plan.rankBlocks, 1, loom::kScatterThreads, true, loom_scatter_rank,
         indices, plan.n, plan.rowStart, plan.rows, plan.counts, plan.rank);
  launch(plan.offsetBlocks, 1, loom::kScatterThreads, false,
         loom_scatter_offsets, plan.counts, plan.chunks, plan.rows, plan.begin);
  launch(1, 1, loom::kScatterScanThreads, true, loom_scatter_scan, plan.rows,
         plan.begin);
  launch(plan.placeBlocks, 1, loom::kScatterThreads, false, loom_scatter_place,
         indices, plan.n, plan.rowStart, plan.rows, plan.counts, plan.rank,
         plan.begin, plan.order);
  auto add = [&](auto kernel, auto *updates) {
    launch(plan.addBlocksX, plan.addBlocksY, loom::kScatterThreads, false,
           kernel, updates, plan.columns, plan.begin, plan.order, out.data());
  };
  const void *stored = p.stored.data();
  if (p.dtype == LOOM_DTYPE_BF16)
    add(loom_scatter_add_bf16, static_cast<const __nv_bfloat16 *>(stored));
  else if (p.dtype == LOOM_DTYPE_F16)
    add(loom_scatter_add_f16, static_cast<const __half *>(stored));
  else
    add(loom_scatter_add_f32, static_cast<const float *>(stored));
  return out;
}
} // namespace

TEST(ScatterRowsKernels, MatchTheLoopBitForBit) {
  checkScatterCases(runKernels);
}
