//===- loomc.cpp - The Loom compiler driver -------------------------------===//
//
// Reads a model description (Loom's JSON format or a Hugging Face GPT-2
// config.json), builds its IR and runs Loom's pipeline up to --emit.
// docs/loomc.md documents every flag.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"
#include "loom/Dialect/LoomHardware.h"
#include "loom/Import/Importer.h"
#include "loom/InitLoom.h"
#include "loom/Pipeline/Pipeline.h"
#include "loom/Target/Artifact.h"
#include "loom/Version.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
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

static cl::opt<Target> target("target",
                              cl::desc("What the compiled step runs on"),
                              cl::init(Target::Cpu), getTargetValues(),
                              cl::cat(loomcCategory));

static cl::opt<std::string> cudaArch(
    "cuda-arch",
    cl::desc("GPU architecture of the kernels with --target=cuda: sm_80 "
             "(A100), sm_86, sm_87, sm_89, sm_90 (H100) or sm_90a"),
    cl::init("sm_90"), cl::value_desc("sm_XX"), cl::cat(loomcCategory));

static cl::opt<std::string> cudaPath(
    "cuda-path",
    cl::desc("CUDA toolkit whose libdevice the kernels link, with "
             "--target=cuda (default: $CUDA_HOME, else /usr/local/cuda)"),
    cl::value_desc("dir"), cl::cat(loomcCategory));

static cl::opt<int64_t> cudaThreadBytes(
    "cuda-thread-bytes",
    cl::desc("Bytes of its narrowest loaded type each thread of an "
             "elementwise kernel loads, with --target=cuda (default 16; 0: "
             "one element per thread)"),
    cl::init(16), cl::value_desc("N"), cl::cat(loomcCategory));

static cl::opt<bool> cudaContiguousThreads(
    "cuda-contiguous-threads",
    cl::desc("A thread of an elementwise kernel runs consecutive "
             "iterations, its accesses 16 bytes wide where they allow, "
             "instead of iterations a grid apart, with --target=cuda "
             "(default on; =false for iterations a grid apart)"),
    cl::init(true), cl::cat(loomcCategory));

static cl::opt<int64_t> cudaNestsPerLaunch(
    "cuda-nests-per-launch",
    cl::desc("The most neighbouring independent loop nests one kernel "
             "launch runs, with --target=cuda (default 32; 1: a launch per "
             "nest)"),
    cl::init(32), cl::value_desc("N"), cl::cat(loomcCategory));

static cl::opt<int64_t> cudaReductionRows(
    "cuda-reduction-rows",
    cl::desc("The fewest iterations of each part a long reduction splits "
             "into, with --target=cuda: column sums (a bias's gradient "
             "over the tokens) of at least twice as many rows, row "
             "reductions of at least 16 times (default 256)"),
    cl::init(256), cl::value_desc("N"), cl::cat(loomcCategory));

namespace {
enum class TokenGradient { Sorted, Loops };
} // namespace

static cl::opt<TokenGradient> tokenGradient(
    "token-gradient",
    cl::desc("How the token table's gradient is computed (default sorted)"),
    cl::init(TokenGradient::Sorted),
    cl::values(clEnumValN(TokenGradient::Sorted, "sorted",
                          "the runtime's: the tokens sorted by row, each "
                          "row's added with a thread per column"),
               clEnumValN(TokenGradient::Loops, "loops",
                          "generated loops, each column (of a block of "
                          "rows) walking every token")),
    cl::cat(loomcCategory));

static cl::opt<LossStatistics> lossStatistics(
    "loss-statistics",
    cl::desc("Who computes the loss's softmax statistics (default target)"),
    cl::init(LossStatistics::Target), getLossStatisticsValues(),
    cl::cat(loomcCategory));

static cl::opt<EpiloguePlacement>
    gelu("gelu",
         cl::desc("Where mixed precision applies the MLP's GELU and its "
                  "gradient (default target)"),
         cl::init(EpiloguePlacement::Target), getEpiloguePlacementValues(),
         cl::cat(loomcCategory));

