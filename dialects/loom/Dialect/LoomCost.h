//===- LoomCost.h - FLOPs, bytes and collectives of loom ops ----*- C++ -*-===//
//
// The per-op figures of Loom's analytical cost model, in the form of the
// transformer performance model of seeds/003 (see docs/cost-model.md): for
// each op, the forward and backward FLOPs, the bytes each pass reads and
// writes, the activations kept for the backward pass, the weights, and the
// tensor-parallel collectives on its critical path. Ops report rows through
// CostOpInterface; the planner turns rows into time and memory.
//
// Units are plain counts: FLOPs and bytes. Matrix-product FLOPs count a
// multiply-add as two FLOPs minus one add per dot product, as the seed model
// does, so that its printed tables are reproduced exactly.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOMCOST_H
#define LOOM_DIALECT_LOOMCOST_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace mlir {
namespace loom {

enum class CollectiveKind { none, allReduce, reduceScatter, allGather };

llvm::StringRef getCollectiveName(CollectiveKind kind);

/// What one op (or one part of an op, such as the score product of an
/// attention) costs for one micro-batch on one rank.
struct CostRow {
  std::string name;
  /// Matrix products run on tensor cores; everything else on vector units.
  bool tensorCore = false;
  double flopsFwd = 0, flopsBwd = 0;
  /// Bytes of the inputs, of a second input (a mask, the keys, the values)
  /// and of the output of the forward pass.
  double activationIn = 0, activationInOther = 0, activationOut = 0;
  /// Bytes the forward pass keeps for the backward pass.
  double activationBuffer = 0;
  /// Part of `activationBuffer`: the per-row softmax statistics a fused
  /// attention keeps so that its backward pass can rebuild the scores.
  double statisticsBuffer = 0;
  /// Kept besides `activationBuffer`, which the seed model prices without
  /// them: a layer norm's row statistics (its mean and reciprocal
  /// deviation, f32), which its backward pass reads back.
  double rowStatistics = 0;
  double weights = 0;
  double memFwd = 0; ///< Bytes the forward pass moves to and from HBM.
  double activationGrad = 0, weightsGrad = 0;
  /// Bytes of the fp32 copy of the input that PyTorch trainers make in
  /// mixed precision (the loss's logits, cast with `.float()`); it exists
  /// with the input while the op runs.
  double fp32InputCopy = 0;
  double memBwd = 0; ///< Bytes the backward pass moves.
  /// Tensor-parallel collectives: their kind and the bytes of the whole
  /// (unsharded) buffer they operate on.
  CollectiveKind commFwdKind = CollectiveKind::none;
  double commFwd = 0;
  CollectiveKind commBwdKind = CollectiveKind::none;
  double commBwd = 0;
  /// The smallest dimension of a matrix product (its inner or output
  /// width): narrow products run further below the tensor-core peak.
  double matrixWidth = 0;
  /// Part of the attention core (scores, softmax, weighted sum): the
  /// activations selective recomputation drops and recomputes.
  bool attentionCore = false;
  /// The backward pass writes the input's gradient over the kept input,
  /// which it reads last (Loom's loss over its logits): the gradient takes
  /// no memory of its own, and the op before reads it there.
  bool gradientOverInput = false;
  /// For the attention core: what selective recomputation keeps instead of
  /// `activationBuffer` (the core's input, to recompute from).
  double selectiveBuffer = 0;
};

/// How an op is executed when it is priced.
struct CostContext {
  /// Sequences per micro-batch; replaces the leading (batch) dimension of
  /// the op's activations.
  int64_t batch = 1;
  int64_t tensorParallel = 1;
  /// Layer norms, residuals and elementwise ops sharded along the sequence
  /// (Megatron sequence parallelism); needs tensorParallel > 1.
  bool sequenceParallel = false;
  /// Bytes of an activation or weight element in the compute precision.
  double elementBytes = 2;
  /// Attention as one fused kernel (FlashAttention): the score matrix never
  /// reaches memory and is recomputed in the backward pass.
  bool fusedAttention = true;
  /// The loss keeps its logits, in the step's precision, and its backward
  /// pass recomputes the softmax from them and writes their gradient over
  /// them (Loom's step), rather than keeping the fp32 probabilities
  /// (PyTorch's log-softmax) and making the gradient beside them.
  bool lossKeepsLogits = false;
};

//===----------------------------------------------------------------------===//
// Building blocks, one per layer type of the seed model. `b` sequences of
// `l` tokens; sizes in elements, `elementBytes` per element.
//===----------------------------------------------------------------------===//

/// y = x W^T (+ bias): x [b, l, in], y [b, l, out].
CostRow linearCost(double b, double l, double in, double out, bool bias,
                   double elementBytes);
/// Attention scores Q K^T for `h` heads of `q` channels.
CostRow attentionLogitsCost(double b, double l, double q, double h,
                            double elementBytes);
/// Softmax over the last dimension of [b, h, l, l] scores.
CostRow softmaxCost(double b, double l, double h, double elementBytes);
/// Scores times values.
CostRow attentionAttendCost(double b, double l, double q, double h,
                            double elementBytes);
/// Dropout on [b, l, n] with a mask of `maskBytes` per element.
CostRow dropoutCost(double b, double l, double n, double elementBytes,
                    double maskBytes);
/// Layer norm over the last dimension of [b, l, e] (weight and bias).
CostRow layerNormCost(double b, double l, double e, double elementBytes);
CostRow rmsNormCost(double b, double l, double e, double elementBytes);
/// An elementwise activation (one FLOP per element each way).
CostRow activationCost(double b, double l, double n, double elementBytes);
/// The attention core as one fused kernel: scores, causal softmax and the
/// weighted sum never leave the chip; the backward pass recomputes the
/// scores. Keeps Q, K, V, the output and the per-row softmax statistics.
/// `kvHeads` key/value heads (grouped-query attention; default: `h`) are
/// read, kept and differentiated once for their groups' query heads.
CostRow fusedAttentionCost(double b, double l, double q, double h,
                           double elementBytes, double kvHeads = 0);

} // namespace loom
} // namespace mlir

#endif // LOOM_DIALECT_LOOMCOST_H
