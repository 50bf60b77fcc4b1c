//===- Pipeline.cpp - The compile pipeline shared by loomc and loom-opt ---===//

#include "loom/Pipeline/Pipeline.h"

#include "loom/Bufferization/Passes.h"
#include "loom/Conversion/Passes.h"
#include "loom/Export/Passes.h"
#include "loom/Fusion/Passes.h"
#include "loom/GPU/Passes.h"
#include "loom/Lowering/Passes.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

#include "loom/Plan/Planner.h"
#include "loom/abi.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::loom;

llvm::cl::ValuesClass mlir::loom::getEmitStageValues() {
  return llvm::cl::values(
      clEnumValN(EmitStage::Loom, "loom",
                 "the imported forward pass and loss (loom IR)"),
      clEnumValN(EmitStage::Step, "step",
                 "planned, in micro-batches, with the gradient function and "
                 "the training step"),
      clEnumValN(EmitStage::Parallel, "parallel",
                 "one rank's step, with the collectives of the plan"),
      clEnumValN(EmitStage::Linalg, "linalg",
                 "lowered to linalg, tensor and scf on tensors"),
      clEnumValN(EmitStage::Buffers, "buffers",
                 "bufferized, with BLAS calls and C entry points"),
      clEnumValN(EmitStage::LLVM, "llvm", "the LLVM dialect"),
      clEnumValN(EmitStage::Artifact, "artifact",
                 "the compiled artifact the runtime loads (loomc only)"),
      clEnumValN(EmitStage::Ptx, "ptx",
                 "the PTX of every GPU kernel, with --target=cuda (loomc "
                 "only)"),
      clEnumValN(EmitStage::Plan, "plan",
                 "the cost model's chosen plan, the best alternatives and "
                 "the rejected ones"),
      clEnumValN(EmitStage::Cost, "cost",
                 "the cost model's per-op breakdown of the plan"),
      clEnumValN(EmitStage::Schedule, "schedule",
                 "the pipeline schedule of the plan: which micro-batch's "
                 "forward or backward pass each rank runs in each time "
                 "slot"),
      clEnumValN(EmitStage::Memory, "memory",
                 "a rank's bytes of parameters, gradients, optimizer "
                 "state and kept activations: the cost model's and the "
                 "compiled step's"));
}

llvm::cl::ValuesClass mlir::loom::getTargetValues() {
  return llvm::cl::values(
      clEnumValN(Target::Cpu, "cpu", "native code and OpenBLAS"),
      clEnumValN(Target::Cuda, "cuda",
                 "GPU kernels (PTX) and cuBLASLt on an NVIDIA GPU"));
}

llvm::cl::ValuesClass mlir::loom::getEpiloguePlacementValues() {
  return llvm::cl::values(
      clEnumValN(EpiloguePlacement::Target, "target",
                 "the target's: epilogue with cuda, loops with cpu"),
      clEnumValN(EpiloguePlacement::Epilogue, "epilogue",
                 "in the GEMM before it (cuBLASLt's GELU_AUX_BIAS and "
                 "DGELU epilogues, its C, on a GPU)"),
      clEnumValN(EpiloguePlacement::Loops, "loops",
                 "in generated loops after the GEMM"));
}

llvm::cl::ValuesClass mlir::loom::getLossStatisticsValues() {
  return llvm::cl::values(
      clEnumValN(LossStatistics::Target, "target",
                 "the target's: runtime with cuda, loops with cpu"),
      clEnumValN(LossStatistics::Runtime, "runtime",
                 "the runtime's loom_rt_softmax_stats (one read of the "
                 "logits on a GPU)"),
      clEnumValN(LossStatistics::Loops, "loops",
                 "generated loops: a maximum, then the sums"));
}