static cl::opt<EpiloguePlacement> residualAdd(
    "residual-add",
    cl::desc("Where mixed precision adds a linear map's rounded product to "
             "the residual stream (default target)"),
    cl::init(EpiloguePlacement::Target), getEpiloguePlacementValues(),
    cl::cat(loomcCategory));

static cl::opt<int64_t> embeddingRowBlocks(
    "embedding-row-blocks",
    cl::desc("With --token-gradient=loops, blocks of the token table's rows "
             "whose gradient columns are parallel iterations of their own "
             "(default 0: 64 with --target=cuda, 1 on the CPU)"),
    cl::init(0), cl::value_desc("N"), cl::cat(loomcCategory));

static cl::opt<bool> summary(
    "summary",
    cl::desc("Print the model, its parameter count and the training setup "
             "to stderr"),
    cl::init(false), cl::cat(loomcCategory));

static cl::opt<std::string> planOverride(
    "plan",
    cl::desc(
        "Parallel plan, replacing the file's: auto (the cost model "
        "chooses) or "
        "dp=N,tp=N,pp=N,zero=0..3,mb=N,schedule=gpipe|1f1b|interleaved,v=N,"
        "recompute=none|selective|full|stage,sp=0|1,precision=fp32|bf16|fp16"),
    cl::value_desc("plan"), cl::cat(loomcCategory));

static cl::opt<int64_t>
    batchOverride("batch-size",
                  cl::desc("Global batch in sequences, replacing the file's"),
                  cl::value_desc("N"), cl::cat(loomcCategory));

static cl::opt<int64_t>
    sequenceOverride("seq-len",
                     cl::desc("Sequence length, replacing the file's"),
                     cl::value_desc("N"), cl::cat(loomcCategory));

static cl::opt<std::string> hfConfig(
    "hf-config",
    cl::desc("Also write the model's Hugging Face config.json to FILE, from "
             "which transformers builds the model loom-run "
             "--export-safetensors' weights fill"),
    cl::value_desc("file"), cl::cat(loomcCategory));

static cl::opt<bool> logits(
    "logits",
    cl::desc("Add an entry point that returns the next-token scores, which "
             "loom-run --sample-every and --generate sample text from "
             "(plans without tensor or pipeline parallelism or ZeRO-3)"),
    cl::init(false), cl::cat(loomcCategory));

static cl::opt<int64_t> totalBatchTokens(
    "total-batch-tokens",
    cl::desc("Tokens of one optimizer step, as llm.c's -d: the description's "
             "batch_size becomes each replica's micro-batch, and the step "
             "accumulates the gradients of as many micro-batches as make N"),
    cl::value_desc("N"), cl::cat(loomcCategory));

static cl::opt<int64_t> padVocab(
    "pad-vocab",
    cl::desc("Pad the token table to a multiple of N rows (llm.c uses 128)"),
    cl::value_desc("N"), cl::cat(loomcCategory));

static cl::opt<double> memoryMargin(
    "memory-margin",
    cl::desc("Share of each GPU's memory a plan must leave free, in [0, 1), "
             "replacing the cluster's memory_margin (default 0.08)"),
    cl::value_desc("fraction"), cl::cat(loomcCategory));

