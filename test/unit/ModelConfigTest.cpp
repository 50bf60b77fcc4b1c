//===- ModelConfigTest.cpp - Reading model descriptions -------------------===//

#include "loom/Import/ModelConfig.h"

#include "gtest/gtest.h"

using namespace mlir::loom;

namespace {
/// Parses and finalizes `json`, collecting the diagnostics in `messages`.
std::optional<ModelConfig> load(llvm::StringRef json, std::string &messages) {
  llvm::raw_string_ostream os(messages);
  ConfigDiagnostics diag("test.json", os);
  std::optional<ModelConfig> config = parseModelConfig(json, diag);
  if (config && !finalizeModelConfig(*config, diag))
    return std::nullopt;
  return config;
}
} // namespace

TEST(ModelConfig, FillsDerivedSizes) {
  std::string messages;
  std::optional<ModelConfig> config = load(R"({
    "model": {"n_layer": 2, "n_embd": 8, "n_head": 2, "vocab_size": 10},
    "training": {"batch_size": 4, "sequence_length": 16}})",
                                           messages);
  ASSERT_TRUE(config) << messages;
  EXPECT_EQ(config->name, "test");
  EXPECT_EQ(config->arch.hidden, 32);
  EXPECT_EQ(config->arch.paddedVocab, 10);
  // Left out, the positions follow the sequence.
  EXPECT_EQ(config->arch.positions, 16);
  EXPECT_EQ(config->training.optimizer, OptimizerKind::adamw);
  EXPECT_FALSE(config->plan);
  EXPECT_TRUE(messages.empty()) << messages;
}

TEST(ModelConfig, ReadsHuggingFaceConfig) {
  std::string messages;
  std::optional<ModelConfig> config =
      load(R"({"n_layer": 12, "n_embd": 768, "n_head": 12, "n_positions": 1024,
               "vocab_size": 50257, "n_inner": null, "model_type": "gpt2",
               "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-6})",
           messages);
  ASSERT_TRUE(config) << messages;
  EXPECT_EQ(config->arch.hidden, 3072);
  EXPECT_EQ(config->arch.normEpsilon, 1e-6);
  EXPECT_EQ(config->training.batchSize, 1);
  EXPECT_EQ(config->training.sequenceLength, 1024);
  EXPECT_TRUE(messages.empty()) << messages;
}

TEST(ModelConfig, ReportsEveryErrorWithItsField) {
  std::string messages;
  EXPECT_FALSE(load(R"({"model": {"n_layer": 0, "n_embd": 8, "n_head": "2"},
                        "training": {"batch_size": 4}})",
                    messages));
  EXPECT_NE(messages.find("field 'model.n_layer'"), std::string::npos);
  EXPECT_NE(messages.find("field 'model.n_head'"), std::string::npos);
  EXPECT_NE(messages.find("'model.vocab_size'"), std::string::npos);
  EXPECT_NE(messages.find("'training.sequence_length'"), std::string::npos);
}

TEST(PlanString, ReadsEveryKey) {
  std::string messages;
  llvm::raw_string_ostream os(messages);
  ConfigDiagnostics diag("--plan", os);
  PlanConfig plan;
  std::optional<Precision> precision;
  ASSERT_TRUE(parsePlanString("dp=2, tp=4,pp=3,zero=1,mb=8,schedule=1f1b,"
                              "recompute=selective,sp=1,precision=bf16",
                              "--plan", plan, &precision, diag))
      << messages;
  EXPECT_EQ(plan.dp, 2);
  EXPECT_EQ(plan.tp, 4);
  EXPECT_EQ(plan.pp, 3);
  EXPECT_EQ(plan.zero, 1);
  EXPECT_EQ(plan.microBatches, 8);
  EXPECT_EQ(plan.schedule, Schedule::one_f_one_b);
  EXPECT_EQ(plan.recompute, Recompute::selective);
  EXPECT_TRUE(plan.sequenceParallel);
  EXPECT_EQ(precision, Precision::bf16);
}

TEST(PlanString, RejectsBadItems) {
  for (llvm::StringRef text :
       {"dp=0", "zero=4", "dp=2,dp=2", "tp", "mb=x", "sp=yes", "foo=1", ""}) {
    std::string messages;
    llvm::raw_string_ostream os(messages);
    ConfigDiagnostics diag("--plan", os);
    PlanConfig plan;
    std::optional<Precision> precision;
    EXPECT_FALSE(parsePlanString(text, "--plan", plan, &precision, diag))
        << text.str();
    EXPECT_EQ(diag.getNumErrors(), 1u) << text.str() << ": " << messages;
  }
}

TEST(PlanString, RefusesPrecisionWhereNotAccepted) {
  std::string messages;
  llvm::raw_string_ostream os(messages);
  ConfigDiagnostics diag("--plan", os);
  PlanConfig plan;
  EXPECT_FALSE(
      parsePlanString("precision=bf16", "--plan", plan, nullptr, diag));
}
