//===- ScatterRowsPlan.h - The rows' scatter-add's GPU launches -*- C++ -*-===//
//
// Where loom_rt_scatter_add_rows's GPU kernels (kernels/ScatterRows.cu) find
// their parts of the scratch and how many blocks each takes: the CUDA
// backend launches by it, and the kernels' test on the CPU
// (test/unit/ScatterRowsKernelsTest.cpp) runs them by it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SCATTERROWSPLAN_H
#define LOOM_RUNTIME_SCATTERROWSPLAN_H

#include "loom/abi.h"

#include <cstdint>

namespace loom {
/// Threads a block: the scan's one block, and every other kernel's.
constexpr int kScatterScanThreads = 1024;
constexpr int kScatterThreads = 256;

struct ScatterRowsPlan {
  /// The kernels' sizes, each within int32 (loom_scatter_add_rows_fits).
  int n, rows, columns, chunks;
  long long rowStart;
  /// The scratch's parts: each chunk's count of each row [chunks][rows],
  /// each index's rank in its chunk [n], the sorted indices [n], where each
  /// row's begin in them [rows + 1].
  int32_t *counts, *rank, *order, *begin;
  /// Blocks of the rank, offsets, place and add kernels (the scan is one
  /// block); add's are (rows, column blocks).
  unsigned rankBlocks, offsetBlocks, placeBlocks, addBlocksX, addBlocksY;
};

/// The plan for `n` indices into `rows` x `columns`.
inline ScatterRowsPlan planScatterRows(int64_t n, int64_t rows, int64_t columns,
                                       int64_t rowStart, int32_t *scratch) {
  int64_t chunks = (n + LOOM_SCATTER_CHUNK - 1) / LOOM_SCATTER_CHUNK;
  auto blocks = [](int64_t items) {
    return static_cast<unsigned>((items + kScatterThreads - 1) /
                                 kScatterThreads);
  };
  ScatterRowsPlan p;
  p.n = static_cast<int>(n);
  p.rows = static_cast<int>(rows);
  p.columns = static_cast<int>(columns);
  p.chunks = static_cast<int>(chunks);
  p.rowStart = rowStart;
  p.counts = scratch;
  p.rank = p.counts + chunks * rows;
  p.order = p.rank + n;
  p.begin = p.order + n;
  p.rankBlocks = static_cast<unsigned>(chunks);
  p.offsetBlocks = blocks(rows);
  p.placeBlocks = blocks(n);
  p.addBlocksX = static_cast<unsigned>(rows);
  p.addBlocksY = blocks(columns);
  return p;
}
} // namespace loom

#endif // LOOM_RUNTIME_SCATTERROWSPLAN_H
