//===- TrainStep.cpp - Building the training step's functions -------------===//
//
// TrainStep.h's builders: the parts of a training step that the one-rank
// step and the pipeline ranks' steps share.
//
//===----------------------------------------------------------------------===//

#include "TrainStep.h"

#include "Replicas.h"

#include "loom/Dialect/LoomAutodiff.h"
#include "loom/abi.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <map>

using namespace mlir;
using namespace mlir::loom;

FailureOr<SplitStage> mlir::loom::splitStage(func::FuncOp grad) {
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

void mlir::loom::setDivisionAttrs(func::FuncOp func, unsigned arg,
                                  const StepParam &p, bool split) {
  for (StringRef attr :
       {LoomDialect::getShardAttrName(), LoomDialect::getLayersAttrName()})
    if (Attribute value = p.attrs.get(attr))
      func.setArgAttr(arg, attr, value);
  if (Attribute value = p.attrs.get(LoomDialect::getTensorSplitAttrName());
      value && split)
    func.setArgAttr(arg, LoomDialect::getTensorSplitAttrName(), value);
}

Value mlir::loom::sumOverAxis(OpBuilder &b, Location loc, ModuleOp module,
                              const PlanConfig &plan, Value scalar,
                              shard::GridAxis axis) {
  FailureOr<shard::GridOp> grid = getOrCreateGrid(module, plan);
  if (failed(grid))
    return Value();
  return shard::AllReduceOp::create(
      b, loc, scalar.getType(), grid->getSymName(),
      ArrayRef<shard::GridAxis>{axis}, scalar, shard::ReductionKind::Sum);
}

LogicalResult mlir::loom::sortArguments(func::FuncOp grad,
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

FailureOr<RankedTensorType> mlir::loom::getTokensType(func::FuncOp grad,
                                                      RankedTensorType micro,
                                                      TrainingAttr training,
                                                      const PlanConfig &plan) {
  // Each of the dp replicas takes its share of the batch in micro-batches.
  if (micro.getDimSize(0) * plan.microBatches * plan.dp != training.getBatch())
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

Value mlir::loom::sliceMicroBatch(OpBuilder &b, Location loc, Value data,
                                  RankedTensorType micro, OpFoldResult index,
                                  int64_t numMicroBatches) {
  if (numMicroBatches == 1)
    return data;
  int64_t rows = micro.getDimSize(0);
  OpFoldResult offset;
  if (auto value = dyn_cast<Value>(index))
    offset = arith::MulIOp::create(b, loc, value,
                                   arith::ConstantIndexOp::create(b, loc, rows))
                 .getResult();
  else
    offset = b.getIndexAttr(cast<IntegerAttr>(cast<Attribute>(index)).getInt() *
                            rows);
  SmallVector<OpFoldResult> offsets = {offset, b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(rows),
                                     b.getIndexAttr(micro.getDimSize(1))};
  SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(b, loc, micro, data, offsets, sizes,
                                        strides);
}

Value mlir::loom::zerosLike(OpBuilder &b, Location loc, Type type) {
  return arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(cast<RankedTensorType>(type),
                             b.getF32FloatAttr(0.0f)));
}

namespace {
/// The step function `name`'s signature and its arguments' and results'
/// names for the manifest: parameters, optimizer states (m then v, or
/// momentum buffers), tokens, targets, lr and step in; the loss, the norm
/// and the updated parameters and states out.
func::FuncOp createStepFunction(OpBuilder &b, Location loc,
                                TrainingAttr training, StringRef name,
                                std::optional<int64_t> stage,
                                ArrayRef<StepParam> params,
                                RankedTensorType tokensType) {
  bool adam = training.getOptimizer() == OptimizerKind::adamw;
  unsigned numParams = params.size();
  unsigned numStates = adam ? 2 : 1;
  auto scalarType = RankedTensorType::get({}, b.getF32Type());
  SmallVector<Type> inputs;
  for (unsigned s = 0; s <= numStates; ++s)
    for (const StepParam &p : params)
      inputs.push_back(p.type);
  inputs.append({tokensType, tokensType, scalarType, scalarType});
  SmallVector<Type> results = {scalarType, scalarType};
  results.append(inputs.begin(), inputs.begin() + (numStates + 1) * numParams);
  auto step =
      func::FuncOp::create(b, loc, name, b.getFunctionType(inputs, results));
  if (stage)
    step->setAttr(LoomDialect::getStageAttrName(), b.getI64IntegerAttr(*stage));

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
  const char *const dataNames[] = {LOOM_INPUT_TOKENS, LOOM_INPUT_TARGETS,
                                   LOOM_INPUT_LR, LOOM_INPUT_STEP};
  for (auto [i, input] : llvm::enumerate(dataNames))
    step.setArgAttr(dataArg + i, LoomDialect::getInputAttrName(),
                    b.getStringAttr(input));
  step.setResultAttr(0, LoomDialect::getOutputAttrName(),
                     b.getStringAttr(LOOM_OUTPUT_LOSS));
  step.setResultAttr(1, LoomDialect::getOutputAttrName(),
                     b.getStringAttr(LOOM_OUTPUT_GRAD_NORM));
  return step;
}

/// The global norm of the averaged gradient, and the factor that takes the
/// summed gradient to the clipped average (`inverseCount` the mean's). A
/// gradient tensor parallelism divides is summed over the group's parts;
/// one every rank holds whole counts once. One sum of squares over all
/// gradients of each kind: one value to read. Each pipeline stage holds its
/// own layers' gradients. Null values, with the error emitted, on failure.
std::pair<Value, Value>
clippedScale(OpBuilder &b, Location loc, ModuleOp module, TrainingAttr training,
             const PlanConfig &plan, bool pipeline, ArrayRef<StepParam> params,
             ArrayRef<Value> grads, Value inverseCount) {
  ScalarBuilder s{b, loc};
  auto scalarType = RankedTensorType::get({}, b.getF32Type());
  auto overAxis = [&](Value scalar, shard::GridAxis axis) -> Value {
    Value sum = sumOverAxis(b, loc, module, plan, s.wrap(scalar), axis);
    return sum ? s.extract(sum) : Value();
  };
  SmallVector<Value> whole, divided;
  // Elements a team of ranks shares (replicated key/value heads), by team
  // size: every rank of the team holds their summed gradient, so each
  // counts 1/size of their squares.
  std::map<int64_t, SmallVector<Value>> teamShared;
  for (auto [g, p] : llvm::zip(grads, params)) {
    if (!p.countSquares)
      continue;
    auto split =
        p.attrs.getAs<DenseI64ArrayAttr>(LoomDialect::getTensorSplitAttrName());
    if (!split) {
      whole.push_back(g);
      continue;
    }
    if (split.size() < 3) {
      divided.push_back(g);
      continue;
    }
    auto type = cast<RankedTensorType>(g.getType());
    int64_t dim = split[0], shared = split[2];
    int64_t own = type.getDimSize(dim) - shared;
    divided.push_back(DimSlice(b, type, dim, 0, own).extract(b, loc, g));
    teamShared[plan.tp / split[1]].push_back(
        DimSlice(b, type, dim, own, shared).extract(b, loc, g));
  }
  auto squaresOf = [&](ArrayRef<Value> gradients) -> Value {
    return gradients.empty()
               ? Value()
               : s.extract(SumSquaresOp::create(b, loc, scalarType, gradients));
  };
  Value sumSquares = squaresOf(whole), dividedSquares = squaresOf(divided);
  for (auto &[size, gradients] : teamShared)
    dividedSquares = arith::AddFOp::create(
        b, loc, dividedSquares,
        arith::MulFOp::create(b, loc, squaresOf(gradients),
                              s.constant(1.0 / static_cast<double>(size))));
  if (!sumSquares)
    sumSquares = s.constant(0.0);
  if (dividedSquares) {
    Value overGroup = overAxis(dividedSquares, kTensorAxis);
    if (!overGroup)
      return {};
    sumSquares = arith::AddFOp::create(b, loc, sumSquares, overGroup);
  }
  if (pipeline && !(sumSquares = overAxis(sumSquares, kPipelineAxis)))
    return {};
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
  return {norm, scale};
}

/// The optimizer's update of each parameter and its states from the
/// summed gradients times `scaleTensor`: the new parameters, then each
/// kind of state's.
SmallVector<Value> applyOptimizer(OpBuilder &b, Location loc,
                                  TrainingAttr training,
                                  ArrayRef<StepParam> params,
                                  ValueRange stepParams, ValueRange states,
                                  ArrayRef<Value> grads, Value lr,
                                  Value stepNumber, Value scaleTensor) {
  bool adam = training.getOptimizer() == OptimizerKind::adamw;
  unsigned numParams = params.size();
  SmallVector<Value> newParams, newStates[2];
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
          b, loc, p, grads[k], states[k], states[numParams + k], lr, stepNumber,
          scaleTensor, /*skip=*/Value(),
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
  SmallVector<Value> updated = newParams;
  for (unsigned st = 0; st < (adam ? 2u : 1u); ++st)
    updated.append(newStates[st]);
  return updated;
}
} // namespace

LogicalResult mlir::loom::buildStep(
    ModuleOp module, OpBuilder &b, Location loc, TrainingAttr training,
    const PlanConfig &plan, StringRef name, std::optional<int64_t> stage,
    ArrayRef<StepParam> params, RankedTensorType tokensType, SumsBuilder sums) {
  unsigned numParams = params.size();
  func::FuncOp step =
      createStepFunction(b, loc, training, name, stage, params, tokensType);
  unsigned dataArg = step.getNumArguments() - 4;
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

  // The mean over the global batch: dp replicas of numMicroBatches
  // micro-batches each (loom-data-parallel sums over the replicas). A
  // pipeline's last stage has the loss; the others add zero to it.
  Value inverseCount =
      s.constant(1.0 / static_cast<double>(plan.microBatches * plan.dp));
  Value lossSum = s.extract(summed[0]);
  if (stage) {
    Value total =
        sumOverAxis(b, loc, module, plan, s.wrap(lossSum), kPipelineAxis);
    if (!total)
      return failure();
    lossSum = s.extract(total);
  }
  Value loss = s.wrap(arith::MulFOp::create(b, loc, lossSum, inverseCount));
  ArrayRef<Value> grads = ArrayRef<Value>(summed).drop_front();
  auto [norm, scale] =
      clippedScale(b, loc, module, training, plan, stage.has_value(), params,
                   grads, inverseCount);
  if (!norm)
    return failure();
  Value scaleTensor = s.wrap(scale);
  // Before the updates, which loss scaling skips when it is not finite.
  Value normTensor = s.wrap(norm);
  TraceBeginOp::create(b, loc, TraceSpan::optimizer, /*micro_batch=*/-1,
                       /*chunk=*/-1);
  SmallVector<Value> updated =
      applyOptimizer(b, loc, training, params, stepParams,
                     entry->getArguments().drop_front(numParams), grads, lr,
                     stepNumber, scaleTensor);
  TraceEndOp::create(b, loc, TraceSpan::optimizer);
  SmallVector<Value> returned = {loss, normTensor};
  returned.append(updated);
  func::ReturnOp::create(b, loc, returned);
  return success();
}

LogicalResult mlir::loom::buildEval(
    ModuleOp module, OpBuilder &b, Location loc, const PlanConfig &plan,
    StringRef name, ArrayRef<StepParam> params, RankedTensorType tokensType,
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
  Value lossSum =
      losses(b, entry->getArguments().take_front(numParams),
             entry->getArgument(numParams), entry->getArgument(numParams + 1));
  Value total = sumOverAxis(b, loc, module, plan, lossSum, kPipelineAxis);
  if (!total)
    return failure();
  Value mean = arith::MulFOp::create(
      b, loc, s.extract(total),
      s.constant(1.0 / static_cast<double>(plan.microBatches)));
  func::ReturnOp::create(b, loc, s.wrap(mean));
  return success();
}
