//===- Replicas.h - What the data-parallel passes share ---------*- C++ -*-===//

#ifndef LOOM_LIB_TRANSFORMS_REPLICAS_H
#define LOOM_LIB_TRANSFORMS_REPLICAS_H

#include "loom/Transforms/Passes.h"

namespace mlir {
namespace loom {

/// The grid's axis of the pipeline stages.
constexpr shard::GridAxis kPipelineAxis = 0;
/// The grid's axis of the replicas, as the plan lays the ranks out
/// (pp x dp x tp, tp fastest).
constexpr shard::GridAxis kReplicaAxis = 1;
/// The grid's axis of the tensor-parallel group.
constexpr shard::GridAxis kTensorAxis = 2;

/// The module's `@loom_grid`, created (private: once the collectives are
/// runtime calls, symbol-dce drops it) with the plan's shape when missing.
/// Fails on a symbol of that name that is not such a grid.
FailureOr<shard::GridOp> getOrCreateGrid(ModuleOp module,
                                         const PlanConfig &plan);

/// The module's @train_step, or an error naming the pass that builds it.
FailureOr<func::FuncOp> getTrainStep(ModuleOp module);

/// The name of pipeline rank `r`'s training step.
std::string getStageStepName(int64_t r);
/// The name of pipeline rank `r`'s forward pass alone (validation).
std::string getStageEvalName(int64_t r);
/// The name of pipeline rank `r`'s scores for sampling (loom-build-logits).
std::string getStageLogitsName(int64_t r);

/// The steps of the pipeline's `pp` ranks in rank order, or an error naming
/// the pass that builds them.
FailureOr<SmallVector<func::FuncOp>> getStageSteps(ModuleOp module, int64_t pp);

/// The plan's training steps: @train_step, or each pipeline rank's in rank
/// order; an error naming the pass that builds them where one is missing.
FailureOr<SmallVector<func::FuncOp>> getSteps(ModuleOp module,
                                              const PlanConfig &plan);

/// Whether `func` takes the gradient of a pipeline stage's output last: a
/// stage's gradient function, or its backward half.
bool takesOutputGradient(func::FuncOp func);

/// @forward, for a pass that rewrites it before differentiation (`what`
/// says what the pass does), or an error when it is missing or @forward_grad
/// exists already.
FailureOr<func::FuncOp> getForwardToDifferentiate(ModuleOp module,
                                                  StringRef what);

/// Whether `value` is taken slice by slice by a layer loop.
bool isStacked(Value value);

/// `v` reshaped to `type`, of the same number of elements.
Value reshape(OpBuilder &b, Location loc, Value v, RankedTensorType type);

} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_TRANSFORMS_REPLICAS_H
