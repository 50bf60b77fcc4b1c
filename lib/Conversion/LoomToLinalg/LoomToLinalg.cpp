//===- LoomToLinalg.cpp - The loom-lower-to-linalg pass -------------------===//
//
// Rewrites every loom op into upstream ops on tensors: linalg.matmul for the
// matrix products (later calls into BLAS), linalg.generic for everything
// else, tensor reshapes and slices for the views between them, scf.for for
// layer loops and the embedding table's scatter-add. Bufferization and the
// lowering to loops and LLVM are upstream from here on.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "loom/Conversion/Passes.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMLOWERTOLINALG
#include "loom/Conversion/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

void mlir::loom::populateLoomToLinalgPatterns(
    RewritePatternSet &patterns, TokenGradientOptions tokenGradient,
    bool runtimeSoftmaxStats) {
  populateLoomEmbeddingToLinalgPatterns(patterns, tokenGradient);
  populateLoomLayerNormToLinalgPatterns(patterns);
  populateLoomLinearToLinalgPatterns(patterns);
  populateLoomAttentionToLinalgPatterns(patterns);
  populateLoomElementwiseToLinalgPatterns(patterns);
  populateLoomLossToLinalgPatterns(patterns, runtimeSoftmaxStats);
  populateLoomOptimizerToLinalgPatterns(patterns);
  populateLoomScanToSCFPatterns(patterns);
  populateLoomPrecisionToLinalgPatterns(patterns);
  populateLoomTraceToCallPatterns(patterns);
}

void mlir::loom::configureLoomToLinalgTarget(ConversionTarget &target) {
  // A loop's scalar functions stay ops until the passes on loops have seen
  // them (loom-expand-scalar-functions); the rest of the dialect goes.
  target.addDynamicallyLegalDialect<LoomDialect>(
      [](Operation *op) { return isa<ScalarFunctionOpInterface>(op); });
  // Point-to-point messages stay ops on tensors until bufferization makes
  // them calls of the runtime on their buffers, as the collectives.
  target.addLegalOp<SendOp, RecvOp>();
  // The sorted token gradient and the loss's statistics are the runtime's,
  // like fused attention.
  target.addLegalOp<ScatterAddRowsOp, SoftmaxStatsOp, TransferOp>();
  target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect,
                         math::MathDialect, scf::SCFDialect,
                         tensor::TensorDialect>();
}

/// Each tensor of one repeated value (the zeros gradient sums start from,
/// a pipeline stage's share of a loss only the last stage has) becomes a
/// fill of a fresh tensor. Bufferized, a constant is a global of the
/// artifact, copied into a buffer before anything writes it: memory of
/// the host, which a GPU's kernels cannot read. A fill writes the step's
/// own buffer, on either target in one pass instead of a copy's read and
/// write, and leaves the artifact without the constant's bytes.
///
/// Only tensors of scalars a fill can write: integers, floats or indices,
/// at least one of them, without an encoding that tensor.empty would drop.
static void fillSplatConstants(ModuleOp module) {
  SmallVector<arith::ConstantOp> splats;
  module.walk([&](arith::ConstantOp op) {
    auto type = dyn_cast<RankedTensorType>(op.getType());
    if (type && !type.getEncoding() && type.getNumElements() > 0 &&
        type.getElementType().isIntOrIndexOrFloat() &&
        isa<SplatElementsAttr>(op.getValue()))
      splats.push_back(op);
  });
  for (arith::ConstantOp op : splats) {
    OpBuilder b(op);
    auto type = cast<RankedTensorType>(op.getType());
    Value value = arith::ConstantOp::create(
        b, op.getLoc(),
        cast<SplatElementsAttr>(op.getValue()).getSplatValue<TypedAttr>());
    Value empty = tensor::EmptyOp::create(b, op.getLoc(), type.getShape(),
                                          type.getElementType());
    op.replaceAllUsesWith(
        linalg::FillOp::create(b, op.getLoc(), value, empty).getResult(0));
    op.erase();
  }
}

/// Marks the fused attention gradients stored in bf16 or f16 query_sums:
/// the GPU's tensor-core kernels sum their query gradient in f32 scratch.
static void markQuerySums(ModuleOp module) {
  module.walk([](CausalAttentionGradOp op) {
    Type element =
        cast<RankedTensorType>(op.getQkv().getType()).getElementType();
    if (element.isBF16() || element.isF16())
      op.setQuerySums(true);
  });
}

namespace {
struct LowerToLinalgPass
    : public loom::impl::LoomLowerToLinalgBase<LowerToLinalgPass> {
  using LoomLowerToLinalgBase::LoomLowerToLinalgBase;

  void runOnOperation() override {
    auto fused = [&](Operation *op) {
      return fusedAttention && isFusedAttention(op, fusedAttentionMaxHeadDim,
                                                groupedFusedAttention);
    };
    if (embeddingRowBlocks < 1) {
      getOperation()->emitError()
          << "loom-lower-to-linalg: embedding-row-blocks must be at least 1, "
             "got "
          << static_cast<int64_t>(embeddingRowBlocks);
      return signalPassFailure();
    }
    // Grouped-query attention that no fused kernel computes as it is: each
    // group's key and value repeated for its query heads first.
    expandGroupedAttention(getOperation(), fused);
    // The generated loops compute in f32: the layers' ops on bf16 or f16
    // storage read it converted. Fused attention reads its storage type.
    if (failed(widenMixedPrecisionOps(getOperation(), fused)))
      return signalPassFailure();

    ConversionTarget target(getContext());
    configureLoomToLinalgTarget(target);
    target.addDynamicallyLegalOp<CausalAttentionOp, CausalAttentionGradOp>(
        fused);
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populateLoomToLinalgPatterns(
        patterns,
        TokenGradientOptions{sortedTokenGradient,
                             static_cast<int64_t>(embeddingRowBlocks)},
        runtimeSoftmaxStats);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
    if (attentionQuerySums)
      markQuerySums(getOperation());
    fillSplatConstants(getOperation());
  }
};
} // namespace
