//===- ScatterRows.cpp - Rows added into the rows their indices name ------===//
//
// loom_rt_scatter_add_rows: the token table's gradient, each token's row of
// the activation's gradient added to its token's row. A counting sort
// orders the indices by row, each row's in index order; each row's
// additions are then a chain of vector additions, and the runtime's threads
// take a range of the columns each: text's frequent tokens give a few rows
// most of the additions, which ranges of rows would give one thread. The
// sums are those of a loop over the indices in order, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "Device.h"
#include "Float.h"
#include "Parallel.h"

#include "loom/abi.h"
#include "loom/rt.h"

#include <algorithm>

namespace {
struct Scatter {
  int64_t rows, columns;
  const void *updates;
  float *out;
  /// Row r's indices are order[begin[r]] to order[begin[r + 1]] - 1.
  const int32_t *begin, *order;
};

float widen(float x) { return x; }
/// bf16 and f16 are read as their bits, marked by the tag.
template <int32_t Dtype> struct Narrow { uint16_t bits; };
float widen(Narrow<LOOM_DTYPE_BF16> x) {
  return loom::bitsFloat(static_cast<uint32_t>(x.bits) << 16);
}
float widen(Narrow<LOOM_DTYPE_F16> x) {
  return loom::bitsFloat(loom::widenHalf(x.bits));
}

/// Adds columns [from, to) of each row's updates, in index order.
template <typename T> void addColumns(void *context, int64_t from, int64_t to) {
  const Scatter &s = *static_cast<const Scatter *>(context);
  const T *updates = static_cast<const T *>(s.updates);
  for (int64_t row = 0; row < s.rows; ++row) {
    float *out = s.out + row * s.columns;
    for (int32_t k = s.begin[row]; k < s.begin[row + 1]; ++k) {
      const T *update = updates + int64_t(s.order[k]) * s.columns;
      for (int64_t c = from; c < to; ++c)
        out[c] += widen(update[c]);
    }
  }
}

template <typename T> void addAll(Scatter &s) {
  if (loom_get_num_threads() > 1 && !loom::isInParallelLoop() && s.columns > 1)
    loom_rt_parallel_for(addColumns<T>, &s, 0, s.columns);
  else
    addColumns<T>(&s, 0, s.columns);
}
} // namespace

extern "C" void loom_rt_scatter_add_rows(int32_t dtype, int64_t n, int64_t rows,
                                         int64_t columns, int64_t row_start,
                                         const int32_t *indices,
                                         const void *updates, float *out,
                                         int32_t *scratch) {
  if (loom::cudaActive())
    return loom::cudaScatterAddRows(dtype, n, rows, columns, row_start, indices,
                                    updates, out, scratch);
  if (n <= 0 || rows <= 0 || columns <= 0)
    return;
  // A counting sort in rows + 1 + n + rows of the scratch's
  // loom_scatter_add_rows_scratch(n, rows) elements: where each row's
  // indices begin, the sorted indices, each row's next free place.
  int32_t *begin = scratch, *order = scratch + rows + 1, *next = order + n;
  auto rowOf = [&](int64_t i) { return int64_t(indices[i]) - row_start; };
  auto held = [&](int64_t row) { return row >= 0 && row < rows; };
  std::fill(begin, begin + rows + 1, 0);
  for (int64_t i = 0; i < n; ++i)
    if (int64_t row = rowOf(i); held(row))
      ++begin[row + 1];
  for (int64_t row = 0; row < rows; ++row) {
    begin[row + 1] += begin[row];
    next[row] = begin[row];
  }
  for (int64_t i = 0; i < n; ++i)
    if (int64_t row = rowOf(i); held(row))
      order[next[row]++] = static_cast<int32_t>(i);

  Scatter s{rows, columns, updates, out, begin, order};
  if (dtype == LOOM_DTYPE_BF16)
    addAll<Narrow<LOOM_DTYPE_BF16>>(s);
  else if (dtype == LOOM_DTYPE_F16)
    addAll<Narrow<LOOM_DTYPE_F16>>(s);
  else
    addAll<float>(s);
}