/// Bufferization and the static arena, on the step the lowering to linalg
/// left.
static void buildBufferizePipeline(OpPassManager &pm, bool printArena,
                                   const LoomGemmEpiloguesOptions &epilogues,
                                   int64_t deviceScalars) {
  // No CSE before bufferization: merged zero-filled tensors would each need
  // a copy once they are written.
  // An offloaded step's layer gradients cross to the host layer by layer,
  // as the backward loop makes them, rather than as whole stacks after it.
  pm.addPass(createLoomStreamTransfers());
  // Values a layer loop saves or stacks (activations for the backward pass,
  // each layer's weight gradients) are computed straight into their slice
  // of the stack instead of being copied there. Before the entry points'
  // results become destinations, which would anchor it too. The
  // elimination does not look through reshapes: those move onto the stacks
  // first.
  pm.addPass(createLoomReshapeDestinations());
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  pm.addPass(createLoomDestinationOutputs());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  // Gradient accumulation over micro-batches yields fresh sums from its loop.
  bufferize.allowReturnAllocsFromLoops = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  // A layer loop's carried activation is read through reshapes (the rows of
  // a linear map): with a fully dynamic layout for the loop's argument, each
  // reshape would copy it first.
  bufferize.unknownTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // An offloaded step's host function updates the master weights and state
  // where they are: what it returns are its arguments, which its call
  // then reads instead of buffers it would have to hand back.
  pm.addPass(bufferization::createDropEquivalentBufferResultsPass());
  pm.addPass(createLoomLowerGridIndices());
  // While the product's f32 buffer is its own allocation, whose uses say
  // when it dies; the arena then holds the narrow result instead.
  pm.addPass(createLoomGemmEpilogues(epilogues));
  // The GELU that stayed in loops, once the epilogues have taken theirs.
  pm.addPass(createLoomExpandScalarFunctions());
  // Before deallocation, which then has one buffer per function to free.
  LoomStaticArenaOptions arena;
  arena.print = printArena;
  arena.deviceScalars = deviceScalars;
  pm.addPass(createLoomStaticArena(arena));
}

namespace {
/// How the step is lowered to linalg, which depends on the target: the
/// lowering's options, and whether long column reductions are split.
struct StepLowering {
  LoomLowerToLinalgOptions linalg;
  bool splitReductions = false;
  LoomSplitReductionsOptions split;
  LoomGemmEpiloguesOptions epilogues;
  /// Whether the artifact gets @logits, to sample from.
  bool logits = false;
  /// The arena's bytes for scalars kernels hand to later kernels.
  int64_t deviceScalars = 0;
};
} // namespace

/// The passes from a resolved plan to `stage`, the static arena at most:
/// the step, its parallel form, linalg, buffers; `print` prints the
/// compiled memory on the way. Returns whether the pipeline ends there.
static bool addStepPasses(OpPassManager &pm, EmitStage stage, bool print,
                          const StepLowering &lowering = {}) {
  pm.addPass(createLoomMicroBatches());
  pm.addPass(createLoomTensorParallel());
  pm.addPass(createLoomShardParameters());
  pm.addPass(createLoomRecompute());
  pm.addPass(createLoomPipelineStages());
  pm.addPass(createLoomDifferentiate());
  pm.addPass(createLoomBuildTrainStep());
  // Folds the tied head's gradient into the embedding's scatter, among
  // others (the canonicalization patterns of loom ops).
  pm.addPass(createCanonicalizerPass());
  if (stage == EmitStage::Step)
    return true;

  pm.addPass(createLoomDataParallel());
  // After the collectives of the gradients, which stay f32 with the
  // optimizer; before the memory report, which counts the narrow storage.
  pm.addPass(createLoomLowerPrecision());
  // After the precision pass, whose conversions of the parameters say what
  // the device's copies hold; before the memory report, which counts them.
  pm.addPass(createLoomPlaceOffload());
  // From @forward as mixed precision left it, so that sampling computes
  // what training does.
  if (lowering.logits)
    pm.addPass(createLoomBuildLogits());
  LoomMemoryReportOptions memory;
  memory.print = print;
  pm.addPass(createLoomMemoryReport(memory));
  if (stage == EmitStage::Parallel)
    return true;

  // Inlining @forward_grad into @train_step lets bufferization see the
  // whole step and update parameters in place.
  pm.addPass(createInlinerPass());
  pm.addPass(createLoomHoistConversions());
  pm.addPass(createLoomLowerToLinalg(lowering.linalg));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createLoomFuseElementwise());
  // After the fusion, which has both passes' reductions read the narrow
  // logits rather than a widened copy each.
  pm.addPass(createLoomMergeReductions());
  // Before bufferization, so that the parts' tensors are in the arena.
  if (lowering.splitReductions)
    pm.addPass(createLoomSplitReductions(lowering.split));
  if (stage == EmitStage::Linalg)
    return true;
  buildBufferizePipeline(pm, print, lowering.epilogues, lowering.deviceScalars);
  return stage == EmitStage::Memory;
}

