//===- ManifestRoundTripTest.cpp - The compiler writes, the runtime reads
//--===//
//
// The manifest contract (loom/manifest.h) from both sides: Loom's pipeline
// compiles a model description under several plans to the buffers stage,
// where loom-export-entries has written the manifest into the module, and
// the runtime's reader (loom::openManifest, the one loom_model_open uses)
// reads it back; what it reads must be what the description and the plan
// said. A manifest whose format line, a line's name or a field's name
// differs from the contract's is refused, naming what it did not know.
//
//===----------------------------------------------------------------------===//

#include "Manifest.h"
#include "loom/Dialect/LoomDialect.h"
#include "loom/Import/Importer.h"
#include "loom/Import/ModelConfig.h"
#include "loom/InitLoom.h"
#include "loom/Pipeline/Pipeline.h"
#include "loom/manifest.h"
#include "loom/runtime.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/PassManager.h"

#include "gtest/gtest.h"

#include <optional>
#include <string>

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The manifest loom-export-entries writes for gpt2-tiny under `plan`, or
/// empty with a failure recorded.
std::string compileManifest(llvm::StringRef plan) {
  std::string messages;
  llvm::raw_string_ostream errs(messages);
  std::optional<ModelConfig> config =
      loadModelConfig(LOOM_EXAMPLES_DIR "/gpt2-tiny.json", errs);
  ConfigDiagnostics diag("gpt2-tiny.json", errs);
  PlanConfig parsed;
  if (!config || !parsePlanString(plan, "plan", parsed, nullptr, diag)) {
    ADD_FAILURE() << messages;
    return "";
  }
  config->plan = parsed;
  if (!finalizeModelConfig(*config, diag)) {
    ADD_FAILURE() << messages;
    return "";
  }
  DialectRegistry registry;
  registerLoomDialects(registry);
  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module = importModel(context, *config, "gpt2-tiny");
  PassManager pm(&context);
  LoomPipelineOptions options;
  options.emit = EmitStage::Buffers;
  buildLoomPipeline(pm, options);
  if (failed(pm.run(*module))) {
    ADD_FAILURE() << "the pipeline failed for plan " << plan.str();
    return "";
  }
  auto global = module->lookupSymbol<LLVM::GlobalOp>(LOOM_MANIFEST_SYMBOL);
  auto text = global ? dyn_cast_or_null<StringAttr>(global.getValueOrNull())
                     : StringAttr();
  if (!text) {
    ADD_FAILURE() << "no " LOOM_MANIFEST_SYMBOL " global";
    return "";
  }
  // The global holds the text and its terminating NUL.
  return text.getValue().str().c_str();
}

/// The parameters of gpt2-tiny (examples/gpt2-tiny.json): 4 layers of
/// width 128, a vocabulary of 256 and 64 positions, GPT-2's block.
constexpr int64_t kTinyParams =
    256 * 128 + 64 * 128 + 4 * (12 * 128 * 128 + 13 * 128) + 2 * 128;

struct Opened {
  loom_model *model = nullptr;
  ~Opened() { loom_model_close(model); }
};

void expectReadBack(const std::string &text, int64_t dp, int64_t tp, int64_t pp,
                    int64_t zero, int64_t microBatches) {
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.rfind(std::string(::loom::manifest::kFormatLine) + "\n", 0),
            0u);
  // A pipeline's tensors are laid out by rank, once the job is joined.
  Opened opened{::loom::openManifest(text.c_str(), /*layout=*/pp == 1)};
  ASSERT_NE(opened.model, nullptr) << loom_last_error() << "\n" << text;
  const loom_model_info &info = *loom_model_get_info(opened.model);
  EXPECT_STREQ(info.name, "gpt2-tiny");
  EXPECT_EQ(info.layers, 4);
  EXPECT_EQ(info.width, 128);
  EXPECT_EQ(info.heads, 4);
  EXPECT_EQ(info.hidden, 512);
  EXPECT_EQ(info.vocab, 256);
  EXPECT_EQ(info.positions, 64);
  EXPECT_EQ(info.tied, 1);
  EXPECT_EQ(info.batch, 8);
  EXPECT_EQ(info.sequence, 64);
  EXPECT_STREQ(info.optimizer, "adamw");
  EXPECT_EQ(info.dp, dp);
  EXPECT_EQ(info.tp, tp);
  EXPECT_EQ(info.pp, pp);
  EXPECT_EQ(info.zero, zero);
  EXPECT_EQ(info.micro_batches, microBatches);
  if (pp > 1) {
    // Each rank's memory line follows its entry, which the rank takes when
    // it joins the job.
    EXPECT_STREQ(info.schedule, "1f1b");
    EXPECT_EQ(info.virtual_stages, 1);
    return;
  }
  // The memory line the compiler wrote: this rank's parameters, as f32.
  EXPECT_EQ(info.num_params, kTinyParams);
  EXPECT_EQ(info.param_bytes, info.local_params * 4);
}
} // namespace

