//===- SeedTables.h - Published measurements for the unit tests -*- C++ -*-===//
//
// Readers of the tables in test/unit/data, copied from Loom's reference
// measurements (seeds 001 and 004) so that the tests run from a clone alone.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_SEEDTABLES_H
#define LOOM_TEST_UNIT_SEEDTABLES_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "gtest/gtest.h"

#include <cmath>
#include <string>
#include <vector>

namespace loom_test {

/// Rounds as the published tables do.
inline double round4(double x) { return std::round(x * 1e4) / 1e4; }

/// The data lines of `file` in test/unit/data, split at commas, each with
/// at least `minFields` fields.
inline std::vector<llvm::SmallVector<std::string>>
readTable(llvm::StringRef file, size_t minFields) {
  std::vector<llvm::SmallVector<std::string>> lines;
  auto buffer = llvm::MemoryBuffer::getFile(std::string(LOOM_TEST_DATA_DIR) +
                                            "/" + file.str());
  EXPECT_TRUE(buffer) << "cannot read " << file.str();
  if (!buffer)
    return lines;
  llvm::SmallVector<llvm::StringRef> text;
  (*buffer)->getBuffer().split(text, '\n', -1, false);
  for (llvm::StringRef line : text) {
    if (line.starts_with("#"))
      continue;
    llvm::SmallVector<llvm::StringRef> fields;
    line.split(fields, ',');
    EXPECT_GE(fields.size(), minFields) << line.str();
    if (fields.size() < minFields)
      continue;
    llvm::SmallVector<std::string> copy;
    for (llvm::StringRef field : fields)
      copy.push_back(field.str());
    lines.push_back(std::move(copy));
  }
  return lines;
}

/// A row of MosaicML's MosaicGPT throughput tables (seed 004).
struct MosaicRow {
  std::string model;
  int64_t sequence = 0, gpus = 0;
  std::string gpu;
  double tokensPerSecond = 0;
  int64_t params = 0;
  bool recompute = false;
  double mfuStar = 0, mfu = 0, hfuStar = 0, hfu = 0;
  int64_t globalBatch = 0, microBatch = 0; ///< In sequences.
};

inline std::vector<MosaicRow> readMosaicRows() {
  std::vector<MosaicRow> rows;
  for (const auto &f : readTable("mosaicgpt-throughput.csv", 13)) {
    MosaicRow row;
    row.model = f[0];
    row.sequence = std::stoll(f[1]);
    row.gpus = std::stoll(f[2]);
    row.gpu = f[3];
    row.tokensPerSecond = std::stod(f[4]);
    row.params = std::stoll(f[5]);
    row.recompute = f[6] == "True";
    row.mfuStar = std::stod(f[7]);
    row.mfu = std::stod(f[8]);
    row.hfuStar = std::stod(f[9]);
    row.hfu = std::stod(f[10]);
    row.globalBatch = std::stoll(f[11]);
    row.microBatch = std::stoll(f[12]);
    rows.push_back(row);
  }
  return rows;
}

/// "gpt1b" is examples/mosaicgpt-1b.json.
inline std::string getMosaicExample(const MosaicRow &row) {
  return std::string(LOOM_EXAMPLES_DIR) + "/mosaicgpt-" + row.model.substr(3) +
         ".json";
}

/// A run of the hand-written GPipe of seed 001: K partitions, M
/// micro-batches, with or without checkpointing; the first three columns
/// of its tables.
struct GpipeRun {
  int64_t partitions = 0, microBatches = 0;
  bool checkpoint = false;
  explicit GpipeRun(llvm::ArrayRef<std::string> fields)
      : partitions(std::stoll(fields[0])), microBatches(std::stoll(fields[1])),
        checkpoint(fields[2] == "1") {}
};

/// A run with the measured peak memory of each device in MiB.
struct GpipeRow : GpipeRun {
  using GpipeRun::GpipeRun;
  std::vector<double> deviceMiB;
};

/// A run timed: the average forward and backward time of a step of 64
/// samples (its samples/s, the table's last column, are 64 over their sum).
struct GpipeTimeRow : GpipeRun {
  using GpipeRun::GpipeRun;
  double forwardSeconds = 0, backwardSeconds = 0;
};

inline std::vector<GpipeTimeRow> readGpipeTimeRows() {
  std::vector<GpipeTimeRow> rows;
  for (const auto &f : readTable("gpipe-001-throughput.csv", 6)) {
    GpipeTimeRow row(f);
    row.forwardSeconds = std::stod(f[3]);
    row.backwardSeconds = std::stod(f[4]);
    rows.push_back(row);
  }
  return rows;
}

inline std::vector<GpipeRow> readGpipeRows() {
  std::vector<GpipeRow> rows;
  for (const auto &f : readTable("gpipe-001.csv", 4)) {
    GpipeRow row(f);
    for (size_t i = 3; i < f.size(); ++i)
      row.deviceMiB.push_back(std::stod(f[i]));
    EXPECT_EQ(row.deviceMiB.size(), static_cast<size_t>(row.partitions));
    rows.push_back(row);
  }
  return rows;
}

/// The median of `values` (taken by value: it is reordered).
inline double median(std::vector<double> values) {
  EXPECT_FALSE(values.empty());
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

} // namespace loom_test

#endif // LOOM_TEST_UNIT_SEEDTABLES_H
