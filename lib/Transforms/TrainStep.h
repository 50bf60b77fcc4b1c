//===- TrainStep.h - Building the training step's functions ----*- C++ -*-===//
//
// What loom-build-train-step's two builders share: the one-rank step
// (BuildTrainStep.cpp) and each pipeline rank's step (PipelineStep.cpp)
// both sort a gradient function's arguments, slice micro-batches, and end
// in the same mean, clip and optimizer (buildStep, TrainStep.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_TRAINSTEP_H
#define LOOM_LIB_TRANSFORMS_TRAINSTEP_H

#include "loom/Dialect/LoomDialect.h"
#include "loom/Transforms/Passes.h"

#include <optional>

namespace mlir {
namespace loom {

/// Builds scalar arithmetic on 0-d f32 tensors, the form in which the step
/// carries its loss, norm and hyperparameters.
struct ScalarBuilder {
  OpBuilder &b;
  Location loc;

  Value extract(Value tensor) {
    return tensor::ExtractOp::create(b, loc, tensor, ValueRange{});
  }
  Value wrap(Value scalar) {
    return tensor::FromElementsOp::create(
        b, loc, RankedTensorType::get({}, b.getF32Type()), scalar);
  }
  Value constant(double value) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
  }
};

/// The slice of a stacked tensor that holds `type`'s layers from layer
/// `first` on.
struct LayerSlice {
  SmallVector<OpFoldResult> offsets, sizes, strides;
  LayerSlice(OpBuilder &b, RankedTensorType type, int64_t first)
      : offsets(type.getRank(), b.getIndexAttr(0)),
        strides(type.getRank(), b.getIndexAttr(1)) {
    offsets[0] = b.getIndexAttr(first);
    for (int64_t d : type.getShape())
      sizes.push_back(b.getIndexAttr(d));
  }
};

/// A parameter of the training step: its type there, the attributes it
/// carries (name, divisions), whether it is stacked over layers, and
/// whether its gradient's squares count on this rank (a tied table held by
/// two pipeline stages counts once).
struct StepParam {
  Type type;
  DictionaryAttr attrs;
  bool stacked = false;
  bool countSquares = true;
  StringAttr getName() const {
    return attrs.getAs<StringAttr>(LoomDialect::getParamAttrName());
  }
};

/// A pipeline stage's gradient function split in two at the gradient of its
/// output: `forward` takes what the stage takes and returns its output and
/// the values the backward pass reads (saved); `backward` takes the
/// arguments it reads, the saved values and the output's gradient, and
/// returns the gradients the whole function returned after its output.
struct SplitStage {
  func::FuncOp forward, backward;
  /// For each of backward's leading arguments, the whole function's
  /// argument it is.
  SmallVector<unsigned> backwardArgs;
};

/// Splits a pipeline stage's gradient function in two at the gradient of
/// its output (SplitStage).
FailureOr<SplitStage> splitStage(func::FuncOp grad);

/// Gives argument `arg` of `func` how parameter `p` is divided: sharded by
/// ZeRO-3, a pipeline stage's layers, split by tensor parallelism (a
/// parameter's optimizer state takes the first two).
void setDivisionAttrs(func::FuncOp func, unsigned arg, const StepParam &p,
                      bool split);

/// The 0-d f32 tensor `scalar` summed over grid axis `axis` of the plan's
/// grid (made when missing); null, with the error emitted, on failure.
Value sumOverAxis(OpBuilder &b, Location loc, ModuleOp module,
                  const PlanConfig &plan, Value scalar, shard::GridAxis axis);

/// Sorts a gradient function's arguments into parameters and data inputs.
LogicalResult sortArguments(func::FuncOp grad,
                            SmallVectorImpl<unsigned> &paramArgs,
                            int &tokensArg, int &targetsArg);

/// The replica's share of the batch, in micro-batches of `micro`
/// sequences; checks it against the training batch.
FailureOr<RankedTensorType> getTokensType(func::FuncOp grad,
                                          RankedTensorType micro,
                                          TrainingAttr training,
                                          const PlanConfig &plan);

/// Micro-batch `index` (a constant or an index value) of `data`.
Value sliceMicroBatch(OpBuilder &b, Location loc, Value data,
                      RankedTensorType micro, OpFoldResult index,
                      int64_t numMicroBatches);

/// A tensor of `type` (f32) holding zeros.
Value zerosLike(OpBuilder &b, Location loc, Type type);

/// What a step computes before its optimizer: the loss and each
/// parameter's gradient, summed over the rank's micro-batches, from the
/// step's parameters, tokens and targets.
using SumsBuilder =
    function_ref<SmallVector<Value>(OpBuilder &, ValueRange, Value, Value)>;

/// Builds the step function `name`: `sums` computes the loss and the
/// gradients of `params` summed over this rank's micro-batches; then the
/// mean, the global norm, the clip and the optimizer. A pipeline rank's
/// step (`stage`) sums the loss and the norm's squares over the pipeline.
LogicalResult buildStep(ModuleOp module, OpBuilder &b, Location loc,
                        TrainingAttr training, const PlanConfig &plan,
                        StringRef name, std::optional<int64_t> stage,
                        ArrayRef<StepParam> params, RankedTensorType tokensType,
                        SumsBuilder sums);

/// Builds `name(params, tokens, targets) -> loss`, a pipeline rank's
/// forward passes alone: `losses` sums the last stage's losses over the
/// micro-batches (zero on the other stages), and the function returns
/// their mean, summed over the pipeline so that every rank has it.
LogicalResult
buildEval(ModuleOp module, OpBuilder &b, Location loc, const PlanConfig &plan,
          StringRef name, ArrayRef<StepParam> params,
          RankedTensorType tokensType,
          function_ref<Value(OpBuilder &, ValueRange, Value, Value)> losses);

/// Each pipeline rank's step and forward passes alone (PipelineStep.cpp).
LogicalResult buildPipelineSteps(ModuleOp module, TrainingAttr training,
                                 const PlanConfig &plan);

} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_TRANSFORMS_TRAINSTEP_H
