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
/// GPT-2's GELU and its derivative, on scalars.
constexpr double kGeluC = 0.044715;
Value geluInner(OpBuilder &nb, Lowering &L, Value x) {
  const double s = std::sqrt(2.0 / M_PI);
  Value x3 = arith::MulFOp::create(nb, L.loc, x,
                                   arith::MulFOp::create(nb, L.loc, x, x));
  Value u = arith::AddFOp::create(
      nb, L.loc, x, arith::MulFOp::create(nb, L.loc, x3, L.f32(nb, kGeluC)));
  return math::TanhOp::create(
      nb, L.loc, arith::MulFOp::create(nb, L.loc, u, L.f32(nb, s)));
}

struct GeluLowering : LoomPattern<GeluOp> {
  using LoomPattern::LoomPattern;
  SmallVector<Value> lower(GeluOp op, OpAdaptor adaptor,
                           Lowering &L) const override {
    return {L.elementwise(adaptor.getInput(), [&](OpBuilder &nb, Location l,
                                                  ValueRange a) {
      Value t = geluInner(nb, L, a[0]);
      Value half = arith::MulFOp::create(nb, l, a[0], L.f32(nb, 0.5));
      linalg::YieldOp::create(
          nb, l,
          arith::MulFOp::create(nb, l, half,
                                arith::AddFOp::create(nb, l, t, L.f32(nb, 1.0)))
              .getResult());
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
          Value x = a[1];
          Value t = geluInner(nb, L, x);
          // d/dx 0.5 x (1 + tanh u) = 0.5 (1 + t) + 0.5 x (1 - t^2) u'.
          Value one = L.f32(nb, 1.0), half = L.f32(nb, 0.5);
          Value x2 = arith::MulFOp::create(nb, l, x, x);
          Value du = arith::MulFOp::create(
              nb, l, L.f32(nb, std::sqrt(2.0 / M_PI)),
              arith::AddFOp::create(
                  nb, l, one,
                  arith::MulFOp::create(nb, l, x2, L.f32(nb, 3 * kGeluC))));
          Value sech2 = arith::SubFOp::create(
              nb, l, one, arith::MulFOp::create(nb, l, t, t));
          Value left = arith::MulFOp::create(
              nb, l, half, arith::AddFOp::create(nb, l, one, t));
          Value right = arith::MulFOp::create(
              nb, l, arith::MulFOp::create(nb, l, half, x),
              arith::MulFOp::create(nb, l, sech2, du));
          Value local = arith::AddFOp::create(nb, l, left, right);
          linalg::YieldOp::create(
              nb, l, arith::MulFOp::create(nb, l, local, a[0]).getResult());
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
  /// of a new one each iteration (the constant itself is copied first).
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