TEST(ManifestRoundTrip, OneRank) {
  expectReadBack(compileManifest("mb=2"), 1, 1, 1, 0, 2);
}

// Sharded and split parameters: the arg lines' shard, tp_dim and
// tp_blocks fields.
TEST(ManifestRoundTrip, ShardedAndSplit) {
  expectReadBack(compileManifest("dp=2,tp=2,zero=3"), 2, 2, 1, 3, 1);
}

// A pipeline: an entry per rank with its memory and arena lines, the
// layers each stage's stacked parameters hold, the schedule.
TEST(ManifestRoundTrip, Pipeline) {
  expectReadBack(compileManifest("pp=2,mb=4,schedule=1f1b"), 1, 1, 2, 0, 4);
}

// An offload plan says which: under offload=parameters the runtime keeps
// the parameters' copies in host memory. A value it does not know is
// refused, naming the plan line.
TEST(ManifestRoundTrip, Offload) {
  std::string text = compileManifest("offload=parameters");
  ASSERT_FALSE(text.empty());
  size_t field = text.find(" offload=parameters\n");
  ASSERT_NE(field, std::string::npos) << text;
  {
    Opened opened{::loom::openManifest(text.c_str(), /*layout=*/true)};
    ASSERT_NE(opened.model, nullptr) << loom_last_error();
    const loom_model_info &info = *loom_model_get_info(opened.model);
    EXPECT_EQ(info.param_bytes, 0);
    EXPECT_GT(info.host_bytes, 0);
  }
  std::string bad = text;
  bad.replace(field, std::string(" offload=parameters").size(),
              " offload=disk");
  Opened opened{::loom::openManifest(bad.c_str(), /*layout=*/true)};
  EXPECT_EQ(opened.model, nullptr);
  EXPECT_NE(std::string(loom_last_error()).find("bad offload in the plan line"),
            std::string::npos)
      << loom_last_error();
}

// The reader knows the contract's names and no others: another format, or
// a line or field renamed on one side, is refused, naming it.
TEST(ManifestRoundTrip, OtherNamesAreRefused) {
  std::string text = compileManifest("mb=1");
  ASSERT_FALSE(text.empty());
  auto refused = [](std::string changed, const char *expected) {
    Opened opened{::loom::openManifest(changed.c_str(), /*layout=*/true)};
    EXPECT_EQ(opened.model, nullptr);
    EXPECT_NE(std::string(loom_last_error()).find(expected), std::string::npos)
        << loom_last_error();
  };
  std::string format = text;
  format.replace(0, std::string(::loom::manifest::kFormatLine).size(),
                 "loom-artifact 999");
  refused(format, ::loom::manifest::kFormatLine);
  std::string line = text;
  size_t model = line.find(std::string("\n") + ::loom::manifest::kModelLine);
  ASSERT_NE(model, std::string::npos);
  line.replace(model + 1, std::string(::loom::manifest::kModelLine).size(),
               "architecture");
  refused(line, "unknown line 'architecture");
  std::string field = text;
  size_t width = field.find(std::string(" ") + ::loom::manifest::model::kWidth);
  ASSERT_NE(width, std::string::npos);
  field.replace(width + 1, std::string(::loom::manifest::model::kWidth).size(),
                "channels");
  refused(field, "channels");
}