/// --total-batch-tokens N, after the plan: N / sequence sequences a step,
/// in micro-batches of the description's batch_size on each replica (the
/// planner chooses them under --plan auto).
static bool applyTotalBatch(ModelConfig &config) {
  auto error = [](const llvm::Twine &message) {
    llvm::WithColor::error(llvm::errs(), "loomc")
        << "--total-batch-tokens " << totalBatchTokens << ": " << message
        << "\n";
    return false;
  };
  int64_t sequence = config.training.sequenceLength;
  int64_t microBatch = config.training.batchSize;
  if (totalBatchTokens <= 0)
    return error("must be positive");
  if (totalBatchTokens % sequence)
    return error("is not a multiple of the sequence length " +
                 llvm::Twine(sequence));
  int64_t sequences = totalBatchTokens / sequence;
  config.training.batchSize = sequences;
  if (config.planAuto)
    return true;
  PlanConfig plan = config.plan.value_or(PlanConfig());
  if (plan.microBatches != 1)
    return error("gives the micro-batches itself: leave mb out of the plan");
  if (sequences % (microBatch * plan.dp))
    return error("is " + llvm::Twine(sequences) +
                 " sequences, not a multiple of batch_size x dp = " +
                 llvm::Twine(microBatch) + " x " + llvm::Twine(plan.dp));
  plan.microBatches = sequences / (microBatch * plan.dp);
  config.plan = plan;
  return true;
}

/// --hf-config: the description as transformers' config.json.
static LogicalResult writeHfConfig(const ModelConfig &config) {
  llvm::Expected<std::string> text = writeHuggingFaceConfig(config.arch);
  if (!text) {
    llvm::WithColor::error(llvm::errs(), "loomc")
        << "--hf-config " << hfConfig << ": "
        << llvm::toString(text.takeError()) << "\n";
    return failure();
  }
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(hfConfig, &error);
  if (!file) {
    llvm::WithColor::error(llvm::errs(), "loomc")
        << "--hf-config " << hfConfig << ": " << error << "\n";
    return failure();
  }
  file->os() << *text;
  file->keep();
  return success();
}

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
  if (memoryMargin.getNumOccurrences()) {
    if (!(memoryMargin >= 0 && memoryMargin < 1)) {
      llvm::WithColor::error(llvm::errs(), "loomc")
          << "--memory-margin must be in [0, 1), got " << memoryMargin << "\n";
      ok = false;
    } else if (!config.cluster) {
      llvm::WithColor::error(llvm::errs(), "loomc")
          << "--memory-margin needs the description's 'cluster' section\n";
      ok = false;
    } else {
      config.cluster->memoryMargin = memoryMargin;
    }
  }
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
  if (totalBatchTokens.getNumOccurrences())
    ok = applyTotalBatch(config) && ok;
  return ok;
}

static cl::opt<bool> timing(
    "timing",
    cl::desc("Print where the compile's time goes (to stderr): reading and "
             "import, each pass, and for an artifact LLVM's translation, "
             "optimization, code generation and the link"),
    cl::init(false), cl::cat(loomcCategory));

static cl::opt<bool> materializedAttention(
    "cost-materialized-attention",
    cl::desc("Price attention as separate kernels that keep the score matrix "
             "(as eager PyTorch runs it) instead of one fused kernel"),
    cl::init(false), cl::cat(loomcCategory));

namespace {
enum class AttentionLowering { Fused, Materialized };
} // namespace

static cl::opt<AttentionLowering> attention(
    "attention", cl::desc("How causal attention is computed (default fused)"),
    cl::init(AttentionLowering::Fused),
    cl::values(clEnumValN(AttentionLowering::Fused, "fused",
                          "the runtime's fused kernels, without the [T, T] "
                          "scores in memory"),
               clEnumValN(AttentionLowering::Materialized, "materialized",
                          "generated loops and batched GEMMs, with the "
                          "[T, T] scores and probabilities as buffers")),
    cl::cat(loomcCategory));

static cl::opt<Framework> costFramework(
    "cost-framework",
    cl::desc("Whose memory and overheads the cost model prices (default: "
             "loom, the compiled step's own, for what loomc compiles; "
             "pytorch, a PyTorch trainer's, for --emit=plan and --emit=cost, "
             "which predict other frameworks' runs)"),
    cl::init(Framework::pytorch), getFrameworkValues(), cl::cat(loomcCategory));

