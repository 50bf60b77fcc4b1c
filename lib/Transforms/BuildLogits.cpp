//===- BuildLogits.cpp - The loom-build-logits pass -----------------------===//
//
// Sampling from a model needs its next-token distribution, which the
// training step never returns: @forward ends in the loss. @logits is
// @forward up to the loss's operand, returned in f32. It is built late,
// after mixed precision, so that it computes exactly what @forward does.
// Every rank that calls it gets the whole model's scores: with every
// parameter whole (a rank then samples on its own); under ZeRO-3, whose
// @forward gathers the replicas' shards first; or under tensor
// parallelism, where the ranks gather the blocks of columns of the scores
// that vocabulary parallelism leaves each (every rank then makes the same
// calls).
//
// Pipeline parallelism leaves each rank some layers, and @forward is gone:
// each rank's @logits_stage<r> runs what its @eval_stage<r> runs for the
// first micro-batch, with the last stage's forward pass ending in the
// scores, which the last rank then sends to every other rank of the
// pipeline, so that all of them sample the same tokens.
//
//===----------------------------------------------------------------------===//

#include "Replicas.h"

#include "loom/Dialect/LoomDialect.h"
#include "loom/Transforms/Passes.h"
#include "loom/abi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/BitVector.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMBUILDLOGITS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The message tag of the scores the last pipeline rank sends the others
/// (loom.send's tags 0-2 carry the training step's messages).
constexpr int64_t kScoresTag = 3;

/// Under vocabulary parallelism each of the `tp` ranks holds a block of the
/// scores' columns, in rank order: they gather the whole rows.
Value gatherVocabulary(OpBuilder &b, CrossEntropyOp loss, Value scores,
                       int64_t tp) {
  if (!loss.getVocabStart() || !loss.getGridAttr())
    return scores;
  auto type = cast<RankedTensorType>(scores.getType());
  SmallVector<int64_t> shape(type.getShape());
  int64_t vocabDim = type.getRank() - 1;
  shape[vocabDim] *= tp;
  SmallVector<shard::GridAxis> axes(loss.getGridAxesAttr().asArrayRef());
  return shard::AllGatherOp::create(b, loss.getLoc(), type.clone(shape),
                                    loss.getGridAttr().getValue(), axes, scores,
                                    APInt(64, vocabDim));
}

/// The loom.cross_entropy that `func` returns alone, or null.
CrossEntropyOp returnedLoss(func::FuncOp func) {
  if (func.isExternal() || !func.getBody().hasOneBlock())
    return {};
  auto returnOp = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  return returnOp.getNumOperands() == 1
             ? returnOp.getOperand(0).getDefiningOp<CrossEntropyOp>()
             : CrossEntropyOp();
}

/// Makes `func`, which returns the loss `loss`, return instead the scores
/// the loss reads, as whole rows in f32, and drops the targets argument
/// only the loss read. Returns that argument's former index, or -1.
FailureOr<int> endInScores(func::FuncOp func, CrossEntropyOp loss, int64_t tp) {
  auto returnOp = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  OpBuilder b(returnOp);
  Value scores = gatherVocabulary(b, loss, loss.getLogits(), tp);
  auto type = cast<RankedTensorType>(scores.getType());
  if (!type.getElementType().isF32())
    scores = ConvertOp::create(b, loss.getLoc(), type.clone(b.getF32Type()),
                               scores, /*scale=*/Value());
  func::ReturnOp::create(b, returnOp.getLoc(), scores);
  returnOp.erase();
  Value targets = loss.getTargets();
  loss.erase();
  func.setType(
      b.getFunctionType(func.getArgumentTypes(), TypeRange{scores.getType()}));
  auto argument = dyn_cast<BlockArgument>(targets);
  if (!argument || !targets.use_empty())
    return -1;
  llvm::BitVector erase(func.getNumArguments());
  erase.set(argument.getArgNumber());
  if (failed(func.eraseArguments(erase)))
    return failure();
  return static_cast<int>(argument.getArgNumber());
}

/// Whether `func`'s argument `i` is the data input `name`.
bool isInput(func::FuncOp func, unsigned i, StringRef name) {
  auto input =
      func.getArgAttrOfType<StringAttr>(i, LoomDialect::getInputAttrName());
  return input && input.getValue() == name;
}

/// The pipeline stage a call runs the forward pass of, or -1.
int64_t stageOf(func::CallOp call, SymbolTable &symbols) {
  auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
  auto stage =
      callee
          ? callee->getAttrOfType<IntegerAttr>(LoomDialect::getStageAttrName())
          : IntegerAttr();
  return stage ? stage.getInt() : -1;
}

