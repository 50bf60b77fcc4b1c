//===- ApproximateMath.cpp - The loom-approximate-math pass ---------------===//
//
// Elementwise loops around exp, tanh and log run at scalar speed as long as
// those are libm calls; upstream MLIR's polynomial approximations are plain
// arithmetic, which LLVM's loop vectorizer handles. On a GPU, a correctly
// rounded f32 division or square root is a subroutine; kernels may take
// the hardware's approximate ones instead.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
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
        kernels.walk([](Operation *op) {
          if (isa<arith::DivFOp, math::SqrtOp>(op) &&
              op->getResult(0).getType().isF32())
            addApproximateFunctions(cast<arith::ArithFastMathInterface>(op));
        });
      });
  }

  /// Adds `afn` to `op`'s fast-math flags.
  static void addApproximateFunctions(arith::ArithFastMathInterface op) {
    op->setAttr(op.getFastMathAttrName(),
                arith::FastMathFlagsAttr::get(
                    op->getContext(), op.getFastMathFlagsAttr().getValue() |
                                          arith::FastMathFlags::afn));
  }
};
} // namespace
