//===- PipelineStep.cpp - Each pipeline rank's training step --------------===//
//
// loom-build-train-step for a pipeline (plan pp > 1): each rank's step,
// `@train_step_stage<r>`, runs its model chunks' forward and backward
// passes in the schedule's order, with the activations and their gradients
// sent to and received from the neighbouring stages, sums the gradients
// over the micro-batches, then runs the optimizer on the rank's
// parameters (TrainStep.cpp's buildStep). A tied token table, held by the
// first and the last stage, has its two parts of the gradient exchanged
// and summed on both. Each rank's forward passes alone (validation) are
// `@eval_stage<r>`.
//
//===----------------------------------------------------------------------===//

#include "Replicas.h"
#include "TrainStep.h"

#include "loom/Dialect/LoomAutodiff.h"
#include "loom/Plan/Schedule.h"
#include "loom/abi.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
/// A pipeline stage's gradient function, its split into forward and
/// backward, and its arguments' kinds.
struct Stage {
  func::FuncOp grad;
  SplitStage split;
  SmallVector<unsigned> paramArgs;
  int tokensArg = -1, targetsArg = -1;
};

/// Whether argument `i` of a stage's function is the activations the stage
/// before sends.
bool takesActivations(func::FuncOp func, unsigned i) {
  auto input =
      func.getArgAttrOfType<StringAttr>(i, LoomDialect::getInputAttrName());
  return input && input == LoomDialect::getActivationsName();
}

/// The model's stages, for every rank's step.
class PipelineSteps {
public:
  PipelineSteps(ModuleOp module, TrainingAttr training, const PlanConfig &plan)
      : module(module), training(training), plan(plan), pp(plan.pp),
        v(plan.virtualStages), stages(pp * v),
        wholeStage(plan.recompute == Recompute::stage), grads(stages),
        plains(stages), info(stages), loc(module.getLoc()) {}

  LogicalResult build();

private:
  friend class RankStep;
  /// Each stage's gradient function, and its forward pass alone.
  LogicalResult findStageFunctions();
  /// Each stage's argument kinds and its split into forward and backward.
  LogicalResult describeStages();
  /// Parameters both ends of the pipeline take (a tied token table), in the
  /// first stage's order: each end computes its part of the gradient.
  void findShared();

  ModuleOp module;
  TrainingAttr training;
  const PlanConfig &plan;
  int64_t pp, v, stages;
  /// Whether the forward passes keep nothing for the backward ones
  /// (recompute=stage).
  bool wholeStage;
  SmallVector<func::FuncOp> grads, plains;
  SmallVector<Stage> info;
  RankedTensorType microTokens, tokensType;
  SmallVector<StringRef> shared;
  PipelineSchedule schedule;
  Location loc;
};

/// One rank's step and its forward passes alone.
class RankStep {
public:
  RankStep(PipelineSteps &p, int64_t r) : p(p), r(r), parts(p.v) {}

  LogicalResult build(OpBuilder &b);

private:
  /// The rank's parameters: each name once, a stacked one holding the
  /// layers of all the rank's chunks in chunk order.
  LogicalResult collectParams();
  /// What a chunk's function takes for its argument `i` of the whole
  /// gradient function (of its forward function alike, which lacks the
  /// last), on micro-batch `mb`, from the rank's function's parameters and
  /// data.
  Value operandOf(OpBuilder &b, ValueRange stepParams, Value tokens,
                  Value targets, int64_t c, unsigned i, int64_t mb);
  /// The loss and the gradients, summed over the micro-batches, of the
  /// rank's chunks' passes in the schedule's order.
  SmallVector<Value> sums(OpBuilder &b, ValueRange stepParams, Value tokens,
                          Value targets);
  /// Each step parameter's gradient from its chunks' parts, a shared
  /// one's summed with the other end's.
  SmallVector<Value> stepGradients(OpBuilder &b,
                                   ArrayRef<SmallVector<Value>> chunkGrads);
  /// The last stage's losses of the forward passes alone, one micro-batch
  /// after the other through the whole pipeline.
  Value losses(OpBuilder &b, ValueRange evalParams, Value tokens,
               Value targets);

  PipelineSteps &p;
  int64_t r;
  SmallVector<StepParam> params;
  llvm::StringMap<unsigned> byName;
  /// Per chunk and parameter of its stage: the step parameter and the
  /// first of its layers the chunk's part starts at (-1: not stacked).
  SmallVector<SmallVector<std::pair<unsigned, int64_t>>> parts;
  SmallVector<unsigned> sharedParams;
};

