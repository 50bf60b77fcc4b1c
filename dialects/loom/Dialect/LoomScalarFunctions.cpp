//===- LoomScalarFunctions.cpp - Scalar functions of loop bodies ----------===//
//
// The arithmetic of GPT-2's GELU and of its gradient, which
// loom-expand-scalar-functions builds in place of loom.scalar.gelu and
// loom.scalar.gelu_grad once the passes that recognize them have run.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>

using namespace mlir;
using namespace mlir::loom;

namespace {
constexpr double kGeluC = 0.044715;

Value constant(OpBuilder &b, Location loc, double v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}

/// tanh(sqrt(2 / pi) (x + 0.044715 x^3)).
Value geluTanh(OpBuilder &b, Location loc, Value x) {
  Value x3 =
      arith::MulFOp::create(b, loc, x, arith::MulFOp::create(b, loc, x, x));
  Value u = arith::AddFOp::create(
      b, loc, x, arith::MulFOp::create(b, loc, x3, constant(b, loc, kGeluC)));
  return math::TanhOp::create(
      b, loc,
      arith::MulFOp::create(b, loc, u,
                            constant(b, loc, std::sqrt(2.0 / M_PI))));
}
} // namespace

/// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
Value ScalarGeluOp::expand(OpBuilder &b) {
  Location loc = getLoc();
  Value x = getInput();
  Value t = geluTanh(b, loc, x);
  Value half = arith::MulFOp::create(b, loc, x, constant(b, loc, 0.5));
  return arith::MulFOp::create(
      b, loc, half, arith::AddFOp::create(b, loc, t, constant(b, loc, 1.0)));
}

std::optional<GemmEpilogue> ScalarGeluOp::getGemmEpilogue() {
  return GemmEpilogue{GemmEpilogueKind::Gelu, /*product=*/0};
}

Value ScalarGeluGradOp::expand(OpBuilder &b) {
  Location loc = getLoc();
  Value x = getInput();
  Value t = geluTanh(b, loc, x);
  // d/dx 0.5 x (1 + tanh u) = 0.5 (1 + t) + 0.5 x (1 - t^2) u'.
  Value one = constant(b, loc, 1.0), half = constant(b, loc, 0.5);
  Value x2 = arith::MulFOp::create(b, loc, x, x);
  Value du = arith::MulFOp::create(
      b, loc, constant(b, loc, std::sqrt(2.0 / M_PI)),
      arith::AddFOp::create(
          b, loc, one,
          arith::MulFOp::create(b, loc, x2, constant(b, loc, 3 * kGeluC))));
  Value sech2 =
      arith::SubFOp::create(b, loc, one, arith::MulFOp::create(b, loc, t, t));
  Value left = arith::MulFOp::create(b, loc, half,
                                     arith::AddFOp::create(b, loc, one, t));
  Value right =
      arith::MulFOp::create(b, loc, arith::MulFOp::create(b, loc, half, x),
                            arith::MulFOp::create(b, loc, sech2, du));
  Value local = arith::AddFOp::create(b, loc, left, right);
  return arith::MulFOp::create(b, loc, local, getGrad());
}

/// The product is the incoming gradient; the pre-activation is read as
/// the epilogue's auxiliary matrix.
std::optional<GemmEpilogue> ScalarGeluGradOp::getGemmEpilogue() {
  return GemmEpilogue{GemmEpilogueKind::GeluGrad,
                      getGradMutable().getOperandNumber()};
}
