//===- BuildTrainStep.cpp - The loom-build-train-step pass ----------------===//
//
// Wraps @forward_grad into the whole training step: gradient accumulation
// over micro-batches, the global-norm clip and the optimizer update.
//
//===----------------------------------------------------------------------===//

#include "Replicas.h"

#include "Loom/LoomDialect.h"
#include "loom/Transforms/Passes.h"
#include "loom/abi.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMBUILDTRAINSTEP
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
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

struct BuildTrainStepPass
    : public loom::impl::LoomBuildTrainStepBase<BuildTrainStepPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto grad = module.lookupSymbol<func::FuncOp>(
        LoomDialect::getForwardGradFunctionName());
    if (!grad && llvm::any_of(module.getOps<func::FuncOp>(), [](auto func) {
          return func->hasAttr(LoomDialect::getStageAttrName());
        })) {
      module.emitError("a pipeline plan's stages are differentiated, but "
                       "their schedule (sends and receives between the "
                       "stages, per rank) is not built into a training "
                       "step yet");
      return signalPassFailure();
    }
    if (!grad) {
      module.emitError() << "expected a function @"
                         << LoomDialect::getForwardGradFunctionName()
                         << " (run loom-differentiate first)";
      return signalPassFailure();
    }
    auto training =
        module->getAttrOfType<TrainingAttr>(LoomDialect::getTrainingAttrName());
    if (!training) {
      module.emitError() << "expected a '" << LoomDialect::getTrainingAttrName()
                         << "' attribute with the optimizer settings";
      return signalPassFailure();
    }
    if (module.lookupSymbol(LoomDialect::getTrainStepFunctionName())) {
      module.emitError() << "the module already has a function @"
                         << LoomDialect::getTrainStepFunctionName();
      return signalPassFailure();
    }
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan) || failed(build(module, grad, training, *plan)))
      return signalPassFailure();
  }

  LogicalResult build(ModuleOp module, func::FuncOp grad, TrainingAttr training,
                      const PlanConfig &plan) {
    int64_t numMicroBatches = plan.microBatches;
    MLIRContext *ctx = module.getContext();
    Location loc = grad.getLoc();
    OpBuilder b(ctx);
    b.setInsertionPointAfter(grad);

    if (!llvm::all_of(grad.getArgumentTypes(), llvm::IsaPred<RankedTensorType>))
      return grad.emitOpError("expected tensor arguments (the training step "
                              "is built before bufferization)");
    // Sort @forward_grad's arguments into parameters and data inputs.
    SmallVector<unsigned> paramArgs;
    int tokensArg = -1, targetsArg = -1;
    for (unsigned i = 0, e = grad.getNumArguments(); i < e; ++i) {
      if (grad.getArgAttr(i, LoomDialect::getParamAttrName()))
        paramArgs.push_back(i);
      else if (auto input = grad.getArgAttrOfType<StringAttr>(
                   i, LoomDialect::getInputAttrName())) {
        if (input.getValue() == LOOM_INPUT_TOKENS)
          tokensArg = i;
        else if (input.getValue() == LOOM_INPUT_TARGETS)
          targetsArg = i;
      }
    }
    if (tokensArg < 0 || targetsArg < 0)
      return grad.emitOpError("expected arguments marked as the tokens and "
                              "targets inputs");
    FunctionType gradType = grad.getFunctionType();
    auto microTokens = cast<RankedTensorType>(gradType.getInput(tokensArg));
    // Each of the dp replicas takes its share of the batch in micro-batches.
    if (microTokens.getDimSize(0) * numMicroBatches * plan.dp !=
        training.getBatch())
      return grad.emitOpError()
             << "takes " << microTokens.getDimSize(0)
             << " sequences, and the training batch of " << training.getBatch()
             << " is not dp * micro_batches = " << plan.dp << " * "
             << numMicroBatches
             << " micro-batches of them (run loom-micro-batches first)";
    auto tokensType =
        RankedTensorType::get({microTokens.getDimSize(0) * numMicroBatches,
                               microTokens.getDimSize(1)},
                              microTokens.getElementType());

    bool adam = training.getOptimizer() == OptimizerKind::adamw;
    unsigned numParams = paramArgs.size();
    unsigned numStates = adam ? 2 : 1;
    auto scalarType = RankedTensorType::get({}, b.getF32Type());

    // Signature: params, states (m then v, or momentum buffers), tokens,
    // targets, lr, step.
    SmallVector<Type> inputs;
    for (unsigned s = 0; s <= numStates; ++s)
      for (unsigned i : paramArgs)
        inputs.push_back(gradType.getInput(i));
    inputs.append({tokensType, tokensType, scalarType, scalarType});
    SmallVector<Type> results = {scalarType, scalarType};
    results.append(inputs.begin(),
                   inputs.begin() + (numStates + 1) * numParams);
    auto step =
        func::FuncOp::create(b, loc, LoomDialect::getTrainStepFunctionName(),
                             b.getFunctionType(inputs, results));

    // Argument and result attributes name everything for the manifest.
    static const char *const stateNames[] = {LOOM_STATE_ADAM_M,
                                             LOOM_STATE_ADAM_V};
    for (unsigned s = 0; s <= numStates; ++s) {
      for (auto [k, i] : llvm::enumerate(paramArgs)) {
        auto name = grad.getArgAttrOfType<StringAttr>(
            i, LoomDialect::getParamAttrName());
        unsigned arg = s * numParams + k;
        // Optimizer state is shaped and sharded as its parameter.
        if (Attribute shard =
                grad.getArgAttr(i, LoomDialect::getShardAttrName()))
          step.setArgAttr(arg, LoomDialect::getShardAttrName(), shard);
        // The runtime divides a parameter's state as the parameter.
        if (s == 0) {
          step.setArgAttr(arg, LoomDialect::getParamAttrName(), name);
          if (Attribute split =
                  grad.getArgAttr(i, LoomDialect::getTensorSplitAttrName()))
            step.setArgAttr(arg, LoomDialect::getTensorSplitAttrName(), split);
        } else
          step.setArgAttr(arg, LoomDialect::getStateAttrName(),
                          b.getStringAttr(Twine(adam ? stateNames[s - 1]
                                                     : LOOM_STATE_MOMENTUM) +
                                          "." + name.getValue()));
        step.setResultAttr(2 + arg, LoomDialect::getUpdatesAttrName(),
                           b.getI64IntegerAttr(arg));
      }
    }
    unsigned dataArg = (numStates + 1) * numParams;
    step.setArgAttr(dataArg, LoomDialect::getInputAttrName(),
                    b.getStringAttr(LOOM_INPUT_TOKENS));
    step.setArgAttr(dataArg + 1, LoomDialect::getInputAttrName(),
                    b.getStringAttr(LOOM_INPUT_TARGETS));
    step.setArgAttr(dataArg + 2, LoomDialect::getInputAttrName(),
                    b.getStringAttr(LOOM_INPUT_LR));
    step.setArgAttr(dataArg + 3, LoomDialect::getInputAttrName(),
                    b.getStringAttr(LOOM_INPUT_STEP));
    step.setResultAttr(0, LoomDialect::getOutputAttrName(),
                       b.getStringAttr(LOOM_OUTPUT_LOSS));
    step.setResultAttr(1, LoomDialect::getOutputAttrName(),
                       b.getStringAttr(LOOM_OUTPUT_GRAD_NORM));

    Block *entry = step.addEntryBlock();
    b.setInsertionPointToStart(entry);
    ScalarBuilder s{b, loc};
    auto params = entry->getArguments().take_front(numParams);
    Value tokens = entry->getArgument(dataArg);
    Value targets = entry->getArgument(dataArg + 1);
    Value lr = entry->getArgument(dataArg + 2);
    Value stepNumber = entry->getArgument(dataArg + 3);

    // Calls @forward_grad on micro-batch `index` of the tokens and targets.
    auto callGrad = [&](Value index) -> func::CallOp {
      SmallVector<Value> operands(gradType.getNumInputs());
      for (auto [k, i] : llvm::enumerate(paramArgs))
        operands[i] = params[k];
      auto slice = [&](Value data) -> Value {
        if (numMicroBatches == 1)
          return data;
        int64_t rows = microTokens.getDimSize(0);
        Value offset = arith::MulIOp::create(
            b, loc, index, arith::ConstantIndexOp::create(b, loc, rows));
        SmallVector<OpFoldResult> offsets = {offset, b.getIndexAttr(0)};
        SmallVector<OpFoldResult> sizes = {
            b.getIndexAttr(rows), b.getIndexAttr(microTokens.getDimSize(1))};
        SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
        return tensor::ExtractSliceOp::create(b, loc, microTokens, data,
                                              offsets, sizes, strides);
      };
      operands[tokensArg] = slice(tokens);
      operands[targetsArg] = slice(targets);
      return func::CallOp::create(b, loc, grad, operands);
    };

    // Loss and gradients, summed over the micro-batches.
    SmallVector<Value> sums;
    if (numMicroBatches == 1) {
      auto call = callGrad(Value());
      sums.assign(call.getResults().begin(), call.getResults().end());
    } else {
      SmallVector<Value> init = {s.wrap(s.constant(0.0))};
      for (Value p : params)
        init.push_back(arith::ConstantOp::create(
            b, loc,
            DenseElementsAttr::get(cast<RankedTensorType>(p.getType()),
                                   b.getF32FloatAttr(0.0f))));
      auto loop = scf::ForOp::create(
          b, loc, arith::ConstantIndexOp::create(b, loc, 0),
          arith::ConstantIndexOp::create(b, loc, numMicroBatches),
          arith::ConstantIndexOp::create(b, loc, 1), init,
          [&](OpBuilder &nested, Location, Value index, ValueRange acc) {
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPoint(nested.getInsertionBlock(),
                                nested.getInsertionPoint());
            auto call = callGrad(index);
            SmallVector<Value> next;
            for (auto [a, r] : llvm::zip(acc, call.getResults()))
              next.push_back(AddOp::create(b, loc, a, r));
            scf::YieldOp::create(b, loc, next);
          });
      sums.assign(loop.getResults().begin(), loop.getResults().end());
    }
    // The mean over the global batch: dp replicas of numMicroBatches
    // micro-batches each (loom-data-parallel sums over the replicas).
    Value inverseCount =
        s.constant(1.0 / static_cast<double>(numMicroBatches * plan.dp));
    Value loss =
        s.wrap(arith::MulFOp::create(b, loc, s.extract(sums[0]), inverseCount));
    ValueRange grads = ArrayRef<Value>(sums).drop_front();

    // Global norm of the averaged gradient, and the factor that takes the
    // summed gradient to the clipped average.
    // A gradient tensor parallelism divides is summed over the group's
    // parts; one every rank holds whole counts once.
    Value sumSquares = s.constant(0.0), dividedSquares;
    for (auto [g, arg] : llvm::zip(grads, paramArgs)) {
      Value squares = s.extract(SumSquaresOp::create(b, loc, scalarType, g));
      Value &sum = grad.getArgAttr(arg, LoomDialect::getTensorSplitAttrName())
                       ? dividedSquares
                       : sumSquares;
      sum = sum ? arith::AddFOp::create(b, loc, sum, squares) : squares;
    }
    if (dividedSquares) {
      FailureOr<shard::GridOp> grid = getOrCreateGrid(module, plan);
      if (failed(grid))
        return failure();
      Value overGroup = shard::AllReduceOp::create(
          b, loc, scalarType, grid->getSymName(),
          ArrayRef<shard::GridAxis>{kTensorAxis}, s.wrap(dividedSquares),
          shard::ReductionKind::Sum);
      sumSquares =
          arith::AddFOp::create(b, loc, sumSquares, s.extract(overGroup));
    }
    Value norm = arith::MulFOp::create(
        b, loc, math::SqrtOp::create(b, loc, sumSquares), inverseCount);
    Value scale = inverseCount;
    double clip = training.getGradClip().convertToDouble();
    if (clip > 0) {
      // GPT-2 trainers' rule: scale by clip / (norm + 1e-6) when above.
      Value limit = arith::DivFOp::create(
          b, loc, s.constant(clip),
          arith::AddFOp::create(b, loc, norm, s.constant(1e-6)));
      Value factor = arith::MinimumFOp::create(b, loc, limit, s.constant(1.0));
      scale = arith::MulFOp::create(b, loc, scale, factor);
    }
    Value scaleTensor = s.wrap(scale);

    SmallVector<Value> newParams, newStates[2];
    auto states = entry->getArguments().drop_front(numParams);
    for (unsigned k = 0; k < numParams; ++k) {
      Value p = params[k];
      // Parameters stacked over layers are matrices when each layer's is.
      int64_t rank = cast<RankedTensorType>(p.getType()).getRank();
      if (isStacked(grad.getArgument(paramArgs[k])))
        --rank;
      double decay =
          rank >= 2 ? training.getWeightDecay().convertToDouble() : 0.0;
      if (adam) {
        auto update = AdamWOp::create(
            b, loc, p, grads[k], states[k], states[numParams + k], lr,
            stepNumber, scaleTensor,
            b.getF64FloatAttr(training.getBeta1().convertToDouble()),
            b.getF64FloatAttr(training.getBeta2().convertToDouble()),
            b.getF64FloatAttr(training.getEps().convertToDouble()),
            b.getF64FloatAttr(decay));
        newParams.push_back(update.getNewParam());
        newStates[0].push_back(update.getNewM());
        newStates[1].push_back(update.getNewV());
      } else {
        auto update = SGDOp::create(
            b, loc, p, grads[k], states[k], lr, scaleTensor,
            b.getF64FloatAttr(training.getMomentum().convertToDouble()),
            b.getF64FloatAttr(decay));
        newParams.push_back(update.getNewParam());
        newStates[0].push_back(update.getNewMomentumBuffer());
      }
    }
    SmallVector<Value> returned = {loss, s.wrap(norm)};
    returned.append(newParams);
    for (unsigned st = 0; st < numStates; ++st)
      returned.append(newStates[st]);
    func::ReturnOp::create(b, loc, returned);
    return success();
  }
};
} // namespace