/// Whether a choice of `target`, `fused` or loops (--gelu, --residual-add,
/// --loss-statistics) takes the fused way: asked for, or the target's
/// choice on a GPU, where it spares a pass over memory.
template <typename Choice>
static bool isFused(Choice choice, Choice fused, Target target) {
  return choice == fused ||
         (choice == Choice::Target && target == Target::Cuda);
}

/// How the step is lowered to linalg for `options`' target and attention.
static StepLowering getLoweringOptions(const LoomPipelineOptions &options) {
  StepLowering lowering;
  lowering.logits = options.logits;
  lowering.linalg.fusedAttention = options.fusedAttention;
  lowering.linalg.sortedTokenGradient = options.sortedTokenGradient;
  lowering.linalg.runtimeSoftmaxStats =
      isFused(options.lossStatistics.getValue(), LossStatistics::Runtime,
              options.target);
  lowering.epilogues.gelu = isFused(
      options.gelu.getValue(), EpiloguePlacement::Epilogue, options.target);
  lowering.epilogues.add = isFused(options.residualAdd.getValue(),
                                   EpiloguePlacement::Epilogue, options.target);
  int64_t rowBlocks = options.embeddingRowBlocks;
  if (options.target == Target::Cuda) {
    // The GPU's fused kernels hold a head's row in a thread's registers.
    lowering.linalg.fusedAttentionMaxHeadDim = LOOM_CUDA_ATTENTION_MAX_HEAD_DIM;
    // The tensor-core kernels sum the query gradient in f32 scratch.
    lowering.linalg.attentionQuerySums = true;
    // A kernel of one thread hands the clipping factor to the optimizer's
    // kernels through the arena (loom-parallel-loops-to-gpu).
    lowering.deviceScalars = 64;
    // A GPU reduces with a warp (a row) or a thread (a column) per output
    // element: long reductions are split into parts for more of them.
    lowering.splitReductions = true;
    lowering.split.rows = options.cudaReductionRows;
    // The token table's gradient as loops (sorted-token-gradient=0): a
    // thread per column walks every token, 768 threads for GPT-2, each
    // adding one token at a time (1.6 ms of an H100's step at 8 x 1024); a
    // thread per column of each (interleaved) block of rows skips the
    // tokens of other blocks (0.96 ms). A CPU has threads enough in the
    // columns, and would only read the tokens more often.
    if (!rowBlocks)
      rowBlocks = 64;
  }
  lowering.linalg.embeddingRowBlocks = rowBlocks ? rowBlocks : 1;
  return lowering;
}

static FailureOr<SmallVector<CompiledRankMemory>>
compileMemory(ModuleOp module, const PlanEstimate &estimate,
              const StepLowering &lowering, std::string &why) {
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module->clone()));
  recordPlan(*copy, estimate);
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  pm.addPass(createLoomPlan());
  addStepPasses(pm, EmitStage::Memory, /*print=*/false, lowering);
  // What the compiler says about the copy is the planner's to report, not
  // the user's module's: the first error is why, remarks are dropped.
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && why.empty())
      why = diag.str();
    return success();
  });
  if (failed(pm.run(*copy))) {
    if (why.empty())
      why = "the compiler failed";
    return failure();
  }
  auto bytes = [](Operation *op, StringRef attr, StringRef key) -> int64_t {
    auto dict = op ? op->getAttrOfType<DictionaryAttr>(attr) : nullptr;
    auto value = dict ? dict.getAs<IntegerAttr>(key) : nullptr;
    return value ? value.getInt() : -1;
  };
  SmallVector<CompiledRankMemory> ranks;
  int64_t pp = estimate.plan.pp;
  for (int64_t r = 0; r < pp; ++r) {
    std::string name = pp > 1 ? (LOOM_STAGE_STEP_PREFIX + Twine(r)).str()
                              : LoomDialect::getTrainStepFunctionName().str();
    Operation *step = copy->lookupSymbol(name);
    // A pipeline rank's memory is its step's; the others' the module's.
    Operation *held = pp > 1 ? step : copy->getOperation();
    CompiledRankMemory rank;
    rank.parameters = bytes(held, LoomDialect::getMemoryAttrName(),
                            LoomDialect::getMemoryParametersKey());
    rank.optimizer = bytes(held, LoomDialect::getMemoryAttrName(),
                           LoomDialect::getMemoryOptimizerKey());
    rank.arena = bytes(step, LoomDialect::getArenaAttrName(),
                       LoomDialect::getArenaBytesKey());
    rank.host = std::max<int64_t>(bytes(held, LoomDialect::getMemoryAttrName(),
                                        LoomDialect::getMemoryHostKey()),
                                  0);
    if (rank.parameters < 0 || rank.optimizer < 0 || rank.arena < 0) {
      why = "the compiled step @" + name +
            " has no memory figures (loom.memory, loom.arena)";
      return failure();
    }
    ranks.push_back(rank);
  }
  return ranks;
}