LogicalResult PipelineSteps::findStageFunctions() {
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
  for (int64_t rank = 0; rank < pp; ++rank)
    for (const std::string &name :
         {getStageStepName(rank), getStageEvalName(rank)})
      if (module.lookupSymbol(name))
        return module.emitError()
               << "the module already has a function @" << name;
  // A stage's forward pass alone takes or returns activations no runtime
  // entry point provides: the steps built below are the pipeline's
  // programs.
  for (auto func : module.getOps<func::FuncOp>())
    if (func->hasAttr(LoomDialect::getStageAttrName()))
      func.setPrivate();
  return success();
}

LogicalResult PipelineSteps::describeStages() {
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
  return success();
}

void PipelineSteps::findShared() {
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
  SmallVector<StringRef> atLast = paramNames(info.back());
  for (StringRef name : paramNames(info.front()))
    if (llvm::is_contained(atLast, name))
      shared.push_back(name);
}

LogicalResult PipelineSteps::build() {
  if (failed(findStageFunctions()) || failed(describeStages()))
    return failure();
  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  schedule = buildPipelineSchedule(plan);
  findShared();
  for (int64_t r = 0; r < pp; ++r)
    if (failed(RankStep(*this, r).build(b)))
      return failure();
  // The gradient functions live on as their two halves.
  for (Stage &st : info)
    st.grad.erase();
  return success();
}

LogicalResult RankStep::collectParams() {
  MLIRContext *ctx = p.module.getContext();
  for (int64_t c = 0; c < p.v; ++c) {
    Stage &st = p.info[c * p.pp + r];
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
      StepParam &param = params[it->second];
      if (!layers || !param.stacked)
        return st.grad.emitOpError()
               << "takes parameter '" << name.getValue()
               << "', which another of the rank's chunks takes too";
      auto whole = cast<RankedTensorType>(param.type);
      SmallVector<int64_t> shape(whole.getShape());
      parts[c].push_back({it->second, shape[0]});
      shape[0] += type.getDimSize(0);
      param.type = whole.clone(shape);
      SmallVector<int64_t> runs(
          param.attrs.getAs<DenseI64ArrayAttr>(LoomDialect::getLayersAttrName())
              .asArrayRef());
      llvm::append_range(runs, layers.asArrayRef());
      NamedAttrList list(param.attrs);
      list.set(LoomDialect::getLayersAttrName(),
               DenseI64ArrayAttr::get(ctx, runs));
      param.attrs = list.getDictionary(ctx);
    }
  }
  // A shared parameter's squares count on the first stage only.
  if (r == 0 || r == p.pp - 1)
    for (StringRef name : p.shared) {
      unsigned index = byName.lookup(name);
      sharedParams.push_back(index);
      params[index].countSquares = r == 0;
    }
  return success();
}

Value RankStep::operandOf(OpBuilder &b, ValueRange stepParams, Value tokens,
                          Value targets, int64_t c, unsigned i, int64_t mb) {
  Stage &st = p.info[c * p.pp + r];
  Location loc = p.loc;
  if (static_cast<int>(i) == st.tokensArg)
    return sliceMicroBatch(b, loc, tokens, p.microTokens, b.getIndexAttr(mb),
                           p.plan.microBatches);
  if (static_cast<int>(i) == st.targetsArg)
    return sliceMicroBatch(b, loc, targets, p.microTokens, b.getIndexAttr(mb),
                           p.plan.microBatches);
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
}

