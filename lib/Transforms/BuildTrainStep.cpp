//===- BuildTrainStep.cpp - The loom-build-train-step pass ----------------===//
//
// Wraps @forward_grad into the whole training step: gradient accumulation
// over micro-batches, the global-norm clip and the optimizer update; for a
// pipeline, each rank's step and its forward passes alone (validation).
//
//===----------------------------------------------------------------------===//

#include "Replicas.h"

#include "Loom/LoomAutodiff.h"
#include "Loom/LoomDialect.h"
#include "loom/Transforms/Passes.h"
#include "loom/abi.h"

#include "loom/Plan/Schedule.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

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

FailureOr<SplitStage> splitStage(func::FuncOp grad) {
  Block &block = grad.getBody().front();
  BlockArgument seed = block.getArguments().back();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  // An op is backward when it reads the seed or a backward value;
  // constants go wherever they are read.
  llvm::DenseSet<Operation *> backwardOps;
  auto isBackwardValue = [&](Value v) {
    if (v == seed)
      return true;
    Operation *def = v.getDefiningOp();
    return def && backwardOps.contains(def);
  };
  for (Operation &op : block.without_terminator()) {
    if (op.hasTrait<OpTrait::ConstantLike>())
      continue;
    bool reads = llvm::any_of(op.getOperands(), isBackwardValue);
    op.walk([&](Operation *nested) {
      reads |= llvm::any_of(nested->getOperands(),
                            [&](Value v) { return v == seed; });
    });
    if (reads)
      backwardOps.insert(&op);
  }
  if (isBackwardValue(ret.getOperand(0)))
    return grad.emitOpError("returns an output that depends on its gradient");

  auto inBackward = [&](Operation *op) { return backwardOps.contains(op); };
  // Values of the forward part the backward part reads (or returns).
  SetVector<Value> saved;
  SetVector<unsigned> argsRead;
  auto readByBackward = [&](Value v) {
    if (v == seed)
      return;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() != &block)
        return;
      // The activations a stage received are kept as any value it made.
      auto input = grad.getArgAttrOfType<StringAttr>(
          arg.getArgNumber(), LoomDialect::getInputAttrName());
      if (input && input == LoomDialect::getActivationsName())
        saved.insert(v);
      else
        argsRead.insert(arg.getArgNumber());
      return;
    }
    Operation *def = v.getDefiningOp();
    if (def->getBlock() == &block && !inBackward(def) &&
        !def->hasTrait<OpTrait::ConstantLike>())
      saved.insert(v);
  };
  // In block order, so that the saved values come in an order that does
  // not depend on where ops were allocated.
  for (Operation &op : block.without_terminator()) {
    if (!inBackward(&op))
      continue;
    op.walk([&](Operation *nested) {
      for (Value v : nested->getOperands())
        readByBackward(v);
    });
  }
  for (Value v : ret.getOperands().drop_front())
    readByBackward(v);
  SmallVector<unsigned> backwardArgs(argsRead.begin(), argsRead.end());
  llvm::sort(backwardArgs);

  OpBuilder b(grad);
  Location loc = grad.getLoc();
  MLIRContext *ctx = grad.getContext();
  auto cloneInto = [&](func::FuncOp func, IRMapping &mapping, bool backward) {
    OpBuilder body = OpBuilder::atBlockBegin(&func.getBody().front());
    for (Operation &op : block.without_terminator()) {
      bool constant = op.hasTrait<OpTrait::ConstantLike>();
      if (constant || inBackward(&op) == backward)
        body.clone(op, mapping);
    }
    return body;
  };
  auto dropUnusedConstants = [](func::FuncOp func) {
    for (Operation &op : llvm::make_early_inc_range(
             llvm::reverse(func.getBody().front().getOperations())))
      if (op.hasTrait<OpTrait::ConstantLike>() && op.use_empty())
        op.erase();
  };

  // forward(args but the seed) -> (output, saved...)
  SplitStage split;
  SmallVector<Type> forwardResults = {ret.getOperand(0).getType()};
  llvm::append_range(forwardResults,
                     ValueRange(saved.getArrayRef()).getTypes());
  auto forwardInputs = grad.getArgumentTypes().drop_back();
  split.forward = func::FuncOp::create(
      b, loc, (grad.getName() + "_forward").str(),
      FunctionType::get(ctx, forwardInputs, forwardResults));
  split.forward.setPrivate();
  for (unsigned i = 0, e = forwardInputs.size(); i < e; ++i)
    split.forward.setArgAttrs(i, grad.getArgAttrDict(i));
  split.forward.setResultAttrs(0, grad.getResultAttrDict(0));
  {
    Block *entry = split.forward.addEntryBlock();
    IRMapping mapping;
    for (unsigned i = 0, e = forwardInputs.size(); i < e; ++i)
      mapping.map(block.getArgument(i), entry->getArgument(i));
    OpBuilder body = cloneInto(split.forward, mapping, /*backward=*/false);
    SmallVector<Value> results = {mapping.lookup(ret.getOperand(0))};
    for (Value v : saved)
      results.push_back(mapping.lookup(v));
    func::ReturnOp::create(body, loc, results);
    dropUnusedConstants(split.forward);
  }

  // backward(args read, saved..., seed) -> (gradients...)
  split.backwardArgs = backwardArgs;
  SmallVector<Type> backwardInputs;
  for (unsigned i : backwardArgs)
    backwardInputs.push_back(block.getArgument(i).getType());
  llvm::append_range(backwardInputs,
                     ValueRange(saved.getArrayRef()).getTypes());
  backwardInputs.push_back(seed.getType());
  auto backwardResults = grad.getResultTypes().drop_front();
  split.backward = func::FuncOp::create(
      b, loc, (grad.getName() + "_backward").str(),
      FunctionType::get(ctx, backwardInputs, backwardResults));
  split.backward.setPrivate();
  for (auto [j, i] : llvm::enumerate(backwardArgs))
    split.backward.setArgAttrs(j, grad.getArgAttrDict(i));
  split.backward.setArgAttrs(backwardInputs.size() - 1,
                             grad.getArgAttrDict(seed.getArgNumber()));
  for (unsigned i = 0, e = backwardResults.size(); i < e; ++i)
    split.backward.setResultAttrs(i, grad.getResultAttrDict(i + 1));
  {
    Block *entry = split.backward.addEntryBlock();
    IRMapping mapping;
    unsigned next = 0;
    for (unsigned i : backwardArgs)
      mapping.map(block.getArgument(i), entry->getArgument(next++));
    for (Value v : saved)
      mapping.map(v, entry->getArgument(next++));
    mapping.map(seed, entry->getArgument(next));
    OpBuilder body = cloneInto(split.backward, mapping, /*backward=*/true);
    SmallVector<Value> results;
    for (Value v : ret.getOperands().drop_front())
      results.push_back(mapping.lookup(v));
    func::ReturnOp::create(body, loc, results);
    dropUnusedConstants(split.backward);
  }
  return split;
}