MemoryCompiler
mlir::loom::getMemoryCompiler(const LoomPipelineOptions &options) {
  MemoryCompiler compiler;
  compiler.compile = [lowering = getLoweringOptions(options)](
                         ModuleOp module, const PlanEstimate &estimate,
                         std::string &why) {
    return compileMemory(module, estimate, lowering, why);
  };
  compiler.getDependentDialects = [](DialectRegistry &registry) {
    OpPassManager pm(ModuleOp::getOperationName());
    addStepPasses(pm, EmitStage::Memory, /*print=*/false);
    pm.getDependentDialects(registry);
  };
  return compiler;
}

void mlir::loom::buildLoomPipeline(OpPassManager &pm,
                                   const LoomPipelineOptions &options) {
  EmitStage stage = options.emit;
  // The module is verified before and after every pass by the pass manager;
  // at the `loom` stage nothing is rewritten yet.
  if (stage == EmitStage::Loom) {
    if (options.summary)
      pm.addPass(createLoomPrintSummary());
    return;
  }

  LoomPlanOptions plan;
  if (stage == EmitStage::Plan)
    plan.report = "plan";
  else if (stage == EmitStage::Cost)
    plan.report = "cost";
  else if (stage == EmitStage::Memory)
    plan.report = "memory";
  else if (stage == EmitStage::Schedule)
    plan.report = "schedule";
  // Loom's own step keeps the scores where it is compiled to.
  plan.materializedAttention =
      options.materializedAttention ||
      (options.costFramework == Framework::loom && !options.fusedAttention);
  plan.framework = options.costFramework;
  pm.addPass(createLoomPlan(plan, getMemoryCompiler(options)));
  if (options.summary)
    pm.addPass(createLoomPrintSummary());
  if (stage == EmitStage::Plan || stage == EmitStage::Cost ||
      stage == EmitStage::Schedule)
    return;
  if (addStepPasses(pm, stage, stage == EmitStage::Memory,
                    getLoweringOptions(options)))
    return;

  // The shard grid, which the collectives' runtime calls no longer name.
  pm.addPass(createSymbolDCEPass());
  LoomExportEntriesOptions entries;
  entries.target = options.target == Target::Cuda ? "cuda" : "cpu";
  entries.cudaArch = options.cudaArch;
  pm.addPass(createLoomExportEntries(entries));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // MLIR's deallocation pipeline, with the ownership of what loops yield
  // from the arena folded to false: a dealloc left conditional on it would
  // be lowered to a run-time alias check with buffers of its own.
  pm.addPass(bufferization::createOwnershipBasedBufferDeallocationPass());
  for (int round = 0; round < 2; ++round) {
    pm.addPass(createLoomFoldFalseLoopFlags());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    pm.addPass(bufferization::createBufferDeallocationSimplificationPass());
  }
  pm.addPass(bufferization::createLowerDeallocationsPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createLoomMatmulToBlas());
  // Attention's loop over heads: an scf.parallel the outliner hands to the
  // runtime's threads.
  pm.addPass(createForallToParallelLoopPass());
  LoomLowerReductionsOptions reductions;
  reductions.parallelOutside = options.target == Target::Cuda;
  pm.addPass(createLoomLowerReductions(reductions));
  pm.addPass(createConvertLinalgToParallelLoopsPass());
  pm.addPass(createCanonicalizerPass());
  if (stage == EmitStage::Buffers)
    return;

  if (options.target == Target::Cuda)
    buildLowerToCudaPipeline(
        pm, options.cudaArch, options.cudaPath, options.cudaThreadBytes,
        options.cudaContiguousThreads, options.cudaNestsPerLaunch);
  else
    buildLowerToLLVMPipeline(pm);
}

