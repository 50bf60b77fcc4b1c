//===- Pipeline.h - The compile pipeline of loomc and loom-opt -*- C++ -*-===//
//
// loomc and `loom-opt --loom-pipeline` build their passes with the same
// function, so an experiment in loom-opt reproduces what the driver does.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PIPELINE_PIPELINE_H
#define LOOM_PIPELINE_PIPELINE_H

#include "loom/Plan/CostModel.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
namespace loom {

/// Where the pipeline stops; loomc's --emit values.
enum class EmitStage {
  /// The imported forward pass and loss over the global batch, verified.
  Loom,
  /// Planned and split into micro-batches, plus @forward_grad and
  /// @train_step, still in loom ops.
  Step,
  /// The step after the parallel passes: one rank's program, with the
  /// collectives (upstream shard ops) that join it to the others.
  Parallel,
  /// Everything lowered to linalg, tensor and scf on tensors.
  Linalg,
  /// Bufferized, with BLAS calls and entry points: the last portable IR.
  Buffers,
  /// The LLVM dialect, ready for translation to LLVM IR.
  LLVM,
  /// The artifact: LLVM dialect compiled to a shared object (loomc only).
  Artifact,
  /// The PTX of every kernel of a --target=cuda step (loomc only).
  Ptx,
  /// The pipeline schedule of the plan, drawn (rank by time slot).
  Schedule,
  /// The cost model's choice of plan and the best alternatives.
  Plan,
  /// The cost model's per-op breakdown of the plan.
  Cost,
  /// A rank's bytes of parameters, gradients and optimizer state, predicted
  /// by the cost model and read off the compiled step.
  Memory,
};

/// The --emit names and what each prints, for loomc's flag and the
/// pipeline's option alike.
llvm::cl::ValuesClass getEmitStageValues();

/// What the step's code runs on.
enum class Target {
  /// Native host code; GEMMs in OpenBLAS through the runtime.
  Cpu,
  /// Host code that launches a GPU kernel per loop nest (PTX embedded in the
  /// artifact); GEMMs in cuBLASLt through the runtime.
  Cuda,
};

llvm::cl::ValuesClass getTargetValues();

/// Where mixed precision applies what a loop does to a GEMM's rounded
/// product: the MLP's GELU and its gradient, a residual connection's add.
enum class EpiloguePlacement {
  /// The target's choice: the epilogue on a GPU, where it spares a pass
  /// over the activations through memory; loops on the CPU, whose
  /// generated loops vectorize the GELU and whose memory is not the bound.
  Target,
  /// The epilogue of the GEMM before it (loom-gemm-epilogues).
  Epilogue,
  /// Generated loops after the GEMM.
  Loops
};

/// The values of --gelu and --residual-add (loomc) and the pipeline's
/// options of the same names.
llvm::cl::ValuesClass getEpiloguePlacementValues();

/// Who computes the loss's softmax statistics (each row's maximum and sum
/// of exponentials over the vocabulary).
enum class LossStatistics {
  /// The target's choice: the runtime on a GPU, whose kernel reads the
  /// logits once; loops on the CPU, whose generated loops vectorize the
  /// exponentials.
  Target,
  /// The runtime (loom.softmax_stats, loom_rt_softmax_stats).
  Runtime,
  /// Generated loops: a maximum, then the sums.
  Loops
};

/// The values of --loss-statistics (loomc) and the pipeline's option.
llvm::cl::ValuesClass getLossStatisticsValues();

struct LoomPipelineOptions : public PassPipelineOptions<LoomPipelineOptions> {
  PassOptions::Option<EmitStage> emit{
      *this, "emit", llvm::cl::desc("Stage to stop after"),
      llvm::cl::init(EmitStage::Loom), getEmitStageValues()};
  PassOptions::Option<bool> summary{
      *this, "summary",
      llvm::cl::desc("Print the model summary (to stderr) on the way"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> materializedAttention{
      *this, "materialized-attention",
      llvm::cl::desc("Let the cost model price attention as separate kernels "
                     "that keep the score matrix"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> fusedAttention{
      *this, "fused-attention",
      llvm::cl::desc("Compute causal attention with the runtime's fused "
                     "kernels, without the [T, T] scores in memory (else "
                     "as generated loops and GEMMs that keep them)"),
      llvm::cl::init(true)};
  PassOptions::Option<Framework> costFramework{
      *this, "cost-framework",
      llvm::cl::desc("Whose memory and overheads the cost model prices"),
      llvm::cl::init(Framework::pytorch), getFrameworkValues()};
  PassOptions::Option<Target> target{
      *this, "target", llvm::cl::desc("What the compiled step runs on"),
      llvm::cl::init(Target::Cpu), getTargetValues()};
  PassOptions::Option<std::string> cudaArch{
      *this, "cuda-arch",
      llvm::cl::desc("The GPU architecture kernels are compiled for, with "
                     "target=cuda (sm_80 or sm_90)"),
      llvm::cl::init("sm_90")};
  PassOptions::Option<std::string> cudaPath{
      *this, "cuda-path",
      llvm::cl::desc("The CUDA toolkit whose libdevice the kernels link, "
                     "with target=cuda"),
      llvm::cl::init("/usr/local/cuda")};
  PassOptions::Option<int64_t> cudaThreadBytes{
      *this, "cuda-thread-bytes",
      llvm::cl::desc("Bytes of its narrowest loaded type each thread of an "
                     "elementwise kernel loads, with target=cuda (0: one "
                     "element per thread)"),
      llvm::cl::init(16)};
  PassOptions::Option<bool> cudaContiguousThreads{
      *this, "cuda-contiguous-threads",
      llvm::cl::desc("A thread of an elementwise kernel runs consecutive "
                     "iterations, its accesses 16 bytes wide where they "
                     "allow, instead of iterations a grid apart, with "
                     "target=cuda"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> cudaNestsPerLaunch{
      *this, "cuda-nests-per-launch",
      llvm::cl::desc("The most neighbouring independent loop nests one "
                     "kernel launch runs, with target=cuda (1: a launch "
                     "per nest)"),
      llvm::cl::init(32)};
  PassOptions::Option<int64_t> cudaReductionRows{
      *this, "cuda-reduction-rows",
      llvm::cl::desc("The fewest iterations of each part a long reduction "
                     "splits into, with target=cuda "
                     "(loom-split-reductions' rows)"),
      llvm::cl::init(256)};
  PassOptions::Option<bool> sortedTokenGradient{
      *this, "sorted-token-gradient",
      llvm::cl::desc("Compute the token table's gradient with the runtime, "
                     "the tokens sorted by row (else as generated loops "
                     "that walk every token per column)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> logits{
      *this, "logits",
      llvm::cl::desc("Add @logits, the next-token scores the runtime "
                     "samples text from (loom-build-logits)"),
      llvm::cl::init(false)};
  PassOptions::Option<LossStatistics> lossStatistics{
      *this, "loss-statistics",
      llvm::cl::desc("Who computes the loss's softmax statistics over "
                     "whole rows of the vocabulary"),
      llvm::cl::init(LossStatistics::Target), getLossStatisticsValues()};
  PassOptions::Option<EpiloguePlacement> gelu{
      *this, "gelu",
      llvm::cl::desc("Where mixed precision applies the MLP's GELU and its "
                     "gradient"),
      llvm::cl::init(EpiloguePlacement::Target), getEpiloguePlacementValues()};
  PassOptions::Option<EpiloguePlacement> residualAdd{
      *this, "residual-add",
      llvm::cl::desc("Where mixed precision adds a linear map's rounded "
                     "product to the residual stream"),
      llvm::cl::init(EpiloguePlacement::Target), getEpiloguePlacementValues()};
  PassOptions::Option<int64_t> embeddingRowBlocks{
      *this, "embedding-row-blocks",
      llvm::cl::desc("Blocks of the token table's rows whose gradient "
                     "columns are parallel iterations of their own, "
                     "without sorted-token-gradient (0: the target's, 64 "
                     "for cuda and 1 for cpu)"),
      llvm::cl::init(0)};
};

/// Adds the passes that take an imported module to `options.emit`.
void buildLoomPipeline(OpPassManager &pm, const LoomPipelineOptions &options);

/// Adds the passes from loop nests on buffers (the `buffers` stage) to the
/// LLVM dialect: outlining, vectorizable math, and the upstream conversions.
/// Buffers are allocated through the runtime's heap.
void buildLowerToLLVMPipeline(OpPassManager &pm);

/// From bufferized loops to the LLVM dialect for the CUDA target: each loop
/// nest a kernel, compiled to PTX for `cudaArch` and embedded in the module.
/// `cudaPath` is the CUDA toolkit whose libdevice the kernels link;
/// `threadBytes` what each thread of an elementwise kernel loads, and
/// `contiguousThreads` whether its iterations are consecutive;
/// `nestsPerLaunch` the most loop nests one launch runs.
void buildLowerToCudaPipeline(OpPassManager &pm, StringRef cudaArch,
                              StringRef cudaPath, int64_t threadBytes,
                              bool contiguousThreads, int64_t nestsPerLaunch);

/// Registers `loom-pipeline` for loom-opt.
void registerLoomPipeline();

/// The compiler loom-plan takes Loom's memory from: it compiles a copy of a
/// module under a plan through the static arena, lowered as `options` say
/// (the target, the attention), and returns each rank's memory as
/// compiled (MemoryCompiler).
MemoryCompiler getMemoryCompiler(const LoomPipelineOptions &options = {});

} // namespace loom
} // namespace mlir

#endif // LOOM_PIPELINE_PIPELINE_H
