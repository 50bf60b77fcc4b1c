//===- loomc.cpp - The Loom compiler driver -------------------------------===//
//
// Reads a model description (Loom's JSON format or a Hugging Face GPT-2
// config.json), builds its IR and runs Loom's pipeline up to --emit.
// docs/loomc.md documents every flag.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/Importer.h"
#include "loom/InitLoom.h"
#include "loom/Pipeline/Pipeline.h"
#include "loom/Plan/Planner.h"
#include "loom/Target/Artifact.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace mlir;
using namespace mlir::loom;
namespace cl = llvm::cl;

static cl::OptionCategory loomcCategory("loomc options");

static cl::opt<std::string> inputFilename(
    cl::Positional, cl::desc("<model.json>"), cl::Required,
    cl::value_desc("model description (Loom JSON or Hugging Face config.json)"),
    cl::cat(loomcCategory));

static cl::opt<std::string> outputFilename(
    "o",
    cl::desc("Output file; for the artifact, defaults to the input's name "
             "with the extension .loom"),
    cl::value_desc("file"), cl::cat(loomcCategory));

static cl::opt<EmitStage> emit("emit", cl::desc("What to produce"),
                               cl::init(EmitStage::Artifact),
                               getEmitStageValues(), cl::cat(loomcCategory));

static cl::opt<std::string>
    targetCpu("target-cpu",
              cl::desc("CPU the artifact's code is generated for (default: "
                       "this machine's)"),
              cl::value_desc("name"), cl::cat(loomcCategory));

static cl::opt<bool> summary(
    "summary",
    cl::desc("Print the model, its parameter count and the training setup "
             "to stderr"),
    cl::init(false), cl::cat(loomcCategory));

static cl::opt<std::string> planOverride(
    "plan",
    cl::desc("Parallel plan, replacing the file's: auto (the cost model "
             "chooses) or "
             "dp=N,tp=N,pp=N,zero=0..3,mb=N,schedule=gpipe|1f1b,"
             "recompute=none|selective|full,sp=0|1,precision=fp32|bf16|fp16"),
    cl::value_desc("plan"), cl::cat(loomcCategory));

static cl::opt<int64_t>
    batchOverride("batch-size",
                  cl::desc("Global batch in sequences, replacing the file's"),
                  cl::value_desc("N"), cl::cat(loomcCategory));

static cl::opt<int64_t>
    sequenceOverride("seq-len",
                     cl::desc("Sequence length, replacing the file's"),
                     cl::value_desc("N"), cl::cat(loomcCategory));

static cl::opt<int64_t> padVocab(
    "pad-vocab",
    cl::desc("Pad the token table to a multiple of N rows (llm.c uses 128)"),
    cl::value_desc("N"), cl::cat(loomcCategory));

/// Applies the command line's overrides to the description; reports bad
/// values as errors of the flag.
static bool applyOverrides(ModelConfig &config) {
  bool ok = true;
  auto positive = [&](cl::opt<int64_t> &flag) {
    if (!flag.getNumOccurrences())
      return false;
    if (flag <= 0) {
      llvm::WithColor::error(llvm::errs(), "loomc")
          << "--" << flag.ArgStr << " must be positive, got " << flag << "\n";
      ok = false;
      return false;
    }
    return true;
  };
  if (positive(batchOverride))
    config.training.batchSize = batchOverride;
  if (positive(sequenceOverride))
    config.training.sequenceLength = sequenceOverride;
  if (positive(padVocab))
    config.arch.paddedVocab = static_cast<int64_t>(std::min<uint64_t>(
        llvm::alignTo(config.arch.vocab, padVocab), INT64_MAX));
  if (planOverride.getNumOccurrences() && isAutoPlan(planOverride)) {
    config.plan.reset();
    config.planAuto = true;
  } else if (planOverride.getNumOccurrences()) {
    PlanConfig plan;
    std::optional<Precision> precision;
    ConfigDiagnostics flagDiag("--plan", llvm::errs());
    if (!parsePlanString(planOverride, "--plan", plan, &precision, flagDiag))
      return false;
    config.plan = plan;
    config.planAuto = false;
    if (precision)
      config.training.precision = *precision;
  }
  return ok;
}

static cl::opt<bool> materializedAttention(
    "cost-materialized-attention",
    cl::desc("Price attention as separate kernels that keep the score matrix "
             "(as eager PyTorch runs it) instead of one fused kernel"),
    cl::init(false), cl::cat(loomcCategory));