/// bf16 conversions as integer arithmetic, on the host: x86 has no
/// instruction for them short of AVX512-BF16 and its C runtime no
/// function. GPU kernels keep the conversions, which sm_80 and later have.
static void addExpandBf16Pass(OpPassManager &pm) {
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
}

/// The host's conversions to the LLVM dialect, after the loops' structure is
/// gone.
static void addHostToLLVMPasses(OpPassManager &pm) {
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  // Buffers come from the runtime's heap, which keeps them between steps,
  // at the alignment asked for rather than padded for it: the heap then
  // counts the arena's own size.
  FinalizeMemRefToLLVMConversionPassOptions memrefToLLVM;
  memrefToLLVM.useGenericFunctions = true;
  memrefToLLVM.useAlignedAlloc = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefToLLVM));
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
}

void mlir::loom::buildLowerToLLVMPipeline(OpPassManager &pm) {
  pm.addPass(createLoomOutlineLoopNests());
  pm.addPass(createLoomApproximateMath());
  addExpandBf16Pass(pm);
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  addHostToLLVMPasses(pm);
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createLoomLowerParallelCalls());
}

void mlir::loom::buildLowerToCudaPipeline(OpPassManager &pm, StringRef cudaArch,
                                          StringRef cudaPath,
                                          int64_t threadBytes,
                                          bool contiguousThreads,
                                          int64_t nestsPerLaunch) {
  // An offload plan's host functions run on the host's threads, as the CPU
  // target's loops do; every other parallel nest becomes a kernel.
  LoomOutlineLoopNestsOptions hostNests;
  hostNests.hostOnly = true;
  pm.addPass(createLoomOutlineLoopNests(hostNests));
  LoomParallelLoopsToGpuOptions launches;
  launches.threadBytes = threadBytes;
  launches.contiguousThreads = contiguousThreads;
  launches.nestsPerLaunch = nestsPerLaunch;
  pm.addPass(createLoomParallelLoopsToGpu(launches));
  pm.addPass(createLoomWaitForDevice());
  // The loops nested in a kernel run in each of its threads, and those left
  // on the host run in order there.
  pm.addPass(createParallelForToNestedForsPass());
  // Constants the host computed go into the kernels rather than their
  // parameters: divisions by them become multiplications, and their
  // floating-point values immediate operands.
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  GpuNVVMAttachTargetOptions nvvm;
  nvvm.chip = cudaArch.str();
  // PTX 8.0, which CUDA 12 and later assemble, is the first with sm_90.
  // checkCudaArch's architectures are those this version knows.
  nvvm.features = "+ptx80";
  nvvm.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(nvvm));
  // Polynomials instead of libdevice's calls, as on the CPU, so that both
  // targets compute the same functions, but for exp, which libdevice
  // computes as accurately in a third of the instructions (the hardware's
  // 2^x); divisions to within two ulp.
  LoomApproximateMathOptions approximate;
  approximate.gpuFastDivision = true;
  approximate.gpuLibdeviceExp = true;
  pm.addPass(createLoomApproximateMath(approximate));
  // The host's bf16 conversions as integer arithmetic, as on the CPU; the
  // kernels' are the GPU's own (cvt.rn.bf16.f32, since sm_80), one
  // instruction where the expansion takes six.
  addExpandBf16Pass(pm.nest<func::FuncOp>());
  pm.addNestedPass<gpu::GPUModuleOp>(arith::createArithExpandOpsPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  ConvertGpuOpsToNVVMOpsOptions kernels;
  kernels.indexBitwidth = 64;
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps(kernels));
  pm.addNestedPass<gpu::GPUModuleOp>(createCanonicalizerPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createCSEPass());
  addHostToLLVMPasses(pm);
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createLoomLowerParallelCalls());
  // PTX text, made in-process by LLVM's NVPTX back end; the driver compiles
  // it for the GPU it finds when the runtime loads the artifact. What the
  // polynomials leave (sqrt, fma, fabs, floor, max), the GPU lowering calls
  // in libdevice, which is linked from the toolkit.
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  binary.toolkitPath = cudaPath.str();
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void mlir::loom::registerLoomPipeline() {
  PassPipelineRegistration<LoomPipelineOptions>(
      "loom-pipeline",
      "Loom's compile pipeline up to a stage, as `loomc --emit=<stage>` runs "
      "it",
      [](OpPassManager &pm, const LoomPipelineOptions &options) {
        buildLoomPipeline(pm, options);
      });
}
