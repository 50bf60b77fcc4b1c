//===- UtilizationTest.cpp - MFU and HFU against published tables ---------===//
//
// Every row of MosaicML's MosaicGPT throughput tables: Loom's model of the
// example at that sequence length has the table's parameter count, and
// MFU/HFU computed from the measured throughput with the catalogue's A100
// peak reproduce the published columns to their four printed decimals.
//
//===----------------------------------------------------------------------===//

#include "loom/Plan/Utilization.h"
#include "loom/Analysis/ModelSummary.h"
#include "loom/Dialect/LoomDialect.h"
#include "loom/Dialect/LoomHardware.h"
#include "loom/Import/Importer.h"

#include "SeedTables.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::loom;

TEST(Utilization, ReproducesMosaicGptTables) {
  std::vector<loom_test::MosaicRow> rows = loom_test::readMosaicRows();
  ASSERT_EQ(rows.size(), 87u);
  MLIRContext context;
  for (const loom_test::MosaicRow &row : rows) {
    SCOPED_TRACE(row.model + " at " + std::to_string(row.sequence) + " on " +
                 std::to_string(row.gpus) + " " + row.gpu);
    // "gpt1b" is examples/mosaicgpt-1b.json.
    std::string path = loom_test::getMosaicExample(row);
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
    EXPECT_EQ(loom_test::round4(flopsUtilization(
                  model, false, sequencesPerSecond, row.gpus, peak)),
              row.mfuStar);
    EXPECT_EQ(loom_test::round4(flopsUtilization(
                  model, true, sequencesPerSecond, row.gpus, peak)),
              row.mfu);
    EXPECT_EQ(loom_test::round4(flopsUtilization(
                  hardware, false, sequencesPerSecond, row.gpus, peak)),
              row.hfuStar);
    EXPECT_EQ(loom_test::round4(flopsUtilization(
                  hardware, true, sequencesPerSecond, row.gpus, peak)),
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