/// Chooses or checks the plan with the cost model and records it on the
/// module. Returns the exit code when loomc is done: after printing a plan
/// or cost report, or after an error.
static std::optional<int> plan(ModuleOp module, const ModelConfig &config) {
  auto fail = [&](const llvm::Twine &message) {
    llvm::errs() << inputFilename << ": error: " << message << "\n";
    return 1;
  };
  if (!config.cluster)
    return fail("planning needs a 'cluster' section (GPU kind, GPUs per "
                "node, nodes)");
  std::optional<ClusterModel> cluster = ClusterModel::get(*config.cluster);
  if (!cluster)
    return 1;
  CostModelOptions options;
  options.fusedAttention = !materializedAttention;
  FailureOr<CostModel> model = CostModel::build(module, *cluster, options);
  if (failed(model))
    return 1;

  PlanSearch search;
  PlanEstimate chosen;
  bool explicitPlan = config.plan && !config.planAuto;
  if (explicitPlan) {
    chosen = model->estimate(*config.plan, config.training.precision);
    if (!chosen.illegal.empty())
      return fail("plan " +
                  formatPlan(*config.plan, config.training.precision) +
                  " cannot run: " + chosen.illegal);
  } else {
    search = searchPlans(*model);
    if (search.ranked.empty()) {
      if (search.outOfMemory.empty())
        return fail(llvm::formatv("no legal plan for {0} GPUs ({1} tried)",
                                  cluster->getWorldSize(), search.evaluated)
                        .str());
      const PlanEstimate &least = search.outOfMemory.front();
      return fail(
          llvm::formatv("no plan fits: the model needs at least {0:F2} GiB per "
                        "GPU ({1}), and a {2} has {3:F2} GiB",
                        least.memory() / (1024.0 * 1024 * 1024),
                        formatPlan(least.plan, least.precision),
                        cluster->gpu->name,
                        cluster->gpu->memoryBytes / (1024.0 * 1024 * 1024))
              .str());
    }
    chosen = search.ranked.front();
  }
  recordPlan(module, chosen);
  if (emit == EmitStage::Plan) {
    printPlanReport(llvm::outs(), *model, search,
                    explicitPlan ? &chosen : nullptr);
    if (!chosen.fits())
      return fail("plan " + formatPlan(chosen.plan, chosen.precision) +
                  " does not fit in memory");
    return 0;
  }
  if (emit == EmitStage::Cost) {
    printCostReport(llvm::outs(), *model, chosen);
    return 0;
  }
  if (!chosen.fits())
    return fail("plan " + formatPlan(chosen.plan, chosen.precision) +
                " does not fit in memory");
  return std::nullopt;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerLoomPasses();
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "loomc (Loom) " << LOOM_VERSION << ", built with LLVM/MLIR "
       << LLVM_VERSION_STRING << "\n";
  });
  cl::HideUnrelatedOptions({&loomcCategory, &cl::getGeneralCategory()});
  cl::ParseCommandLineOptions(
      argc, argv,
      "Loom compiler driver: a model description in, its training program "
      "out\n\n"
      "  loomc model.json [-o model.loom]            compile the artifact\n"
      "  loomc model.json --emit=<stage> [-o out]    print the IR of a "
      "stage\n");

  std::optional<ModelConfig> config =
      loadModelConfig(inputFilename, llvm::errs());
  if (!config)
    return 1;
  ConfigDiagnostics diag(inputFilename, llvm::errs());
  if (!applyOverrides(*config) || !finalizeModelConfig(*config, diag))
    return 1;

  DialectRegistry registry;
  registerLoomDialects(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);

  OwningOpRef<ModuleOp> module = importModel(context, *config, inputFilename);
  if (failed(verify(*module)))
    return 1;

  if (config->planAuto || emit == EmitStage::Plan || emit == EmitStage::Cost) {
    std::optional<int> exitCode = plan(*module, *config);
    if (exitCode)
      return *exitCode;
  }

  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)))
    return 1;
  buildLoomPipeline(pm, emit, summary);
  if (failed(pm.run(*module)))
    return 1;

  if (emit == EmitStage::Artifact) {
    std::string path = outputFilename;
    if (path.empty()) {
      llvm::SmallString<128> stem(llvm::sys::path::filename(inputFilename));
      llvm::sys::path::replace_extension(stem, "loom");
      path = stem.str().str();
    }
    ArtifactOptions artifact;
    artifact.cpu = targetCpu;
    return failed(writeArtifact(*module, path, artifact)) ? 1 : 0;
  }

  std::string errorMessage;
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename.empty() ? std::string("-") : outputFilename,
                     &errorMessage);
  if (!output) {
    llvm::WithColor::error(llvm::errs(), "loomc") << errorMessage << "\n";
    return 1;
  }
  module->print(output->os());
  output->os() << "\n";
  output->keep();
  return 0;
}
