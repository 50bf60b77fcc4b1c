//===- ScatterRowsReference.h - Cases of the rows' scatter-add --*- C++ -*-===//
//
// Cases for the rows' scatter-add and the loop it must equal bit for bit:
// each row's additions in index order. Shared by the CPU's test and the
// GPU's (LoomCudaTests).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_SCATTERROWSREFERENCE_H
#define LOOM_TEST_UNIT_SCATTERROWSREFERENCE_H

#include "Float.h"

#include "loom/abi.h"
#include "loom/runtime.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace loom_test {
struct ScatterCase {
  std::string name;
  int64_t n, rows, columns, rowStart;
  /// Index i's value; outside [rowStart, rowStart + rows) for some.
  std::function<int32_t(int64_t i, std::mt19937 &)> index;
};

/// Small and large, indices spread and piled on one row, chunks of the
/// sort whole and not, rows of a vocabulary's part (rowStart > 0) with
/// indices of other parts, and rows that no index names.
inline std::vector<ScatterCase> scatterCases() {
  auto uniform = [](int64_t lo, int64_t hi) {
    return [lo, hi](int64_t, std::mt19937 &g) {
      return static_cast<int32_t>(
          std::uniform_int_distribution<int64_t>(lo, hi)(g));
    };
  };
  // Text's skew: a few rows take most of the indices.
  auto skewed = [](int64_t rows) {
    return [rows](int64_t i, std::mt19937 &g) {
      if (i % 3 != 2)
        return static_cast<int32_t>(
            std::uniform_int_distribution<int>(0, 3)(g));
      return static_cast<int32_t>(
          std::uniform_int_distribution<int64_t>(0, rows - 1)(g));
    };
  };
  return {
      {"one", 1, 4, 3, 0, uniform(0, 3)},
      {"small", 37, 8, 5, 0, uniform(0, 7)},
      {"one row", 3000, 16, 7, 0, [](int64_t, std::mt19937 &) { return 9; }},
      {"chunks", 4 * LOOM_SCATTER_CHUNK + 17, 300, 33, 0, skewed(300)},
      {"part", 2500, 100, 12, 100, uniform(0, 399)},
      {"empty rows", 700, 5000, 9, 0, uniform(0, 4999)},
      {"wide", 2 * LOOM_SCATTER_CHUNK, 257, 770, 0, skewed(257)},
  };
}

/// The updates as `dtype` stores them, and widened back (the values the
/// sums add), the indices and the table added into.
struct ScatterProblem {
  int32_t dtype;
  std::vector<int32_t> indices;
  std::vector<uint8_t> stored;
  std::vector<float> updates, init;
};

inline ScatterProblem makeScatterProblem(const ScatterCase &c,
                                         int32_t dtype = LOOM_DTYPE_F32) {
  std::mt19937 g(static_cast<unsigned>(c.n * 31 + c.rows));
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  ScatterProblem p;
  p.dtype = dtype;
  for (int64_t i = 0; i < c.n; ++i)
    p.indices.push_back(c.index(i, g));
  int64_t size = dtype == LOOM_DTYPE_F32 ? 4 : 2;
  p.stored.resize(c.n * c.columns * size);
  for (int64_t i = 0; i < c.n * c.columns; ++i) {
    loom::storeElement(dtype, p.stored.data(), i, value(g));
    p.updates.push_back(loom::loadElement(dtype, p.stored.data(), i));
  }
  for (int64_t i = 0; i < c.rows * c.columns; ++i)
    p.init.push_back(value(g));
  return p;
}

/// The loop over the indices in order.
inline std::vector<float> scatterReference(const ScatterCase &c,
                                           const ScatterProblem &p) {
  std::vector<float> out(p.init);
  for (int64_t i = 0; i < c.n; ++i) {
    int64_t row = int64_t(p.indices[i]) - c.rowStart;
    if (row < 0 || row >= c.rows)
      continue;
    for (int64_t col = 0; col < c.columns; ++col)
      out[row * c.columns + col] =
          p.updates[i * c.columns + col] + out[row * c.columns + col];
  }
  return out;
}

/// Runs `scatter` on each case, with updates of each storage type, and
/// compares its result with the loop's, bit for bit.
inline void checkScatterCases(
    const std::function<std::vector<float>(const ScatterCase &,
                                           const ScatterProblem &)> &scatter) {
  for (int32_t dtype : {LOOM_DTYPE_F32, LOOM_DTYPE_BF16, LOOM_DTYPE_F16})
    for (const ScatterCase &c : scatterCases()) {
      SCOPED_TRACE(c.name + " dtype " + std::to_string(dtype));
      ScatterProblem p = makeScatterProblem(c, dtype);
      std::vector<float> expected = scatterReference(c, p);
      std::vector<float> got = scatter(c, p);
      ASSERT_EQ(got.size(), expected.size());
      int64_t differ = 0;
      for (size_t i = 0; i < got.size(); ++i)
        if (std::memcmp(&got[i], &expected[i], sizeof(float)) != 0 &&
            differ++ == 0)
          ADD_FAILURE() << "element " << i << " (row " << i / c.columns
                        << "): " << got[i] << ", expected " << expected[i];
      EXPECT_EQ(differ, 0) << "elements that differ";
    }
}
} // namespace loom_test

#endif // LOOM_TEST_UNIT_SCATTERROWSREFERENCE_H