/// Gives argument `arg` of `func` how parameter `p` is divided: sharded by
/// ZeRO-3, a pipeline stage's layers, split by tensor parallelism (a
/// parameter's optimizer state takes the first two).
void setDivisionAttrs(func::FuncOp func, unsigned arg, const StepParam &p,
                      bool split) {
  for (StringRef attr :
       {LoomDialect::getShardAttrName(), LoomDialect::getLayersAttrName()})
    if (Attribute value = p.attrs.get(attr))
      func.setArgAttr(arg, attr, value);
  if (Attribute value = p.attrs.get(LoomDialect::getTensorSplitAttrName());
      value && split)
    func.setArgAttr(arg, LoomDialect::getTensorSplitAttrName(), value);
}

/// The 0-d f32 tensor `scalar` summed over grid axis `axis` of the plan's
/// grid (made when missing); null, with the error emitted, on failure.
Value sumOverAxis(OpBuilder &b, Location loc, ModuleOp module,
                  const PlanConfig &plan, Value scalar, shard::GridAxis axis) {
  FailureOr<shard::GridOp> grid = getOrCreateGrid(module, plan);
  if (failed(grid))
    return Value();
  return shard::AllReduceOp::create(
      b, loc, scalar.getType(), grid->getSymName(),
      ArrayRef<shard::GridAxis>{axis}, scalar, shard::ReductionKind::Sum);
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
      if (failed(buildPipeline(module, training, *plan)))
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
    if (failed(build(module, grad, training, *plan)))
      return signalPassFailure();
  }

  /// Sorts a gradient function's arguments into parameters and data
  /// inputs.
  LogicalResult sortArguments(func::FuncOp grad,
                              SmallVectorImpl<unsigned> &paramArgs,
                              int &tokensArg, int &targetsArg) {
    if (!llvm::all_of(grad.getArgumentTypes(), llvm::IsaPred<RankedTensorType>))
      return grad.emitOpError("expected tensor arguments (the training step "
                              "is built before bufferization)");
    for (unsigned i = 0, e = grad.getNumArguments(); i < e; ++i) {
      if (grad.getArgAttr(i, LoomDialect::getParamAttrName()))
        paramArgs.push_back(i);
      else if (auto input = grad.getArgAttrOfType<StringAttr>(
                   i, LoomDialect::getInputAttrName())) {
        if (input.getValue() == LOOM_INPUT_TOKENS)
          tokensArg = i;
        else if (input.getValue() == LOOM_INPUT_TARGETS)
          targetsArg = i;
      } else {
        // The step would have nothing to pass for it.
        return grad.emitOpError()
               << "argument #" << i
               << " is neither a model parameter (loom.param) nor a data "
                  "input (loom.input), as every argument of the forward "
                  "function must be";
      }
    }
    return success();
  }

  /// The replica's share of the batch, in micro-batches of `micro`
  /// sequences; checks it against the training batch.
  FailureOr<RankedTensorType> getTokensType(func::FuncOp grad,
                                            RankedTensorType micro,
                                            TrainingAttr training,
                                            const PlanConfig &plan) {
    // Each of the dp replicas takes its share of the batch in micro-batches.
    if (micro.getDimSize(0) * plan.microBatches * plan.dp !=
        training.getBatch())
      return grad.emitOpError()
             << "takes " << micro.getDimSize(0)
             << " sequences, and the training batch of " << training.getBatch()
             << " is not dp * micro_batches = " << plan.dp << " * "
             << plan.microBatches
             << " micro-batches of them (run loom-micro-batches first)";
    return RankedTensorType::get(
        {micro.getDimSize(0) * plan.microBatches, micro.getDimSize(1)},
        micro.getElementType());
  }

  /// Micro-batch `index` (a constant or an index value) of `data`.
  static Value sliceMicroBatch(OpBuilder &b, Location loc, Value data,
                               RankedTensorType micro, OpFoldResult index,
                               int64_t numMicroBatches) {
    if (numMicroBatches == 1)
      return data;
    int64_t rows = micro.getDimSize(0);
    OpFoldResult offset;
    if (auto value = dyn_cast<Value>(index))
      offset = arith::MulIOp::create(
                   b, loc, value, arith::ConstantIndexOp::create(b, loc, rows))
                   .getResult();
    else
      offset = b.getIndexAttr(
          cast<IntegerAttr>(cast<Attribute>(index)).getInt() * rows);
    SmallVector<OpFoldResult> offsets = {offset, b.getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(rows),
                                       b.getIndexAttr(micro.getDimSize(1))};
    SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
    return tensor::ExtractSliceOp::create(b, loc, micro, data, offsets, sizes,
                                          strides);
  }

  LogicalResult build(ModuleOp module, func::FuncOp grad, TrainingAttr training,
                      const PlanConfig &plan) {
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
        operands[tokensArg] = sliceMicroBatch(b, loc, tokens, microTokens,
                                              index, numMicroBatches);
        operands[targetsArg] = sliceMicroBatch(b, loc, targets, microTokens,
                                               index, numMicroBatches);
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

  static Value zerosLike(OpBuilder &b, Location loc, Type type) {
    return arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(cast<RankedTensorType>(type),
                               b.getF32FloatAttr(0.0f)));
  }

  /// Builds the step function `name`: `sums` computes the loss and the
  /// gradients of `params` summed over this rank's micro-batches; then the
  /// mean, the global norm, the clip and the optimizer. A pipeline rank's
  /// step (`stage`) sums the loss and the norm's squares over the pipeline.
  LogicalResult buildStep(
      ModuleOp module, OpBuilder &b, Location loc, TrainingAttr training,
      const PlanConfig &plan, StringRef name, std::optional<int64_t> stage,
      ArrayRef<StepParam> params, RankedTensorType tokensType,
      function_ref<SmallVector<Value>(OpBuilder &, ValueRange, Value, Value)>
          sums) {
    bool adam = training.getOptimizer() == OptimizerKind::adamw;
    unsigned numParams = params.size();
    unsigned numStates = adam ? 2 : 1;
    auto scalarType = RankedTensorType::get({}, b.getF32Type());

    // Signature: params, states (m then v, or momentum buffers), tokens,
    // targets, lr, step.
    SmallVector<Type> inputs;
    for (unsigned s = 0; s <= numStates; ++s)
      for (const StepParam &p : params)
        inputs.push_back(p.type);
    inputs.append({tokensType, tokensType, scalarType, scalarType});
    SmallVector<Type> results = {scalarType, scalarType};
    results.append(inputs.begin(),
                   inputs.begin() + (numStates + 1) * numParams);
    auto step =
        func::FuncOp::create(b, loc, name, b.getFunctionType(inputs, results));
    if (stage)
      step->setAttr(LoomDialect::getStageAttrName(),
                    b.getI64IntegerAttr(*stage));

    // Argument and result attributes name everything for the manifest.
    static const char *const stateNames[] = {LOOM_STATE_ADAM_M,
                                             LOOM_STATE_ADAM_V};
    for (unsigned s = 0; s <= numStates; ++s) {
      for (auto [k, p] : llvm::enumerate(params)) {
        StringAttr paramName = p.getName();
        unsigned arg = s * numParams + k;
        // Optimizer state is shaped, sharded and layered as its parameter;
        // the runtime divides a parameter's state as the parameter.
        setDivisionAttrs(step, arg, p, /*split=*/s == 0);
        if (s == 0)
          step.setArgAttr(arg, LoomDialect::getParamAttrName(), paramName);
        else
          step.setArgAttr(arg, LoomDialect::getStateAttrName(),
                          b.getStringAttr(Twine(adam ? stateNames[s - 1]
                                                     : LOOM_STATE_MOMENTUM) +
                                          "." + paramName.getValue()));
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
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(entry);
    ScalarBuilder s{b, loc};
    auto stepParams = entry->getArguments().take_front(numParams);
    Value lr = entry->getArgument(dataArg + 2);
    Value stepNumber = entry->getArgument(dataArg + 3);
    SmallVector<Value> summed = sums(b, stepParams, entry->getArgument(dataArg),
                                     entry->getArgument(dataArg + 1));
    if (summed.size() != numParams + 1)
      return step.emitOpError("expected the loss and a gradient per "
                              "parameter");

    auto overAxis = [&](Value scalar, shard::GridAxis axis) -> Value {
      Value sum = sumOverAxis(b, loc, module, plan, s.wrap(scalar), axis);
      return sum ? s.extract(sum) : Value();
    };

    // The mean over the global batch: dp replicas of numMicroBatches
    // micro-batches each (loom-data-parallel sums over the replicas). A
    // pipeline's last stage has the loss; the others add zero to it.
    Value inverseCount =
        s.constant(1.0 / static_cast<double>(plan.microBatches * plan.dp));
    Value lossSum = s.extract(summed[0]);
    if (stage && !(lossSum = overAxis(lossSum, kPipelineAxis)))
      return failure();
    Value loss = s.wrap(arith::MulFOp::create(b, loc, lossSum, inverseCount));
    ArrayRef<Value> grads = ArrayRef<Value>(summed).drop_front();

    // Global norm of the averaged gradient, and the factor that takes the
    // summed gradient to the clipped average.
    // A gradient tensor parallelism divides is summed over the group's
    // parts; one every rank holds whole counts once. One sum of squares
    // over all gradients of each kind: one value to read.
    SmallVector<Value> whole, divided;
    for (auto [g, p] : llvm::zip(grads, params))
      if (p.countSquares)
        (p.attrs.get(LoomDialect::getTensorSplitAttrName()) ? divided : whole)
            .push_back(g);
    auto squaresOf = [&](ArrayRef<Value> gradients) -> Value {
      return gradients.empty() ? Value()
                               : s.extract(SumSquaresOp::create(
                                     b, loc, scalarType, gradients));
    };
    Value sumSquares = squaresOf(whole), dividedSquares = squaresOf(divided);
    if (!sumSquares)
      sumSquares = s.constant(0.0);
    if (dividedSquares) {
      Value overGroup = overAxis(dividedSquares, kTensorAxis);
      if (!overGroup)
        return failure();
      sumSquares = arith::AddFOp::create(b, loc, sumSquares, overGroup);
    }
    // Each pipeline stage holds its own layers' gradients.
    if (stage && !(sumSquares = overAxis(sumSquares, kPipelineAxis)))
      return failure();
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
    // Before the updates, which loss scaling skips when it is not finite.
    Value normTensor = s.wrap(norm);

    SmallVector<Value> newParams, newStates[2];
    auto states = entry->getArguments().drop_front(numParams);
    TraceBeginOp::create(b, loc, TraceSpan::optimizer, /*micro_batch=*/-1,
                         /*chunk=*/-1);
    for (unsigned k = 0; k < numParams; ++k) {
      Value p = stepParams[k];
      // Parameters stacked over layers are matrices when each layer's is.
      int64_t rank = cast<RankedTensorType>(p.getType()).getRank();
      if (params[k].stacked)
        --rank;
      double decay =
          rank >= 2 ? training.getWeightDecay().convertToDouble() : 0.0;
      if (adam) {
        auto update = AdamWOp::create(
            b, loc, p, grads[k], states[k], states[numParams + k], lr,
            stepNumber, scaleTensor, /*skip=*/Value(),
            b.getF64FloatAttr(training.getBeta1().convertToDouble()),
            b.getF64FloatAttr(training.getBeta2().convertToDouble()),
            b.getF64FloatAttr(training.getEps().convertToDouble()),
            b.getF64FloatAttr(decay));
        newParams.push_back(update.getNewParam());
        newStates[0].push_back(update.getNewM());
        newStates[1].push_back(update.getNewV());
      } else {
        auto update = SGDOp::create(
            b, loc, p, grads[k], states[k], lr, scaleTensor, /*skip=*/Value(),
            b.getF64FloatAttr(training.getMomentum().convertToDouble()),
            b.getF64FloatAttr(decay));
        newParams.push_back(update.getNewParam());
        newStates[0].push_back(update.getNewMomentumBuffer());
      }
    }
    TraceEndOp::create(b, loc, TraceSpan::optimizer);
    SmallVector<Value> returned = {loss, normTensor};
    returned.append(newParams);
    for (unsigned st = 0; st < numStates; ++st)
      returned.append(newStates[st]);
    func::ReturnOp::create(b, loc, returned);
    return success();
  }

  /// Builds `name(params, tokens, targets) -> loss`, a pipeline rank's
  /// forward passes alone: `losses` sums the last stage's losses over the
  /// micro-batches (zero on the other stages), and the function returns
  /// their mean, summed over the pipeline so that every rank has it.
  LogicalResult
  buildEval(ModuleOp module, OpBuilder &b, Location loc, const PlanConfig &plan,
            StringRef name, ArrayRef<StepParam> params,
            RankedTensorType tokensType,
            function_ref<Value(OpBuilder &, ValueRange, Value, Value)> losses) {
    auto scalarType = RankedTensorType::get({}, b.getF32Type());
    SmallVector<Type> inputs;
    for (const StepParam &p : params)
      inputs.push_back(p.type);
    inputs.append({tokensType, tokensType});
    auto eval = func::FuncOp::create(
        b, loc, name, b.getFunctionType(inputs, TypeRange{scalarType}));
    unsigned numParams = params.size();
    for (auto [k, p] : llvm::enumerate(params)) {
      eval.setArgAttr(k, LoomDialect::getParamAttrName(), p.getName());
      setDivisionAttrs(eval, k, p, /*split=*/true);
    }
    eval.setArgAttr(numParams, LoomDialect::getInputAttrName(),
                    b.getStringAttr(LOOM_INPUT_TOKENS));
    eval.setArgAttr(numParams + 1, LoomDialect::getInputAttrName(),
                    b.getStringAttr(LOOM_INPUT_TARGETS));
    eval.setResultAttr(0, LoomDialect::getOutputAttrName(),
                       b.getStringAttr(LOOM_OUTPUT_LOSS));

    OpBuilder::InsertionGuard guard(b);
    Block *entry = eval.addEntryBlock();
    b.setInsertionPointToStart(entry);
    ScalarBuilder s{b, loc};
    Value lossSum = losses(b, entry->getArguments().take_front(numParams),
                           entry->getArgument(numParams),
                           entry->getArgument(numParams + 1));
    Value total = sumOverAxis(b, loc, module, plan, lossSum, kPipelineAxis);
    if (!total)
      return failure();
    Value mean = arith::MulFOp::create(
        b, loc, s.extract(total),
        s.constant(1.0 / static_cast<double>(plan.microBatches)));
    func::ReturnOp::create(b, loc, s.wrap(mean));
    return success();
  }

  LogicalResult buildPipeline(ModuleOp module, TrainingAttr training,
                              const PlanConfig &plan);
};
} // namespace