/// Each pipeline rank's @logits_stage<r>, from its @eval_stage<r>.
class StageLogits {
public:
  StageLogits(ModuleOp module, const PlanConfig &plan)
      : module(module), plan(plan), symbols(module) {}

  LogicalResult build();

private:
  /// The last stage's forward pass, cloned to end in its scores.
  LogicalResult buildLastScores();
  LogicalResult buildRank(int64_t r);
  /// Rank `r`'s calls of its chunks' forward passes on the first
  /// micro-batch, with what they need and send, from `eval`'s body; `map`
  /// holds the arguments. Returns the scores on the last rank, else null.
  FailureOr<Value> cloneFirstMicroBatch(OpBuilder &b, func::FuncOp eval,
                                        int64_t r, IRMapping &map);

  ModuleOp module;
  const PlanConfig &plan;
  SymbolTable symbols;
  func::FuncOp lastStage, lastScores;
  /// The last stage's targets argument, which its scores do not take.
  int lastTargets = -1;
};

LogicalResult StageLogits::build() {
  for (int64_t r = 0; r < plan.pp; ++r)
    if (module.lookupSymbol(getStageLogitsName(r)))
      return module.emitError() << "loom-build-logits: the module already has "
                                   "a function @"
                                << getStageLogitsName(r);
  if (failed(buildLastScores()))
    return failure();
  for (int64_t r = 0; r < plan.pp; ++r)
    if (failed(buildRank(r)))
      return failure();
  return success();
}

LogicalResult StageLogits::buildLastScores() {
  int64_t last = plan.pp * plan.virtualStages - 1;
  auto eval = module.lookupSymbol<func::FuncOp>(getStageEvalName(plan.pp - 1));
  if (eval && !eval.isExternal())
    eval.walk([&](func::CallOp call) {
      if (stageOf(call, symbols) == last)
        lastStage = symbols.lookup<func::FuncOp>(call.getCallee());
    });
  CrossEntropyOp loss = lastStage ? returnedLoss(lastStage) : CrossEntropyOp();
  if (!loss)
    return module.emitError()
           << "loom-build-logits: expected @" << getStageEvalName(plan.pp - 1)
           << " to call the last pipeline stage's forward pass, which returns "
              "the loom.cross_entropy of the model's logits (run "
              "loom-build-train-step first)";
  OpBuilder b(module.getContext());
  b.setInsertionPointAfter(lastStage);
  lastScores = cast<func::FuncOp>(b.clone(*lastStage));
  lastScores.setSymName((lastStage.getSymName() + "_scores").str());
  lastScores->removeAttr(LoomDialect::getStageAttrName());
  symbols.insert(lastScores);
  FailureOr<int> targets =
      endInScores(lastScores, returnedLoss(lastScores), plan.tp);
  if (failed(targets))
    return failure();
  lastTargets = *targets;
  return success();
}

FailureOr<Value> StageLogits::cloneFirstMicroBatch(OpBuilder &b,
                                                   func::FuncOp eval, int64_t r,
                                                   IRMapping &map) {
  Value tokens;
  for (unsigned i = 0, e = eval.getNumArguments(); i < e; ++i)
    if (isInput(eval, i, LOOM_INPUT_TOKENS))
      tokens = eval.getArgument(i);
  auto isMapped = [&](Value v) { return map.contains(v); };
  Value scores;
  int64_t calls = 0;
  for (Operation &op : eval.getBody().front()) {
    if (calls == plan.virtualStages || op.hasTrait<OpTrait::IsTerminator>())
      break;
    // The first micro-batch's tokens are the function's.
    if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op);
        slice && tokens && slice.getSource() == tokens) {
      if (slice.getType() == map.lookup(tokens).getType() &&
          llvm::all_of(slice.getStaticOffsets(),
                       [](int64_t o) { return o == 0; }))
        map.map(slice.getResult(), map.lookup(tokens));
      continue;
    }
    auto call = dyn_cast<func::CallOp>(op);
    int64_t stage = call ? stageOf(call, symbols) : -1;
    if (call && call.getCallee() == lastStage.getSymName()) {
      // The last stage's scores, which do not take its targets.
      SmallVector<Value> operands;
      for (auto [i, operand] : llvm::enumerate(call.getOperands()))
        if (static_cast<int>(i) != lastTargets)
          operands.push_back(operand);
      if (!llvm::all_of(operands, isMapped))
        continue;
      for (Value &operand : operands)
        operand = map.lookup(operand);
      scores = func::CallOp::create(b, call.getLoc(), lastScores, operands)
                   .getResult(0);
    } else if (llvm::all_of(op.getOperands(), isMapped)) {
      b.clone(op, map);
    } else {
      // What needs the targets or a loss (the losses' sum) is not cloned.
      continue;
    }
    if (stage < 0)
      continue;
    // The chunk's activations go on to the next stage.
    if (++calls == plan.virtualStages && call.getNumResults() == 1)
      for (Operation *user : call.getResult(0).getUsers())
        if (isa<SendOp>(user))
          b.clone(*user, map);
  }
  if ((r == plan.pp - 1) != static_cast<bool>(scores))
    return eval.emitOpError()
           << "loom-build-logits: expected the last pipeline stage's forward "
              "pass on the last rank, on the first micro-batch";
  return scores;
}

