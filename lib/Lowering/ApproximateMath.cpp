//===- ApproximateMath.cpp - The loom-approximate-math pass ---------------===//
//
// Elementwise loops around exp, tanh and log run at scalar speed as long as
// those are libm calls; upstream MLIR's polynomial approximations are plain
// arithmetic, which LLVM's loop vectorizer handles. On a GPU, a correctly
// rounded f32 division is a subroutine; kernels may take the hardware's
// approximate one instead.
//
//===----------------------------------------------------------------------===//

#include "loom/Lowering/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMAPPROXIMATEMATH
#include "loom/Lowering/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The functions upstream MLIR's default set approximates (its
/// populateMathPolynomialApproximationPatterns without a predicate), rsqrt
/// aside, which needs AVX2.
bool isApproximated(StringRef name) {
  return llvm::is_contained(
      {math::AtanOp::getOperationName(), math::Atan2Op::getOperationName(),
       math::TanhOp::getOperationName(), math::LogOp::getOperationName(),
       math::Log2Op::getOperationName(), math::Log1pOp::getOperationName(),
       math::ErfOp::getOperationName(), math::ErfcOp::getOperationName(),
       math::ExpOp::getOperationName(), math::ExpM1Op::getOperationName(),
       math::CbrtOp::getOperationName(), math::SinOp::getOperationName(),
       math::CosOp::getOperationName(), math::AsinOp::getOperationName(),
       math::AcosOp::getOperationName()},
      name);
}

/// The approximations of the functions `approximated` names, each computed
/// in f32 (narrower operands widened): those `approximated` leaves out stay
/// math ops, of f32.
FrozenRewritePatternSet
buildApproximations(MLIRContext *context,
                    function_ref<bool(StringRef)> approximated) {
  RewritePatternSet patterns(context);
  populateMathF32ExpansionPatterns(patterns, isApproximated);
  populateMathPolynomialApproximationPatterns(patterns, approximated);
  return FrozenRewritePatternSet(std::move(patterns));
}

struct ApproximateMathPass
    : public loom::impl::LoomApproximateMathBase<ApproximateMathPass> {
  using LoomApproximateMathBase::LoomApproximateMathBase;

  void runOnOperation() override {
    FrozenRewritePatternSet host =
        buildApproximations(&getContext(), isApproximated);
    // With gpu-libdevice-exp, a kernel's exp stays for the GPU lowering,
    // which calls libdevice's __nv_expf: the hardware's 2^x after a range
    // reduction, where the polynomial takes three times the instructions
    // (the loss's gradient computes one per logit).
    FrozenRewritePatternSet kernels =
        buildApproximations(&getContext(), [&](StringRef name) {
          return isApproximated(name) &&
                 !(gpuLibdeviceExp && name == math::ExpOp::getOperationName());
        });
    // The kernels' modules, and the functions outside them.
    SmallVector<std::pair<Operation *, bool>> roots;
    getOperation()->walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<gpu::GPUModuleOp>(op) || isa<FunctionOpInterface>(op)) {
        roots.push_back({op, isa<gpu::GPUModuleOp>(op)});
        return WalkResult::skip();
      }
      return WalkResult::advance();
    });
    // Run on a function or a kernel alone.
    if (roots.empty())
      roots.push_back(
          {getOperation(),
           getOperation()->getParentOfType<gpu::GPUModuleOp>() != nullptr});
    for (auto [root, isKernels] : roots)
      if (failed(applyPatternsGreedily(root, isKernels ? kernels : host)))
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