SmallVector<Value> RankStep::sums(OpBuilder &b, ValueRange stepParams,
                                  Value tokens, Value targets) {
  Location loc = p.loc;
  int64_t pp = p.pp;
  ScalarBuilder s{b, loc};
  auto operand = [&](int64_t c, unsigned i, int64_t mb) {
    return operandOf(b, stepParams, tokens, targets, c, i, mb);
  };
  Value lossSum = s.wrap(s.constant(0.0));
  // Per chunk, the gradients of its stage's parameters so far.
  SmallVector<SmallVector<Value>> chunkGrads(p.v);
  // Per (micro-batch, chunk): what its backward pass reads of its forward
  // pass, the forward half's kept values or, when the backward pass reruns
  // the forward half, its operands.
  llvm::DenseMap<std::pair<int64_t, int64_t>, SmallVector<Value>> saved;
  for (const PipelineAction &action : p.schedule.ranks[r]) {
    int64_t c = action.chunk, k = c * pp + r, mb = action.microBatch;
    Stage &st = p.info[k];
    Block &gradBlock = st.grad.getBody().front();
    if (!action.backward) {
      SmallVector<Value> operands;
      for (unsigned i = 0, e = st.split.forward.getNumArguments(); i < e; ++i) {
        if (takesActivations(st.grad, i))
          operands.push_back(RecvOp::create(
              b, loc, gradBlock.getArgument(i).getType(), (k - 1) % pp,
              /*tag=*/0));
        else
          operands.push_back(operand(c, i, mb));
      }
      TraceBeginOp::create(b, loc, TraceSpan::forward, mb, c);
      auto call = func::CallOp::create(
          b, loc, p.wholeStage ? p.plains[k] : st.split.forward, operands);
      TraceEndOp::create(b, loc, TraceSpan::forward);
      Value out = call.getResult(0);
      if (k == p.stages - 1)
        lossSum = AddOp::create(b, loc, lossSum, out);
      else
        SendOp::create(b, loc, out, (k + 1) % pp, /*tag=*/0);
      saved[{mb, c}] = p.wholeStage
                           ? operands
                           : SmallVector<Value>(call.getResults().drop_front());
      continue;
    }
    Type outType = st.split.forward.getResultTypes().front();
    Value seed = k == p.stages - 1
                     ? SeedOp::create(b, loc, outType).getResult()
                     : RecvOp::create(b, loc, outType, (k + 1) % pp, /*tag=*/1)
                           .getResult();
    SmallVector<Value> operands;
    for (unsigned i : st.split.backwardArgs)
      operands.push_back(operand(c, i, mb));
    SmallVector<Value> kept = saved.lookup({mb, c});
    saved.erase({mb, c});
    TraceBeginOp::create(b, loc, TraceSpan::backward, mb, c);
    if (p.wholeStage) {
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
  SmallVector<Value> result = {lossSum};
  llvm::append_range(result, stepGradients(b, chunkGrads));
  return result;
}

SmallVector<Value>
RankStep::stepGradients(OpBuilder &b, ArrayRef<SmallVector<Value>> chunkGrads) {
  Location loc = p.loc;
  SmallVector<Value> stepGrads(params.size());
  for (int64_t c = 0; c < p.v; ++c) {
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
    int64_t peer = r == 0 ? p.pp - 1 : 0;
    SendOp::create(b, loc, g, peer, /*tag=*/2);
    Value other = RecvOp::create(b, loc, g.getType(), peer, /*tag=*/2);
    Location sumLoc = withPhase(loc, Phase::accumulation);
    g = r == 0 ? AddOp::create(b, sumLoc, g, other).getResult()
               : AddOp::create(b, sumLoc, other, g).getResult();
  }
  return stepGrads;
}

Value RankStep::losses(OpBuilder &b, ValueRange evalParams, Value tokens,
                       Value targets) {
  Location loc = p.loc;
  ScalarBuilder s{b, loc};
  Value lossSum = s.wrap(s.constant(0.0));
  // In the order of the stages, which every rank's sends and receives then
  // follow; the last stage adds up the losses.
  for (int64_t mb = 0; mb < p.plan.microBatches; ++mb) {
    for (int64_t c = 0; c < p.v; ++c) {
      int64_t k = c * p.pp + r;
      func::FuncOp plain = p.plains[k];
      SmallVector<Value> operands;
      for (unsigned i = 0, e = plain.getNumArguments(); i < e; ++i)
        operands.push_back(
            takesActivations(plain, i)
                ? RecvOp::create(b, loc, plain.getArgumentTypes()[i],
                                 (k - 1) % p.pp, /*tag=*/0)
                      .getResult()
                : operandOf(b, evalParams, tokens, targets, c, i, mb));
      Value out = func::CallOp::create(b, loc, plain, operands).getResult(0);
      if (k == p.stages - 1)
        lossSum = AddOp::create(b, loc, lossSum, out);
      else
        SendOp::create(b, loc, out, (k + 1) % p.pp, /*tag=*/0);
    }
  }
  return lossSum;
}

LogicalResult RankStep::build(OpBuilder &b) {
  if (failed(collectParams()))
    return failure();
  auto stepSums = [&](OpBuilder &b, ValueRange stepParams, Value tokens,
                      Value targets) {
    return sums(b, stepParams, tokens, targets);
  };
  if (failed(buildStep(p.module, b, p.loc, p.training, p.plan,
                       getStageStepName(r), r, params, p.tokensType, stepSums)))
    return failure();
  auto evalLosses = [&](OpBuilder &b, ValueRange evalParams, Value tokens,
                        Value targets) {
    return losses(b, evalParams, tokens, targets);
  };
  return buildEval(p.module, b, p.loc, p.plan, getStageEvalName(r), params,
                   p.tokensType, evalLosses);
}
} // namespace

LogicalResult mlir::loom::buildPipelineSteps(ModuleOp module,
                                             TrainingAttr training,
                                             const PlanConfig &plan) {
  return PipelineSteps(module, training, plan).build();
}