LogicalResult StageLogits::buildRank(int64_t r) {
  auto eval = module.lookupSymbol<func::FuncOp>(getStageEvalName(r));
  if (!eval || eval.isExternal() || !eval.getBody().hasOneBlock())
    return module.emitError()
           << "loom-build-logits: expected @" << getStageEvalName(r)
           << " (run loom-build-train-step first)";
  // The function takes what the rank's forward passes take, but the
  // targets, and one micro-batch of tokens.
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> attrs;
  SmallVector<unsigned> kept;
  for (unsigned i = 0, e = eval.getNumArguments(); i < e; ++i) {
    if (isInput(eval, i, LOOM_INPUT_TARGETS))
      continue;
    auto type = eval.getArgumentTypes()[i];
    if (isInput(eval, i, LOOM_INPUT_TOKENS)) {
      auto tokens = cast<RankedTensorType>(type);
      SmallVector<int64_t> shape(tokens.getShape());
      if (shape.empty() || shape[0] % plan.microBatches)
        return eval.emitOpError() << "loom-build-logits: expected tokens of "
                                     "whole micro-batches";
      shape[0] /= plan.microBatches;
      type = tokens.clone(shape);
    }
    types.push_back(type);
    attrs.push_back(eval.getArgAttrDict(i));
    kept.push_back(i);
  }
  Type scoresType = lastScores.getResultTypes().front();
  OpBuilder b(module.getContext());
  b.setInsertionPointAfter(eval);
  auto logits =
      func::FuncOp::create(b, eval.getLoc(), getStageLogitsName(r),
                           b.getFunctionType(types, TypeRange{scoresType}));
  logits.setAllArgAttrs(attrs);
  logits.setResultAttr(0, LoomDialect::getOutputAttrName(),
                       b.getStringAttr(LOOM_OUTPUT_LOGITS));
  Block *body = logits.addEntryBlock();
  IRMapping map;
  for (auto [i, from] : llvm::enumerate(kept))
    map.map(eval.getArgument(from), body->getArgument(i));
  b.setInsertionPointToStart(body);
  FailureOr<Value> scores = cloneFirstMicroBatch(b, eval, r, map);
  if (failed(scores))
    return failure();
  Location loc = eval.getLoc();
  Value result = *scores;
  if (r == plan.pp - 1) {
    for (int64_t peer = 0; peer < plan.pp - 1; ++peer)
      SendOp::create(b, loc, result, peer, kScoresTag);
  } else {
    result = RecvOp::create(b, loc, scoresType, plan.pp - 1, kScoresTag);
  }
  func::ReturnOp::create(b, loc, result);
  return success();
}

struct BuildLogitsPass
    : public loom::impl::LoomBuildLogitsBase<BuildLogitsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan))
      return signalPassFailure();
    if (plan->pp > 1) {
      if (failed(StageLogits(module, *plan).build()))
        return signalPassFailure();
      return;
    }
    auto forward = module.lookupSymbol<func::FuncOp>(
        LoomDialect::getForwardFunctionName());
    if (!forward || forward.isExternal() || !forward.getBody().hasOneBlock()) {
      module.emitError() << "loom-build-logits: expected a function @"
                         << LoomDialect::getForwardFunctionName();
      return signalPassFailure();
    }
    if (!returnedLoss(forward)) {
      forward.emitOpError()
          << "loom-build-logits: expected @"
          << LoomDialect::getForwardFunctionName()
          << " to return the loom.cross_entropy of the model's logits";
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(forward);
    auto logits = cast<func::FuncOp>(b.clone(*forward));
    logits.setSymName(LOOM_OUTPUT_LOGITS);
    if (failed(endInScores(logits, returnedLoss(logits), plan->tp)))
      return signalPassFailure();
    logits.setResultAttr(0, LoomDialect::getOutputAttrName(),
                         b.getStringAttr(LOOM_OUTPUT_LOGITS));
  }
};
} // namespace
