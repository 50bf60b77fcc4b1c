//===- LoomAutodiff.cpp - Reverse-mode differentiation of a block ---------===//

#include "loom/Dialect/LoomAutodiff.h"

#include "loom/Dialect/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::loom;

void CotangentMap::accumulate(OpBuilder &b, Location loc, Value value,
                              Value grad) {
  Value &slot = grads[value];
  slot = slot ? AddOp::create(b, loc, slot, grad).getResult() : grad;
}

Value mlir::loom::buildZeros(OpBuilder &b, Location loc, Type type) {
  auto tensorType = cast<RankedTensorType>(type);
  return arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(tensorType,
                             b.getZeroAttr(tensorType.getElementType())));
}

LogicalResult mlir::loom::backpropagate(RewriterBase &rewriter,
                                        ArrayRef<Operation *> ops,
                                        CotangentMap &cotangents) {
  // The VJPs of ops that replace themselves insert their new forward op
  // where the old one was; the backward pass keeps going at the end.
  OpBuilder::InsertPoint backward = rewriter.saveInsertionPoint();
  for (Operation *op : llvm::reverse(ops)) {
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
    rewriter.restoreInsertionPoint(backward);
    for (auto [result, g] : llvm::zip(op->getResults(), resultGrads))
      if (!g)
        g = buildZeros(rewriter, op->getLoc(), result.getType());
    SmallVector<Value> operands(op->getOperands());
    Location loc = op->getLoc();
    SmallVector<Value> operandGrads;
    if (failed(differentiable.buildVJP(rewriter, resultGrads, operandGrads)))
      return failure();
    // `op` may be gone now.
    if (operandGrads.size() != operands.size())
      return emitError(loc)
             << "the vector-Jacobian product built " << operandGrads.size()
             << " operand cotangents for " << operands.size() << " operands";
    rewriter.restoreInsertionPoint(backward);
    for (auto [operand, g] : llvm::zip(operands, operandGrads))
      if (g)
        cotangents.accumulate(rewriter, loc, operand, g);
    backward = rewriter.saveInsertionPoint();
  }
  return success();
}

/// Each phase's mark in a FusedLoc's metadata, in the enum's order.
static constexpr llvm::StringLiteral kPhaseNames[] = {
    "loom.forward", "loom.backward", "loom.accumulation"};

Location mlir::loom::withPhase(Location loc, Phase phase) {
  MLIRContext *context = loc.getContext();
  return FusedLoc::get(
      context, {loc},
      StringAttr::get(context, kPhaseNames[static_cast<int>(phase)]));
}

std::optional<Phase> mlir::loom::getPhase(Location loc) {
  std::optional<Phase> phase;
  loc->walk([&](Location inner) {
    auto fused = dyn_cast<FusedLoc>(inner);
    auto name = fused ? dyn_cast_or_null<StringAttr>(fused.getMetadata())
                      : StringAttr();
    const auto *found =
        name ? llvm::find(kPhaseNames, name.getValue()) : std::end(kPhaseNames);
    if (found == std::end(kPhaseNames))
      return WalkResult::advance();
    phase = static_cast<Phase>(found - std::begin(kPhaseNames));
    return WalkResult::interrupt();
  });
  return phase;
}
