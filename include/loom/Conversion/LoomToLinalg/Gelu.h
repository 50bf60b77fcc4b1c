//===- Gelu.h - GPT-2's GELU on scalars -------------------------*- C++ -*-===//
//
// The arithmetic of the GELU and of its gradient, built by the lowering of
// loom.gelu and loom.gelu_grad and recognized by loom-gemm-epilogues, which
// moves it into a GEMM's epilogue: one definition for both, so that what is
// recognized is what the lowering builds.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CONVERSION_LOOMTOLINALG_GELU_H
#define LOOM_CONVERSION_LOOMTOLINALG_GELU_H

#include "mlir/IR/Builders.h"

namespace mlir {
namespace loom {
/// GPT-2's GELU of an f32 value, its tanh approximation:
/// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
Value buildGelu(OpBuilder &b, Location loc, Value x);

/// `grad` times the derivative of buildGelu at `x` (f32 values).
Value buildGeluGrad(OpBuilder &b, Location loc, Value x, Value grad);
} // namespace loom
} // namespace mlir

#endif // LOOM_CONVERSION_LOOMTOLINALG_GELU_H
