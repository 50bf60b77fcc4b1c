//===- Differentiate.cpp - The loom-differentiate pass --------------------===//
//
// Reverse-mode differentiation of the forward function. The pass knows no op:
// every op states its vector-Jacobian product through
// DifferentiableOpInterface, so a new op is differentiable by implementing
// the interface, without touching this file.
//
//===----------------------------------------------------------------------===//

#include "Loom/LoomDialect.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMDIFFERENTIATE
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// A zero tensor of `type`, for parameters the loss does not depend on.
Value zerosLike(OpBuilder &b, Location loc, Type type) {
  auto tensorType = cast<RankedTensorType>(type);
  return arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(tensorType,
                             b.getZeroAttr(tensorType.getElementType())));
}

/// Sums the cotangents that reach each value while walking a block backward.
class CotangentMap {
public:
  void accumulate(OpBuilder &b, Location loc, Value value, Value grad) {
    Value &slot = grads[value];
    slot = slot ? AddOp::create(b, loc, slot, grad).getResult() : grad;
  }
  Value lookup(Value value) const { return grads.lookup(value); }

private:
  DenseMap<Value, Value> grads;
};

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
                       b.getStringAttr("loss"));
    for (auto [resultIndex, argIndex] : llvm::enumerate(paramIndices))
      grad.setResultAttr(
          resultIndex + 1, LoomDialect::getGradAttrName(),
          forward.getArgAttr(argIndex, LoomDialect::getParamAttrName()));

    // Clone the forward computation; the backward ops follow it.
    IRMapping mapping;
    forward.getBody().cloneInto(&grad.getBody(), mapping);
    Block &block = grad.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    Value loss = ret.getOperand(0);
    b.setInsertionPoint(ret);

    CotangentMap cotangents;
    cotangents.accumulate(
        b, loc, loss,
        arith::ConstantOp::create(
            b, loc,
            DenseElementsAttr::get(cast<RankedTensorType>(loss.getType()),
                                   b.getF32FloatAttr(1.0f))));

    SmallVector<Operation *> forwardOps;
    for (Operation &op : block.without_terminator())
      forwardOps.push_back(&op);
    for (Operation *op : llvm::reverse(forwardOps)) {
      SmallVector<Value> resultGrads;
      bool anyGrad = false;
      for (Value result : op->getResults()) {
        Value g = cotangents.lookup(result);
        anyGrad |= static_cast<bool>(g);
        resultGrads.push_back(g);
      }
      if (!anyGrad)
        continue;
      auto differentiable = dyn_cast<DifferentiableOpInterface>(op);
      if (!differentiable)
        return op->emitOpError()
               << "has no vector-Jacobian product (it does not implement "
                  "DifferentiableOpInterface), so the loss cannot be "
                  "differentiated through it";
      for (auto [i, g] : llvm::enumerate(resultGrads))
        if (!g)
          g = zerosLike(b, op->getLoc(), op->getResult(i).getType());
      SmallVector<Value> operandGrads;
      b.setInsertionPoint(ret);
      if (failed(differentiable.buildVJP(b, resultGrads, operandGrads)))
        return failure();
      if (operandGrads.size() != op->getNumOperands())
        return op->emitOpError()
               << "built " << operandGrads.size() << " operand cotangents for "
               << op->getNumOperands() << " operands";
      for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads))
        if (g)
          cotangents.accumulate(b, op->getLoc(), operand, g);
    }

    SmallVector<Value> results = {loss};
    for (unsigned i : paramIndices) {
      Value g = cotangents.lookup(block.getArgument(i));
      results.push_back(g ? g
                          : zerosLike(b, loc, block.getArgument(i).getType()));
    }
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    return success();
  }
};
} // namespace
