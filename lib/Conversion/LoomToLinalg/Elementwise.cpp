//===- Elementwise.cpp - GELU, residual and bias adds ---------------------===//
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::lowering;

namespace {
struct GeluLowering : LoomPattern<GeluOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(GeluOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    return {L.elementwise(adaptor.getInput(), [&](OpBuilder &nb, Location l,
                                                  ValueRange a) {
      linalg::YieldOp::create(nb, l,
                              ScalarGeluOp::create(nb, l, a[0]).getResult());
    })};
  }
};

struct GeluGradLowering : LoomPattern<GeluGradOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(GeluGradOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    return {L.elementwise(
        {adaptor.getGrad(), adaptor.getInput()},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          linalg::YieldOp::create(
              nb, l, ScalarGeluGradOp::create(nb, l, a[0], a[1]).getResult());
        })};
  }
};

struct AddLowering : LoomPattern<AddOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(AddOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    if (isOwnedCarriedSum(op.getLhs()))
      return {L.elementwise({adaptor.getRhs()}, {adaptor.getLhs()}, sumBody)
                  .front()};
    return {L.elementwise({adaptor.getLhs(), adaptor.getRhs()}, sumBody)};
  }

  /// Whether `sum` is a sum a loop carries from one iteration to the next
  /// (the gradients over micro-batches), which nothing but its addition
  /// reads and which starts from a constant (zeros): the addition can then
  /// write into it, and bufferization update one buffer in place instead
  /// of a new one each iteration (the constant itself becomes a fill of
  /// that buffer, fillSplatConstants).
  /// A value that may share an argument's buffer is never written: the
  /// caller may read it again.
  static bool isOwnedCarriedSum(Value sum) {
    auto arg = dyn_cast<BlockArgument>(sum);
    Operation *parent = arg ? arg.getOwner()->getParentOp() : nullptr;
    auto loop = dyn_cast_or_null<LoopLikeOpInterface>(parent);
    OpOperand *init = loop ? loop.getTiedLoopInit(arg) : nullptr;
    return init && sum.hasOneUse() && matchPattern(init->get(), m_Constant());
  }
};

struct BiasAddLowering : LoomPattern<BiasAddOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(BiasAddOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    Value x = L.rows(adaptor.getInput());
    auto shape = cast<RankedTensorType>(x.getType()).getShape();
    Value y = L.generic({x, adaptor.getBias()}, L.empty(shape),
                        {L.map(2, {0, 1}), L.map(2, {1}), L.map(2, {0, 1})},
                        {kPar, kPar}, sumBody)[0];
    return {L.unrows(y, op.getType())};
  }
};

struct BiasAddGradLowering : LoomPattern<BiasAddGradOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(BiasAddGradOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    return {L.columnSums(L.rows(adaptor.getGrad()))};
  }
};

/// The identity: its cotangent's sum over the group is the backward pass's
/// collective, already built.
struct FanOutLowering : LoomPattern<FanOutOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(FanOutOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    return {adaptor.getInput()};
  }
};

} // namespace

void mlir::loom::populateLoomElementwiseToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<GeluLowering, GeluGradLowering, AddLowering, BiasAddLowering,
               BiasAddGradLowering, FanOutLowering>(patterns.getContext());
}
