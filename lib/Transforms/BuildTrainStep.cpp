//===- BuildTrainStep.cpp - The loom-build-train-step pass ----------------===//
//
// Wraps @forward_grad into the whole training step: gradient accumulation
// over micro-batches, the global-norm clip and the optimizer update
// (TrainStep.cpp); for a pipeline, each rank's step and its forward passes
// alone (PipelineStep.cpp).
//
//===----------------------------------------------------------------------===//

#include "Replicas.h"
#include "TrainStep.h"

#include "loom/Dialect/LoomAutodiff.h"
#include "loom/Dialect/LoomDialect.h"
#include "loom/Transforms/Passes.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMBUILDTRAINSTEP
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The step of a plan without a pipeline: @forward_grad on each of the
/// replica's micro-batches, their losses and gradients summed.
LogicalResult buildOneRankStep(ModuleOp module, func::FuncOp grad,
                               TrainingAttr training, const PlanConfig &plan) {
  int64_t numMicroBatches = plan.microBatches;
  Location loc = grad.getLoc();
  SmallVector<unsigned> paramArgs;
  int tokensArg = -1, targetsArg = -1;
  if (failed(sortArguments(grad, paramArgs, tokensArg, targetsArg)))
    return failure();
  if (tokensArg < 0 || targetsArg < 0)
    return grad.emitOpError("expected arguments marked as the tokens and "
                            "targets inputs");
  FunctionType gradType = grad.getFunctionType();
  auto microTokens = cast<RankedTensorType>(gradType.getInput(tokensArg));
  FailureOr<RankedTensorType> tokensType =
      getTokensType(grad, microTokens, training, plan);
  if (failed(tokensType))
    return failure();

  SmallVector<StepParam> params;
  for (unsigned i : paramArgs)
    params.push_back({gradType.getInput(i), grad.getArgAttrDict(i),
                      isStacked(grad.getArgument(i))});
  OpBuilder b(module.getContext());
  b.setInsertionPointAfter(grad);
  auto sums = [&](OpBuilder &b, ValueRange stepParams, Value tokens,
                  Value targets) -> SmallVector<Value> {
    ScalarBuilder s{b, loc};
    // Calls @forward_grad on micro-batch `index` of the tokens and
    // targets.
    auto callGrad = [&](OpFoldResult index) -> func::CallOp {
      SmallVector<Value> operands(gradType.getNumInputs());
      for (auto [k, i] : llvm::enumerate(paramArgs))
        operands[i] = stepParams[k];
      operands[tokensArg] =
          sliceMicroBatch(b, loc, tokens, microTokens, index, numMicroBatches);
      operands[targetsArg] =
          sliceMicroBatch(b, loc, targets, microTokens, index, numMicroBatches);
      return func::CallOp::create(b, loc, grad, operands);
    };
    if (numMicroBatches == 1) {
      auto call = callGrad(b.getIndexAttr(0));
      return SmallVector<Value>(call.getResults());
    }
    // Loss and gradients, summed over the micro-batches.
    SmallVector<Value> init = {s.wrap(s.constant(0.0))};
    for (Value p : stepParams)
      init.push_back(zerosLike(b, loc, p.getType()));
    auto loop = scf::ForOp::create(
        b, loc, arith::ConstantIndexOp::create(b, loc, 0),
        arith::ConstantIndexOp::create(b, loc, numMicroBatches),
        arith::ConstantIndexOp::create(b, loc, 1), init,
        [&](OpBuilder &nested, Location, Value index, ValueRange acc) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nested.getInsertionBlock(),
                              nested.getInsertionPoint());
          auto call = callGrad(index);
          // Gradients too, for the memory plan.
          Location sumLoc = withPhase(loc, Phase::accumulation);
          SmallVector<Value> next;
          for (auto [a, r] : llvm::zip(acc, call.getResults()))
            next.push_back(AddOp::create(b, sumLoc, a, r));
          scf::YieldOp::create(b, loc, next);
        });
    return SmallVector<Value>(loop.getResults());
  };
  return buildStep(module, b, loc, training, plan,
                   LoomDialect::getTrainStepFunctionName(), std::nullopt,
                   params, *tokensType, sums);
}

struct BuildTrainStepPass
    : public loom::impl::LoomBuildTrainStepBase<BuildTrainStepPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto training =
        module->getAttrOfType<TrainingAttr>(LoomDialect::getTrainingAttrName());
    if (!training) {
      module.emitError() << "expected a '" << LoomDialect::getTrainingAttrName()
                         << "' attribute with the optimizer settings";
      return signalPassFailure();
    }
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan))
      return signalPassFailure();
    if (plan->pp > 1) {
      if (failed(buildPipelineSteps(module, training, *plan)))
        return signalPassFailure();
      return;
    }
    auto grad = module.lookupSymbol<func::FuncOp>(
        LoomDialect::getForwardGradFunctionName());
    if (!grad) {
      module.emitError() << "expected a function @"
                         << LoomDialect::getForwardGradFunctionName()
                         << " (run loom-differentiate first)";
      return signalPassFailure();
    }
    if (module.lookupSymbol(LoomDialect::getTrainStepFunctionName())) {
      module.emitError() << "the module already has a function @"
                         << LoomDialect::getTrainStepFunctionName();
      return signalPassFailure();
    }
    if (failed(buildOneRankStep(module, grad, training, *plan)))
      return signalPassFailure();
  }
};
} // namespace
