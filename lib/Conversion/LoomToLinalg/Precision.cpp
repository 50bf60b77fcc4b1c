//===- Precision.cpp - Conversions, the loss's seed, narrow storage -------===//
//
// The generated loops compute in f32. An op that mixed precision stores in
// bf16 or f16 becomes the same op on f32 between conversions: its operands
// read widened, its results rounded back to their storage type. Only the
// values between ops keep the narrow type (the activations saved for the
// backward pass, the casted parameters), which is where memory goes; the
// conversions are elementwise loops of their own.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::lowering;

namespace {
bool isNarrowFloat(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType()) &&
         !tensor.getElementType().isF32();
}

RankedTensorType withF32(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return RankedTensorType::get(tensor.getShape(),
                               Float32Type::get(type.getContext()));
}

struct ConvertLowering : LoomPattern<ConvertOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(ConvertOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    auto resultType = cast<RankedTensorType>(op.getType());
    Type from = op.getInput().getType().getElementType();
    Type to = resultType.getElementType();
    Value scale;
    if (adaptor.getScale())
      scale = tensor::ExtractOp::create(L.b, L.loc, adaptor.getScale(),
                                        ValueRange{});
    Value init = tensor::EmptyOp::create(L.b, L.loc, resultType.getShape(), to);
    return {L.elementwise(adaptor.getInput(), init,
                          [&](OpBuilder &nb, Location l, ValueRange a) {
                            Value x = a[0];
                            if (!from.isF32())
                              x = arith::ExtFOp::create(nb, l, L.f32(), x);
                            if (scale)
                              x = arith::MulFOp::create(nb, l, x, scale);
                            if (!to.isF32())
                              x = arith::TruncFOp::create(nb, l, to, x);
                            linalg::YieldOp::create(nb, l, x);
                          })[0]};
  }
};

struct SeedLowering : LoomPattern<SeedOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(SeedOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    return {arith::ConstantOp::create(
        L.b, L.loc,
        DenseElementsAttr::get(op.getType(), L.b.getF32FloatAttr(1.0f)))};
  }
};
} // namespace

LogicalResult
mlir::loom::widenMixedPrecisionOps(Operation *root,
                                   llvm::function_ref<bool(Operation *)> keep) {
  SmallVector<Operation *> narrow;
  WalkResult walked = root->walk([&](Operation *op) {
    if (!isa<LoomDialect>(op->getDialect()) || (keep && keep(op)))
      return WalkResult::advance();
    auto types =
        llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes());
    auto found = llvm::find_if(types, isNarrowFloat);
    if (found == types.end())
      return WalkResult::advance();
    if (op->hasTrait<MixedPrecision>()) {
      narrow.push_back(op);
      return WalkResult::advance();
    }
    // Conversions and transfers (copies), and the layer loops that carry
    // the layers' values, lower whatever their element types.
    if (isa<ConvertOp, TransferOp>(op) || op->getNumRegions() > 0 ||
        op->hasTrait<OpTrait::IsTerminator>())
      return WalkResult::advance();
    op->emitOpError() << "is lowered for f32 tensors only, got " << *found;
    return WalkResult::interrupt();
  });
  if (walked.wasInterrupted())
    return failure();
  for (Operation *op : narrow) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    Operation *wide = b.clone(*op);
    for (OpOperand &operand : wide->getOpOperands())
      if (isNarrowFloat(operand.get().getType()))
        operand.set(ConvertOp::create(b, loc, withF32(operand.get().getType()),
                                      operand.get(), /*scale=*/Value()));
    // The clone follows the conversions of its operands.
    wide->moveBefore(b.getInsertionBlock(), b.getInsertionPoint());
    b.setInsertionPointAfter(wide);
    for (auto [before, after] :
         llvm::zip(op->getResults(), wide->getResults())) {
      Value replacement = after;
      if (isNarrowFloat(before.getType())) {
        after.setType(withF32(before.getType()));
        replacement = ConvertOp::create(b, loc, before.getType(), after,
                                        /*scale=*/Value());
      }
      before.replaceAllUsesWith(replacement);
    }
    op->erase();
  }
  return success();
}

void mlir::loom::populateLoomPrecisionToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<ConvertLowering, SeedLowering>(patterns.getContext());
}
