//===- Differentiate.cpp - The loom-differentiate pass --------------------===//
//
// Reverse-mode differentiation of the forward function. The pass knows no op:
// every op states its vector-Jacobian product through
// DifferentiableOpInterface, so a new op is differentiable by implementing
// the interface, without touching this file.
//
//===----------------------------------------------------------------------===//

#include "Loom/LoomAutodiff.h"
#include "Loom/LoomDialect.h"
#include "loom/Transforms/Passes.h"
#include "loom/abi.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

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
    auto forward = module.lookupSymbol<func::FuncOp>(
        LoomDialect::getForwardFunctionName());
    if (!forward) {
      module.emitError() << "expected a function @"
                         << LoomDialect::getForwardFunctionName()
                         << " to differentiate";
      return signalPassFailure();
    }
    if (module.lookupSymbol(LoomDialect::getForwardGradFunctionName())) {
      module.emitError() << "the module already has a function @"
                         << LoomDialect::getForwardGradFunctionName();
      return signalPassFailure();
    }
    FunctionType type = forward.getFunctionType();
    auto lossType = type.getNumResults() == 1
                        ? dyn_cast<RankedTensorType>(type.getResult(0))
                        : RankedTensorType();
    if (!lossType || lossType.getRank() != 0 ||
        !forward.getBody().hasOneBlock()) {
      forward.emitOpError() << "expected one block returning a single 0-d "
                               "loss tensor to differentiate";
      return signalPassFailure();
    }
    if (failed(buildGradFunction(forward)))
      return signalPassFailure();
  }

  LogicalResult buildGradFunction(func::FuncOp forward) {
    OpBuilder b(forward);
    b.setInsertionPointAfter(forward);
    Location loc = forward.getLoc();

    SmallVector<unsigned> paramIndices;
    for (unsigned i = 0, e = forward.getNumArguments(); i < e; ++i)
      if (forward.getArgAttr(i, LoomDialect::getParamAttrName()))
        paramIndices.push_back(i);

    FunctionType forwardType = forward.getFunctionType();
    SmallVector<Type> resultTypes = {forwardType.getResult(0)};
    for (unsigned i : paramIndices)
      resultTypes.push_back(forwardType.getInput(i));
    auto grad = func::FuncOp::create(
        b, loc, LoomDialect::getForwardGradFunctionName(),
        b.getFunctionType(forwardType.getInputs(), resultTypes));
    grad.setAllArgAttrs(forward.getAllArgAttrs());
    grad.setResultAttr(0, LoomDialect::getOutputAttrName(),
                       b.getStringAttr(LOOM_OUTPUT_LOSS));
    for (auto [resultIndex, argIndex] : llvm::enumerate(paramIndices))
      grad.setResultAttr(
          resultIndex + 1, LoomDialect::getGradAttrName(),
          forward.getArgAttr(argIndex, LoomDialect::getParamAttrName()));

    // Clone the forward computation; the backward ops follow it.
    IRMapping mapping;
    forward.getBody().cloneInto(&grad.getBody(), mapping);
    Block &block = grad.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    SmallVector<Operation *> forwardOps;
    for (Operation &op : block.without_terminator())
      forwardOps.push_back(&op);
    IRRewriter rewriter(b);
    rewriter.setInsertionPoint(ret);
    Value loss = ret.getOperand(0);
    CotangentMap cotangents;
    cotangents.accumulate(
        rewriter, loc, loss,
        arith::ConstantOp::create(
            rewriter, loc,
            DenseElementsAttr::get(cast<RankedTensorType>(loss.getType()),
                                   rewriter.getF32FloatAttr(1.0f))));
    if (failed(backpropagate(rewriter, forwardOps, cotangents)))
      return failure();

    // Ops that replaced themselves updated the return's operands.
    SmallVector<Value> results = {ret.getOperand(0)};
    for (unsigned i : paramIndices) {
      Value g = cotangents.lookup(block.getArgument(i));
      results.push_back(
          g ? g : buildZeros(rewriter, loc, block.getArgument(i).getType()));
    }
    func::ReturnOp::create(rewriter, ret.getLoc(), results);
    ret.erase();
    return success();
  }
};
} // namespace
