//===- UtilizationTest.cpp - MFU and HFU against published tables ---------===//
//
// Every row of MosaicML's MosaicGPT throughput tables: Loom's model of the
// example at that sequence length has the table's parameter count, and
// MFU/HFU computed from the measured throughput with the catalogue's A100
// peak reproduce the published columns to their four printed decimals.
//
//===----------------------------------------------------------------------===//

#include "loom/CostModel/Utilization.h"
#include "Loom/LoomDialect.h"
#include "loom/Analysis/ModelSummary.h"
#include "loom/CostModel/Hardware.h"
#include "loom/Import/Importer.h"

#include "llvm/Support/MemoryBuffer.h"
#include "gtest/gtest.h"

#include <cmath>

using namespace mlir;
using namespace mlir::loom;

namespace {
/// Rounds as the published table does.
double round4(double x) { return std::round(x * 1e4) / 1e4; }

struct Row {
  std::string model;
  int64_t sequence, gpus;
  std::string gpu;
  double tokensPerSecond;
  int64_t params;
  bool recompute;
  double mfuStar, mfu, hfuStar, hfu;
};

std::vector<Row> readRows() {
  std::vector<Row> rows;
  auto buffer = llvm::MemoryBuffer::getFile(LOOM_TEST_DATA_DIR
                                            "/mosaicgpt-throughput.csv");
  EXPECT_TRUE(buffer) << "cannot read the table";
  if (!buffer)
    return rows;
  llvm::SmallVector<llvm::StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n', -1, false);
  for (llvm::StringRef line : lines) {
    if (line.starts_with("#"))
      continue;
    llvm::SmallVector<llvm::StringRef> f;
    line.split(f, ',');
    EXPECT_EQ(f.size(), 11u) << line.str();
    if (f.size() != 11)
      continue;
    Row row;
    row.model = f[0].str();
    f[1].getAsInteger(10, row.sequence);
    f[2].getAsInteger(10, row.gpus);
    row.gpu = f[3].str();
    f[4].getAsDouble(row.tokensPerSecond);
    f[5].getAsInteger(10, row.params);
    row.recompute = f[6] == "True";
    f[7].getAsDouble(row.mfuStar);
    f[8].getAsDouble(row.mfu);
    f[9].getAsDouble(row.hfuStar);
    f[10].getAsDouble(row.hfu);
    rows.push_back(row);
  }
  return rows;
}
} // namespace

TEST(Utilization, ReproducesMosaicGptTables) {
  std::vector<Row> rows = readRows();
  ASSERT_EQ(rows.size(), 87u);
  MLIRContext context;
  for (const Row &row : rows) {
    SCOPED_TRACE(row.model + " at " + std::to_string(row.sequence) + " on " +
                 std::to_string(row.gpus) + " " + row.gpu);
    // "gpt1b" is examples/mosaicgpt-1b.json.
    std::string path = std::string(LOOM_EXAMPLES_DIR) + "/mosaicgpt-" +
                       row.model.substr(3) + ".json";
    std::optional<ModelConfig> config = loadModelConfig(path, llvm::errs());
    ASSERT_TRUE(config);
    config->training.sequenceLength = row.sequence;
    std::string messages;
    llvm::raw_string_ostream os(messages);
    ConfigDiagnostics diag(path, os);
    ASSERT_TRUE(finalizeModelConfig(*config, diag)) << messages;
    OwningOpRef<ModuleOp> module = importModel(context, *config, path);
    FailureOr<ModelSummary> summary = summarizeModel(*module);
    ASSERT_TRUE(succeeded(summary));
    EXPECT_EQ(summary->totalParameters, row.params);

    const GpuSpec *gpu = lookupGpu(row.gpu);
    ASSERT_TRUE(gpu);
    double peak = gpu->matrixPeak(Precision::bf16);
    double sequencesPerSecond = row.tokensPerSecond / row.sequence;
    FlopsPerSequence model =
        trainingFlopsPerSequence(row.params, config->arch.layers,
                                 config->arch.width, row.sequence, false);
    FlopsPerSequence hardware = trainingFlopsPerSequence(
        row.params, config->arch.layers, config->arch.width, row.sequence,
        row.recompute);
    EXPECT_EQ(round4(flopsUtilization(model, false, sequencesPerSecond,
                                      row.gpus, peak)),
              row.mfuStar);
    EXPECT_EQ(round4(flopsUtilization(model, true, sequencesPerSecond, row.gpus,
                                      peak)),
              row.mfu);
    EXPECT_EQ(round4(flopsUtilization(hardware, false, sequencesPerSecond,
                                      row.gpus, peak)),
              row.hfuStar);
    EXPECT_EQ(round4(flopsUtilization(hardware, true, sequencesPerSecond,
                                      row.gpus, peak)),
              row.hfu);
  }
}

TEST(Hardware, LooksUpEveryKind) {
  for (llvm::StringRef name :
       {"V100-16GB", "V100-32GB", "A100-40GB", "A100-80GB", "H100-SXM", "H200"})
    EXPECT_TRUE(lookupGpu(name)) << name.str();
  EXPECT_TRUE(lookupGpu("a100-80gb"));
  EXPECT_FALSE(lookupGpu("A100"));
  // V100 has no bf16 tensor cores; fp32 matrix work falls back to the vector
  // peak there and uses TF32 on A100.
  EXPECT_EQ(lookupGpu("V100-32GB")->matrixPeak(Precision::bf16), 0.0);
  EXPECT_EQ(lookupGpu("V100-32GB")->matrixPeak(Precision::fp32), 15.7e12);
  EXPECT_EQ(lookupGpu("A100-40GB")->matrixPeak(Precision::fp32), 156e12);
  EXPECT_GT(lookupGpu("H200")->memoryBytes, lookupGpu("H100-SXM")->memoryBytes);
}
