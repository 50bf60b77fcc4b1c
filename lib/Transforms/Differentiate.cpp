//===- Differentiate.cpp - The loom-differentiate pass --------------------===//
//
// Reverse-mode differentiation of the forward function. The pass knows no op:
// every op states its vector-Jacobian product through
// DifferentiableOpInterface, so a new op is differentiable by implementing
// the interface, without touching this file.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomAutodiff.h"
#include "loom/Dialect/LoomDialect.h"
#include "loom/Transforms/Passes.h"
#include "loom/abi.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMDIFFERENTIATE
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
struct DifferentiatePass
    : public loom::impl::LoomDifferentiateBase<DifferentiatePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // A pipeline plan's stages, each differentiated on its own.
    SmallVector<func::FuncOp> stages;
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(LoomDialect::getStageAttrName()))
        stages.push_back(func);
    if (!stages.empty()) {
      for (func::FuncOp stage : stages)
        if (failed(buildGradFunction(stage, stage.getName().str() + "_grad")))
          return signalPassFailure();
      return;
    }
    auto forward = module.lookupSymbol<func::FuncOp>(
        LoomDialect::getForwardFunctionName());
    if (!forward) {
      module.emitError() << "expected a function @"
                         << LoomDialect::getForwardFunctionName()
                         << " to differentiate";
      return signalPassFailure();
    }
    if (failed(buildGradFunction(forward,
                                 LoomDialect::getForwardGradFunctionName())))
      return signalPassFailure();
  }

  /// Builds `name`, the gradient function of `forward`. A pipeline stage's
  /// output is the loss or the activations for the next stage; its
  /// gradient comes in as an argument after the stage's own
  /// (`loom.input = "loss_grad"` or `"activations_grad"`), and the gradient
  /// of the activations it took (`loom.input = "activations"`) goes out
  /// after its output. The whole model's loss is seeded with `loom.seed`.
  LogicalResult buildGradFunction(func::FuncOp forward, StringRef name) {
    ModuleOp module = forward->getParentOfType<ModuleOp>();
    if (module.lookupSymbol(name))
      return module.emitError()
             << "the module already has a function @" << name;
    bool isStage = forward->hasAttr(LoomDialect::getStageAttrName());
    FunctionType forwardType = forward.getFunctionType();
    auto outputType = forwardType.getNumResults() == 1
                          ? dyn_cast<RankedTensorType>(forwardType.getResult(0))
                          : RankedTensorType();
    auto outputName = outputType ? forward.getResultAttrOfType<StringAttr>(
                                       0, LoomDialect::getOutputAttrName())
                                 : StringAttr();
    bool isLoss = outputType && outputType.getRank() == 0;
    if (!outputType || !forward.getBody().hasOneBlock() ||
        (!isLoss && !(isStage && outputName &&
                      outputName == LoomDialect::getActivationsName())))
      return forward.emitOpError()
             << "expected one block returning a single 0-d loss tensor"
             << (isStage ? " or the activations" : "") << " to differentiate";

    OpBuilder b(forward);
    b.setInsertionPointAfter(forward);
    Location loc = forward.getLoc();

    SmallVector<unsigned> paramIndices;
    std::optional<unsigned> activationsArg;
    for (unsigned i = 0, e = forward.getNumArguments(); i < e; ++i) {
      if (forward.getArgAttr(i, LoomDialect::getParamAttrName()))
        paramIndices.push_back(i);
      auto input = forward.getArgAttrOfType<StringAttr>(
          i, LoomDialect::getInputAttrName());
      if (input && input == LoomDialect::getActivationsName())
        activationsArg = i;
    }

    SmallVector<Type> inputs(forwardType.getInputs());
    if (isStage)
      inputs.push_back(outputType);
    SmallVector<Type> resultTypes = {outputType};
    if (activationsArg)
      resultTypes.push_back(forwardType.getInput(*activationsArg));
    for (unsigned i : paramIndices)
      resultTypes.push_back(forwardType.getInput(i));
    auto grad = func::FuncOp::create(b, loc, name,
                                     b.getFunctionType(inputs, resultTypes));
    for (unsigned i = 0, e = forward.getNumArguments(); i < e; ++i)
      grad.setArgAttrs(i, forward.getArgAttrDict(i));
    if (Attribute stage = forward->getAttr(LoomDialect::getStageAttrName()))
      grad->setAttr(LoomDialect::getStageAttrName(), stage);
    if (isStage)
      grad.setArgAttr(
          inputs.size() - 1, LoomDialect::getInputAttrName(),
          b.getStringAttr(isLoss ? LoomDialect::getLossGradName()
                                 : LoomDialect::getActivationsGradName()));
    grad.setResultAttr(0, LoomDialect::getOutputAttrName(),
                       outputName ? outputName
                                  : b.getStringAttr(LOOM_OUTPUT_LOSS));
    unsigned firstGrad = activationsArg ? 2 : 1;
    if (activationsArg)
      grad.setResultAttr(
          1, LoomDialect::getOutputAttrName(),
          b.getStringAttr(LoomDialect::getActivationsGradName()));
    for (auto [resultIndex, argIndex] : llvm::enumerate(paramIndices))
      grad.setResultAttr(
          resultIndex + firstGrad, LoomDialect::getGradAttrName(),
          forward.getArgAttr(argIndex, LoomDialect::getParamAttrName()));

    // Clone the forward computation; the backward ops follow it.
    IRMapping mapping;
    forward.getBody().cloneInto(&grad.getBody(), mapping);
    Block &block = grad.getBody().front();
    if (isStage)
      block.addArgument(outputType, loc);
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    SmallVector<Operation *> forwardOps;
    for (Operation &op : block.without_terminator())
      forwardOps.push_back(&op);
    IRRewriter rewriter(b);
    rewriter.setInsertionPoint(ret);
    Value output = ret.getOperand(0);
    Value seed = isStage ? Value(block.getArguments().back())
                         : SeedOp::create(rewriter, loc, outputType);
    CotangentMap cotangents;
    cotangents.accumulate(rewriter, loc, output, seed);
    if (failed(backpropagate(rewriter, forwardOps, cotangents)))
      return failure();

    // Ops that replaced themselves updated the return's operands.
    SmallVector<Value> results = {ret.getOperand(0)};
    auto gradientOf = [&](BlockArgument arg) -> Value {
      Value g = cotangents.lookup(arg);
      return g ? g : buildZeros(rewriter, loc, arg.getType());
    };
    if (activationsArg)
      results.push_back(gradientOf(block.getArgument(*activationsArg)));
    for (unsigned i : paramIndices)
      results.push_back(gradientOf(block.getArgument(i)));
    auto newRet = func::ReturnOp::create(rewriter, ret.getLoc(), results);
    ret.erase();
    markPhases(block, newRet);
    return success();
  }

  /// Records in each op's location whether it belongs to the forward pass
  /// (it computes the output: the ops the output's value is made from) or
  /// to the backward pass (all others, recomputation included).
  static void markPhases(Block &block, func::ReturnOp ret) {
    Region *region = block.getParent();
    llvm::SmallPtrSet<Operation *, 32> forward;
    SmallVector<Value> worklist = {ret.getOperand(0)};
    while (!worklist.empty()) {
      Operation *def = worklist.pop_back_val().getDefiningOp();
      if (!def || !forward.insert(def).second)
        continue;
      def->walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          if (operand.getParentRegion() == region)
            worklist.push_back(operand);
      });
    }
    for (Operation &op : block.without_terminator()) {
      Phase phase = forward.contains(&op) ? Phase::forward : Phase::backward;
      op.walk([&](Operation *nested) {
        nested->setLoc(withPhase(nested->getLoc(), phase));
      });
    }
  }
};
} // namespace
