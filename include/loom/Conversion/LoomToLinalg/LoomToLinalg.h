//===- LoomToLinalg.h - Lowering loom ops to linalg, by family --*- C++ -*-===//
//
// Patterns that rewrite loom ops on f32 tensors (and conversions from and to
// bf16 and f16) into linalg, tensor, arith, math and scf ops on tensors, one
// populate function per op family, so that another lowering (GPU kernels,
// precision variants) can take some families and replace others. All of them
// together are the `loom-lower-to-linalg` pass.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CONVERSION_LOOMTOLINALG_LOOMTOLINALG_H
#define LOOM_CONVERSION_LOOMTOLINALG_LOOMTOLINALG_H

#include "mlir/IR/PatternMatch.h"

namespace mlir {
class ConversionTarget;

namespace loom {

/// How loom.embedding_grad's token table gradient is lowered (see
/// loom-lower-to-linalg).
struct TokenGradientOptions {
  /// A loom.scatter_add_rows, which the runtime computes; else loops.
  bool sorted = true;
  /// The loops' blocks of rows, at most.
  int64_t rowBlocks = 1;
};

/// loom.embedding and loom.embedding_grad.
void populateLoomEmbeddingToLinalgPatterns(
    RewritePatternSet &patterns, TokenGradientOptions tokenGradient = {});
/// loom.layer_norm and loom.layer_norm_grad.
void populateLoomLayerNormToLinalgPatterns(RewritePatternSet &patterns);
/// loom.linear and loom.linear_grad, as linalg.matmul.
void populateLoomLinearToLinalgPatterns(RewritePatternSet &patterns);
/// loom.causal_attention and loom.causal_attention_grad.
void populateLoomAttentionToLinalgPatterns(RewritePatternSet &patterns);
/// loom.gelu, loom.gelu_grad and loom.add.
void populateLoomElementwiseToLinalgPatterns(RewritePatternSet &patterns);
/// loom.cross_entropy and loom.cross_entropy_grad; with
/// `runtimeSoftmaxStats`, their softmax statistics over whole rows (not a
/// vocabulary's parts) as a loom.softmax_stats, which the runtime computes.
void populateLoomLossToLinalgPatterns(RewritePatternSet &patterns,
                                      bool runtimeSoftmaxStats = false);
/// loom.adamw, loom.sgd and loom.sum_squares.
void populateLoomOptimizerToLinalgPatterns(RewritePatternSet &patterns);
/// loom.scan, as an scf.for over tensor slices.
void populateLoomScanToSCFPatterns(RewritePatternSet &patterns);
/// loom.convert, and loom.seed as the constant 1.
void populateLoomPrecisionToLinalgPatterns(RewritePatternSet &patterns);
/// The timeline's spans as calls of the runtime.
void populateLoomTraceToCallPatterns(RewritePatternSet &patterns);

/// Rewrites each op with the MixedPrecision trait that has bf16 or f16
/// tensors into the same op on f32 tensors between loom.convert ops, which
/// the patterns above lower: they compute in f32. Ops `keep` accepts stay
/// as they are. Fails, with an error on the op, where another loom op (an
/// optimizer update, a sum of squares) has narrow tensors.
LogicalResult
widenMixedPrecisionOps(Operation *root,
                       llvm::function_ref<bool(Operation *)> keep = nullptr);

/// Whether `op` is loom.causal_attention or loom.causal_attention_grad in
/// the form the runtime's fused attention computes: every tensor of one
/// element type the runtime stores (f32, bf16, f16), heads of at most
/// `maxHeadDim` channels (0: any size), and grouped key/value heads only
/// where the kernels read them (`groupedHeads`).
bool isFusedAttention(Operation *op, int64_t maxHeadDim,
                      bool groupedHeads = true);

/// Rewrites each grouped-query attention (`kv_heads`) under `root` that
/// `keep` rejects into loom.group_qkv and the attention of every head, and
/// its gradient into that attention's gradient and loom.group_qkv_grad:
/// the form of kernels and loops without grouped heads.
void expandGroupedAttention(Operation *root,
                            llvm::function_ref<bool(Operation *)> keep);

/// Every family above.
void populateLoomToLinalgPatterns(RewritePatternSet &patterns,
                                  TokenGradientOptions tokenGradient = {},
                                  bool runtimeSoftmaxStats = false);

/// The loom dialect illegal; what the patterns produce legal.
void configureLoomToLinalgTarget(ConversionTarget &target);

} // namespace loom
} // namespace mlir

#endif // LOOM_CONVERSION_LOOMTOLINALG_LOOMTOLINALG_H
