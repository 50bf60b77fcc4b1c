//===- ApproximateMath.cpp - The loom-approximate-math pass ---------------===//
//
// Elementwise loops around exp, tanh and log run at scalar speed as long as
// those are libm calls; upstream MLIR's polynomial approximations are plain
// arithmetic, which LLVM's loop vectorizer handles. On a GPU, a correctly
// rounded f32 division is a subroutine; kernels may take the hardware's
// approximate one instead.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMAPPROXIMATEMATH
#include "loom/Conversion/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
struct ApproximateMathPass
    : public loom::impl::LoomApproximateMathBase<ApproximateMathPass> {
  using LoomApproximateMathBase::LoomApproximateMathBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    if (gpuFastDivision)
      getOperation()->walk([](gpu::GPUModuleOp kernels) {
        kernels.walk([](arith::DivFOp op) {
          if (op.getType().isF32())
            op.setFastmath(op.getFastmath() | arith::FastMathFlags::afn);
        });
      });
  }
};
} // namespace