/// Prints a diagnostic as the description reader does ("model.json: error:
/// ..."), naming the part of the model an op stands for when there is one:
/// the IR's locations are the description file and the op's role.
static void printDiagnostic(Diagnostic &diag) {
  Location loc = diag.getLocation();
  std::string file, part;
  loc->walk([&](Location inner) {
    if (auto fileLoc = dyn_cast<FileLineColLoc>(inner))
      file = fileLoc.getFilename().str();
    else if (auto name = dyn_cast<NameLoc>(inner); name && part.empty())
      part = name.getName().str();
    return WalkResult::advance();
  });
  llvm::raw_ostream &os = llvm::errs();
  os << (file.empty() ? std::string("loomc") : file) << ": ";
  switch (diag.getSeverity()) {
  case DiagnosticSeverity::Error:
    os << "error: ";
    break;
  case DiagnosticSeverity::Warning:
    os << "warning: ";
    break;
  case DiagnosticSeverity::Note:
    os << "note: ";
    break;
  case DiagnosticSeverity::Remark:
    os << "remark: ";
    break;
  }
  if (!part.empty())
    os << "in " << part << ": ";
  os << diag << "\n";
  for (Diagnostic &note : diag.getNotes())
    printDiagnostic(note);
}

/// loomc's exit status when the plan does not fit in the GPUs' memory.
constexpr int kExitDoesNotFit = 2;

/// Prints `module` to -o (standard output by default); the exit status.
static int printModule(ModuleOp module) {
  std::string errorMessage;
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename.empty() ? std::string("-") : outputFilename,
                     &errorMessage);
  if (!output) {
    llvm::WithColor::error(llvm::errs(), "loomc") << errorMessage << "\n";
    return 1;
  }
  module.print(output->os());
  output->os() << "\n";
  output->keep();
  return 0;
}

