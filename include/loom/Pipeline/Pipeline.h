//===- Pipeline.h - The compile pipeline of loomc and loom-opt -*- C++ -*-===//
//
// loomc and `loom-opt --loom-pipeline` build their passes with the same
// function, so an experiment in loom-opt reproduces what the driver does.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PIPELINE_PIPELINE_H
#define LOOM_PIPELINE_PIPELINE_H

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
};

/// Adds the passes that take an imported module to `options.emit`.
void buildLoomPipeline(OpPassManager &pm, const LoomPipelineOptions &options);

/// Adds the passes from loop nests on buffers (the `buffers` stage) to the
/// LLVM dialect: outlining, vectorizable math, and the upstream conversions.
/// Buffers are allocated through the runtime's heap.
void buildLowerToLLVMPipeline(OpPassManager &pm);

/// Registers `loom-pipeline` for loom-opt.
void registerLoomPipeline();

} // namespace loom
} // namespace mlir

#endif // LOOM_PIPELINE_PIPELINE_H