/// Each pipeline rank's step, `@train_step_stage<r>`: its model chunks'
/// forward and backward passes in the schedule's order, with the
/// activations and their gradients sent to and received from the
/// neighbouring stages, the gradients summed over the micro-batches, then
/// the optimizer on the rank's parameters. A tied token table, held by the
/// first and the last stage, has its two parts of the gradient exchanged
/// and summed on both.
LogicalResult BuildTrainStepPass::buildPipeline(ModuleOp module,
                                                TrainingAttr training,
                                                const PlanConfig &plan) {
  int64_t pp = plan.pp, v = plan.virtualStages, stages = pp * v;
  // Each stage's gradient function, and its forward pass alone where the
  // forward passes keep nothing for the backward ones (recompute=stage).
  bool wholeStage = plan.recompute == Recompute::stage;
  SmallVector<func::FuncOp> grads(stages), plains(stages);
  for (auto func : module.getOps<func::FuncOp>()) {
    auto stage =
        func->getAttrOfType<IntegerAttr>(LoomDialect::getStageAttrName());
    if (!stage)
      continue;
    bool isGrad = takesOutputGradient(func);
    SmallVector<func::FuncOp> &found = isGrad ? grads : plains;
    if (stage.getInt() >= stages || found[stage.getInt()])
      return func.emitOpError()
             << "is a " << (isGrad ? "gradient" : "forward")
             << " function of stage " << stage.getInt() << " of " << stages;
    found[stage.getInt()] = func;
  }
  for (int64_t k = 0; k < stages; ++k) {
    if (!grads[k])
      return module.emitError()
             << "expected the gradient function of pipeline stage " << k
             << " (run loom-pipeline-stages and loom-differentiate first)";
    if (!plains[k])
      return module.emitError()
             << "expected the forward function of pipeline stage " << k
             << ", which validation (and recompute=stage) runs alone";
  }
  for (int64_t r = 0; r < pp; ++r)
    for (const std::string &name : {getStageStepName(r), getStageEvalName(r)})
      if (module.lookupSymbol(name))
        return module.emitError()
               << "the module already has a function @" << name;
  // A stage's forward pass alone takes or returns activations no runtime
  // entry point provides: the steps built below are the pipeline's
  // programs.
  for (auto func : module.getOps<func::FuncOp>())
    if (func->hasAttr(LoomDialect::getStageAttrName()))
      func.setPrivate();

  // Each stage's argument kinds and its split into forward and backward.
  struct Stage {
    func::FuncOp grad;
    SplitStage split;
    SmallVector<unsigned> paramArgs;
    int tokensArg = -1, targetsArg = -1;
  };
  SmallVector<Stage> info(stages);
  RankedTensorType microTokens, tokensType;
  for (int64_t k = 0; k < stages; ++k) {
    Stage &st = info[k];
    st.grad = grads[k];
    if (failed(
            sortArguments(st.grad, st.paramArgs, st.tokensArg, st.targetsArg)))
      return failure();
    int data = k == 0 ? st.tokensArg : st.targetsArg;
    if ((k == 0 && st.tokensArg < 0) || (k == stages - 1 && st.targetsArg < 0))
      return st.grad.emitOpError()
             << "expected an argument marked as the "
             << (k == 0 ? "tokens" : "targets") << " input";
    if (data >= 0 && !microTokens) {
      microTokens = cast<RankedTensorType>(st.grad.getArgumentTypes()[data]);
      FailureOr<RankedTensorType> type =
          getTokensType(st.grad, microTokens, training, plan);
      if (failed(type))
        return failure();
      tokensType = *type;
    }
    FailureOr<SplitStage> split = splitStage(st.grad);
    if (failed(split))
      return failure();
    st.split = *split;
  }

  Location loc = module.getLoc();
  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  PipelineSchedule schedule = buildPipelineSchedule(plan);
  // Parameters both ends of the pipeline take (a tied token table), in the
  // first stage's order: each end computes its part of the gradient.
  auto paramNames = [](Stage &st) {
    SmallVector<StringRef> names;
    for (unsigned i : st.paramArgs)
      if (!st.grad.getArgAttr(i, LoomDialect::getLayersAttrName()))
        names.push_back(st.grad
                            .getArgAttrOfType<StringAttr>(
                                i, LoomDialect::getParamAttrName())
                            .getValue());
    return names;
  };
  SmallVector<StringRef> shared, atLast = paramNames(info.back());
  for (StringRef name : paramNames(info.front()))
    if (llvm::is_contained(atLast, name))
      shared.push_back(name);

  for (int64_t r = 0; r < pp; ++r) {
    // The rank's parameters: each name once, a stacked one holding the
    // layers of all the rank's chunks in chunk order.
    SmallVector<StepParam> params;
    llvm::StringMap<unsigned> byName;
    // Per chunk and parameter of its stage: the step parameter and the
    // first of its layers the chunk's part starts at (-1: not stacked).
    SmallVector<SmallVector<std::pair<unsigned, int64_t>>> parts(v);
    for (int64_t c = 0; c < v; ++c) {
      Stage &st = info[c * pp + r];
      for (unsigned i : st.paramArgs) {
        auto type = cast<RankedTensorType>(st.grad.getArgumentTypes()[i]);
        DictionaryAttr attrs = st.grad.getArgAttrDict(i);
        auto name = attrs.getAs<StringAttr>(LoomDialect::getParamAttrName());
        auto layers =
            attrs.getAs<DenseI64ArrayAttr>(LoomDialect::getLayersAttrName());
        auto [it, inserted] = byName.try_emplace(name, params.size());
        if (inserted) {
          params.push_back({type, attrs, static_cast<bool>(layers)});
          parts[c].push_back({it->second, layers ? 0 : -1});
          continue;
        }
        StepParam &p = params[it->second];
        if (!layers || !p.stacked)
          return st.grad.emitOpError()
                 << "takes parameter '" << name.getValue()
                 << "', which another of the rank's chunks takes too";
        auto whole = cast<RankedTensorType>(p.type);
        SmallVector<int64_t> shape(whole.getShape());
        parts[c].push_back({it->second, shape[0]});
        shape[0] += type.getDimSize(0);
        p.type = whole.clone(shape);
        SmallVector<int64_t> runs(
            p.attrs.getAs<DenseI64ArrayAttr>(LoomDialect::getLayersAttrName())
                .asArrayRef());
        llvm::append_range(runs, layers.asArrayRef());
        NamedAttrList list(p.attrs);
        list.set(LoomDialect::getLayersAttrName(),
                 DenseI64ArrayAttr::get(module.getContext(), runs));
        p.attrs = list.getDictionary(module.getContext());
      }
    }
    // A shared parameter's squares count on the first stage only.
    SmallVector<unsigned> sharedParams;
    if (r == 0 || r == pp - 1)
      for (StringRef name : shared) {
        unsigned index = byName.lookup(name);
        sharedParams.push_back(index);
        params[index].countSquares = r == 0;
      }

    // What a chunk's function takes for its argument `i` of the whole
    // gradient function (of its forward function alike, which lacks the
    // last), on micro-batch `mb`, from the rank's function's parameters
    // and data.
    auto operandOf = [&](OpBuilder &b, ValueRange stepParams, Value tokens,
                         Value targets, int64_t c, unsigned i,
                         int64_t mb) -> Value {
      Stage &st = info[c * pp + r];
      if (static_cast<int>(i) == st.tokensArg)
        return sliceMicroBatch(b, loc, tokens, microTokens, b.getIndexAttr(mb),
                               plan.microBatches);
      if (static_cast<int>(i) == st.targetsArg)
        return sliceMicroBatch(b, loc, targets, microTokens, b.getIndexAttr(mb),
                               plan.microBatches);
      auto pos = llvm::find(st.paramArgs, i) - st.paramArgs.begin();
      auto [index, offset] = parts[c][pos];
      Value whole = stepParams[index];
      if (offset < 0)
        return whole;
      auto type = cast<RankedTensorType>(st.grad.getArgumentTypes()[i]);
      if (type == whole.getType())
        return whole;
      LayerSlice slice(b, type, offset);
      return tensor::ExtractSliceOp::create(b, loc, type, whole, slice.offsets,
                                            slice.sizes, slice.strides);
    };
    // Whether argument `i` of a stage's function is the activations the
    // stage before sends.
    auto takesActivations = [](func::FuncOp func, unsigned i) {
      auto input =
          func.getArgAttrOfType<StringAttr>(i, LoomDialect::getInputAttrName());
      return input && input == LoomDialect::getActivationsName();
    };

    auto sums = [&](OpBuilder &b, ValueRange stepParams, Value tokens,
                    Value targets) -> SmallVector<Value> {
      ScalarBuilder s{b, loc};
      auto operand = [&](int64_t c, unsigned i, int64_t mb) {
        return operandOf(b, stepParams, tokens, targets, c, i, mb);
      };

      Value lossSum = s.wrap(s.constant(0.0));
      // Per chunk, the gradients of its stage's parameters so far.
      SmallVector<SmallVector<Value>> chunkGrads(v);
      // Per (micro-batch, chunk): what its backward pass reads of its
      // forward pass, the forward half's kept values or, when the backward
      // pass reruns the forward half, its operands.
      llvm::DenseMap<std::pair<int64_t, int64_t>, SmallVector<Value>> saved;
      for (const PipelineAction &action : schedule.ranks[r]) {
        int64_t c = action.chunk, k = c * pp + r, mb = action.microBatch;
        Stage &st = info[k];
        Block &gradBlock = st.grad.getBody().front();
        if (!action.backward) {
          SmallVector<Value> operands;
          for (unsigned i = 0, e = st.split.forward.getNumArguments(); i < e;
               ++i) {
            if (takesActivations(st.grad, i))
              operands.push_back(RecvOp::create(
                  b, loc, gradBlock.getArgument(i).getType(), (k - 1) % pp,
                  /*tag=*/0));
            else
              operands.push_back(operand(c, i, mb));
          }
          TraceBeginOp::create(b, loc, TraceSpan::forward, mb, c);
          auto call = func::CallOp::create(
              b, loc, wholeStage ? plains[k] : st.split.forward, operands);
          TraceEndOp::create(b, loc, TraceSpan::forward);
          Value out = call.getResult(0);
          if (k == stages - 1)
            lossSum = AddOp::create(b, loc, lossSum, out);
          else
            SendOp::create(b, loc, out, (k + 1) % pp, /*tag=*/0);
          saved[{mb, c}] =
              wholeStage ? operands
                         : SmallVector<Value>(call.getResults().drop_front());
          continue;
        }
        Type outType = st.split.forward.getResultTypes().front();
        Value seed =
            k == stages - 1
                ? SeedOp::create(b, loc, outType).getResult()
                : RecvOp::create(b, loc, outType, (k + 1) % pp, /*tag=*/1)
                      .getResult();
        SmallVector<Value> operands;
        for (unsigned i : st.split.backwardArgs)
          operands.push_back(operand(c, i, mb));
        SmallVector<Value> kept = saved.lookup({mb, c});
        saved.erase({mb, c});
        TraceBeginOp::create(b, loc, TraceSpan::backward, mb, c);
        if (wholeStage) {
          // The forward half again, on the inputs the forward pass kept; its
          // output was sent (or summed) then.
          auto rerun = func::CallOp::create(b, loc, st.split.forward, kept);
          rerun->setAttr(LoomDialect::getRecomputeAttrName(), b.getUnitAttr());
          kept.assign(rerun.getResults().begin() + 1, rerun.getResults().end());
        }
        llvm::append_range(operands, kept);
        operands.push_back(seed);
        auto call = func::CallOp::create(b, loc, st.split.backward, operands);
        TraceEndOp::create(b, loc, TraceSpan::backward);
        ValueRange results = call.getResults();
        if (k > 0) {
          SendOp::create(b, loc, results.front(), (k - 1) % pp, /*tag=*/1);
          results = results.drop_front();
        }
        SmallVector<Value> &acc = chunkGrads[c];
        if (acc.empty())
          acc.assign(results.begin(), results.end());
        else
          for (auto [a, g] : llvm::zip(acc, results))
            a = AddOp::create(b, withPhase(loc, Phase::accumulation), a, g);
      }

      // Each step parameter's gradient from its chunks' parts.
      SmallVector<Value> stepGrads(params.size());
      for (int64_t c = 0; c < v; ++c) {
        for (auto [pos, part] : llvm::enumerate(parts[c])) {
          auto [index, offset] = part;
          Value g = chunkGrads[c][pos];
          if (offset < 0 || g.getType() == params[index].type) {
            stepGrads[index] = g;
            continue;
          }
          Value &whole = stepGrads[index];
          if (!whole)
            whole = zerosLike(b, loc, params[index].type);
          auto type = cast<RankedTensorType>(g.getType());
          LayerSlice slice(b, type, offset);
          whole = tensor::InsertSliceOp::create(b, loc, g, whole, slice.offsets,
                                                slice.sizes, slice.strides);
        }
      }
      // A shared parameter's gradient is the sum of the first and the last
      // stage's; both send theirs before receiving the other's.
      for (unsigned index : sharedParams) {
        Value &g = stepGrads[index];
        int64_t peer = r == 0 ? pp - 1 : 0;
        SendOp::create(b, loc, g, peer, /*tag=*/2);
        Value other = RecvOp::create(b, loc, g.getType(), peer, /*tag=*/2);
        Location sumLoc = withPhase(loc, Phase::accumulation);
        g = r == 0 ? AddOp::create(b, sumLoc, g, other).getResult()
                   : AddOp::create(b, sumLoc, other, g).getResult();
      }
      SmallVector<Value> result = {lossSum};
      llvm::append_range(result, stepGrads);
      return result;
    };
    if (failed(buildStep(module, b, loc, training, plan, getStageStepName(r), r,
                         params, tokensType, sums)))
      return failure();

    // Validation, the forward passes alone: one micro-batch after the other
    // through the whole pipeline, in the order of the stages, which every
    // rank's sends and receives then follow; the last stage adds up the
    // losses.
    auto losses = [&](OpBuilder &b, ValueRange evalParams, Value tokens,
                      Value targets) -> Value {
      ScalarBuilder s{b, loc};
      Value lossSum = s.wrap(s.constant(0.0));
      for (int64_t mb = 0; mb < plan.microBatches; ++mb) {
        for (int64_t c = 0; c < v; ++c) {
          int64_t k = c * pp + r;
          func::FuncOp plain = plains[k];
          SmallVector<Value> operands;
          for (unsigned i = 0, e = plain.getNumArguments(); i < e; ++i)
            operands.push_back(
                takesActivations(plain, i)
                    ? RecvOp::create(b, loc, plain.getArgumentTypes()[i],
                                     (k - 1) % pp, /*tag=*/0)
                          .getResult()
                    : operandOf(b, evalParams, tokens, targets, c, i, mb));
          Value out =
              func::CallOp::create(b, loc, plain, operands).getResult(0);
          if (k == stages - 1)
            lossSum = AddOp::create(b, loc, lossSum, out);
          else
            SendOp::create(b, loc, out, (k + 1) % pp, /*tag=*/0);
        }
      }
      return lossSum;
    };
    if (failed(buildEval(module, b, loc, plan, getStageEvalName(r), params,
                         tokensType, losses)))
      return failure();
  }
  // The gradient functions live on as their two halves.
  for (Stage &st : info)
    st.grad.erase();
  return success();
}