/// The code generation flags, before any pass runs: each error names its
/// flag.
static bool checkCodeGenerationFlags() {
  // Numeric flags with a lower bound.
  for (auto [flag, least] :
       {std::pair<cl::opt<int64_t> *, int64_t>{&cudaThreadBytes, 0},
        {&cudaNestsPerLaunch, 1},
        {&cudaReductionRows, 1},
        {&embeddingRowBlocks, 0}}) {
    if (*flag >= least)
      continue;
    llvm::WithColor::error(llvm::errs(), "loomc")
        << "--" << flag->ArgStr << " must be at least " << least << ", got "
        << *flag << "\n";
    return false;
  }
  // Before any pass: LLVM's NVPTX back end aborts on an architecture it
  // does not know, and the passes would report one per op.
  if (target == Target::Cuda || cudaArch.getNumOccurrences()) {
    std::string why = checkCudaArch(cudaArch);
    if (!why.empty()) {
      llvm::WithColor::error(llvm::errs(), "loomc")
          << "--cuda-arch=" << cudaArch << ": " << why << "\n";
      return false;
    }
  }
  if (emit == EmitStage::Ptx && target != Target::Cuda) {
    llvm::WithColor::error(llvm::errs(), "loomc")
        << "--emit=ptx needs --target=cuda: a CPU step has no kernels\n";
    return false;
  }
  return true;
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
  // MLIR's and LLVM's own flags still work; --help lists loomc's.
  cl::HideUnrelatedOptions(loomcCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "Loom compiler driver: a model description in, its training program "
      "out\n\n"
      "  loomc model.json [-o model.loom]            compile the artifact\n"
      "  loomc model.json --emit=<stage> [-o out]    print the IR of a "
      "stage\n");

  DefaultTimingManager timingManager;
  timingManager.setEnabled(timing);
  timingManager.setDisplayMode(DefaultTimingManager::DisplayMode::Tree);
  TimingScope rootTimer = timingManager.getRootScope();

  TimingScope importTimer = rootTimer.nest("read and import the description");
  std::optional<ModelConfig> config =
      loadModelConfig(inputFilename, llvm::errs());
  if (!config)
    return 1;
  ConfigDiagnostics diag(inputFilename, llvm::errs());
  if (!applyOverrides(*config) || !finalizeModelConfig(*config, diag))
    return 1;
  if (!hfConfig.empty() && failed(writeHfConfig(*config)))
    return 1;

  DialectRegistry registry;
  registerLoomDialects(registry);
  MLIRContext context(registry);
  // Diagnostics name the file and the field; a dump of the module (which for
  // a large model is megabytes) would bury them.
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler diagnostics(&context, [](Diagnostic &diag) {
    printDiagnostic(diag);
    return success();
  });

  OwningOpRef<ModuleOp> module = importModel(context, *config, inputFilename);
  if (failed(verify(*module)))
    return 1;
  importTimer.stop();

  if (!checkCodeGenerationFlags())
    return 1;

  std::string toolkit = cudaPath;
  if (toolkit.empty()) {
    const char *home = std::getenv("CUDA_HOME");
    toolkit = home && *home ? home : "/usr/local/cuda";
  }
  if (target == Target::Cuda &&
      !llvm::sys::fs::exists(toolkit + "/nvvm/libdevice/libdevice.10.bc")) {
    llvm::WithColor::error(llvm::errs(), "loomc")
        << "--target=cuda needs a CUDA toolkit's libdevice, and there is no "
        << toolkit
        << "/nvvm/libdevice/libdevice.10.bc (--cuda-path names the "
           "toolkit)\n";
    return 1;
  }

  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)))
    return 1;
  pm.enableTiming(rootTimer);
  LoomPipelineOptions pipeline;
  pipeline.emit = emit;
  pipeline.summary = summary;
  pipeline.materializedAttention = materializedAttention;
  pipeline.fusedAttention = attention == AttentionLowering::Fused;
  // A plan loomc compiles is chosen by the memory it will have; the
  // reports price the trainer they are compared with.
  bool report = emit == EmitStage::Plan || emit == EmitStage::Cost;
  pipeline.costFramework = costFramework.getNumOccurrences() || report
                               ? costFramework.getValue()
                               : Framework::loom;
  pipeline.target = target;
  pipeline.cudaArch = cudaArch;
  pipeline.cudaPath = toolkit;
  pipeline.cudaThreadBytes = cudaThreadBytes;
  pipeline.cudaContiguousThreads = cudaContiguousThreads;
  pipeline.cudaNestsPerLaunch = cudaNestsPerLaunch;
  pipeline.cudaReductionRows = cudaReductionRows;
  pipeline.sortedTokenGradient = tokenGradient == TokenGradient::Sorted;
  pipeline.embeddingRowBlocks = embeddingRowBlocks;
  pipeline.gelu = gelu;
  pipeline.residualAdd = residualAdd;
  pipeline.lossStatistics = lossStatistics;
  pipeline.logits = logits;
  buildLoomPipeline(pm, pipeline);
  if (failed(pm.run(*module)))
    // A plan that does not fit in memory is not bad input: scripts that try
    // plans tell the two apart (docs/loomc.md).
    return (*module)->hasAttr(LoomDialect::getDoesNotFitAttrName())
               ? kExitDoesNotFit
               : 1;
  // The plan, cost and memory reports went to stdout on the way.
  if (emit == EmitStage::Plan || emit == EmitStage::Cost ||
      emit == EmitStage::Memory || emit == EmitStage::Schedule)
    return 0;

  if (emit == EmitStage::Ptx)
    return failed(writePtx(*module, outputFilename.empty()
                                        ? std::string("-")
                                        : std::string(outputFilename)))
               ? 1
               : 0;

  if (emit == EmitStage::Artifact) {
    std::string path = outputFilename;
    if (path.empty()) {
      llvm::SmallString<128> stem(llvm::sys::path::filename(inputFilename));
      llvm::sys::path::replace_extension(stem, "loom");
      path = stem.str().str();
    }
    ArtifactOptions artifact;
    artifact.cpu = targetCpu;
    return failed(writeArtifact(*module, path, artifact, &rootTimer)) ? 1 : 0;
  }

  TimingScope printTimer = rootTimer.nest("print the IR");
  return printModule(*module);
}
