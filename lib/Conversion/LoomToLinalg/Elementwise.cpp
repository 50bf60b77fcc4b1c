//===- Elementwise.cpp - GELU, SwiGLU, residual and bias adds -------------===//
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

/// sigmoid(g) = 1 / (1 + exp(-g)).
Value sigmoid(OpBuilder &nb, Location l, Lowering &L, Value g) {
  Value e = math::ExpOp::create(nb, l, arith::NegFOp::create(nb, l, g));
  return arith::DivFOp::create(nb, l, L.f32(nb, 1.0),
                               arith::AddFOp::create(nb, l, L.f32(nb, 1.0), e));
}

struct SwigluLowering : LoomPattern<SwigluOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(SwigluOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    return {L.elementwise(
        {adaptor.getGate(), adaptor.getUp()},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value silu =
              arith::MulFOp::create(nb, l, a[0], sigmoid(nb, l, L, a[0]));
          linalg::YieldOp::create(
              nb, l, arith::MulFOp::create(nb, l, silu, a[1]).getResult());
        })};
  }
};

struct SwigluGradLowering : LoomPattern<SwigluGradOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(SwigluGradOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    auto shape = cast<RankedTensorType>(adaptor.getGrad().getType()).getShape();
    // d/dg silu(g) = s * (1 + g * (1 - s)) for s = sigmoid(g).
    ValueRange grads = L.elementwise(
        {adaptor.getGrad(), adaptor.getGate(), adaptor.getUp()},
        {L.empty(shape), L.empty(shape)},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value dy = a[0], g = a[1], up = a[2];
          Value s = sigmoid(nb, l, L, g);
          Value silu = arith::MulFOp::create(nb, l, g, s);
          Value slope = arith::MulFOp::create(
              nb, l, s,
              arith::AddFOp::create(
                  nb, l, L.f32(nb, 1.0),
                  arith::MulFOp::create(
                      nb, l, g,
                      arith::SubFOp::create(nb, l, L.f32(nb, 1.0), s))));
          Value dgate = arith::MulFOp::create(
              nb, l, arith::MulFOp::create(nb, l, dy, up), slope);
          Value dup = arith::MulFOp::create(nb, l, dy, silu);
          linalg::YieldOp::create(nb, l, ValueRange{dgate, dup});
        });
    return {grads[0], grads[1]};
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
template <typename FanOut> struct FanOutLowering : LoomPattern<FanOut> {
  using LoomPattern<FanOut>::LoomPattern;
  SmallVector<Value> lower(FanOut op, typename FanOut::Adaptor adaptor,
                           Lowering &L) const override {
    return {adaptor.getInput()};
  }
};

} // namespace

void mlir::loom::populateLoomElementwiseToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns
      .add<GeluLowering, GeluGradLowering, SwigluLowering, SwigluGradLowering,
           AddLowering, BiasAddLowering, BiasAddGradLowering,
           FanOutLowering<FanOutOp>, FanOutLowering<FanOutSharedOp>>(
          patterns.getContext());
}
