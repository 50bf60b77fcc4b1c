//===- LoomOpCosts.cpp - CostOpInterface of the forward ops ---------------===//
//
// Each forward op prices itself with the building blocks of LoomCost.h. The
// leading dimension of every activation is the batch, which the context
// replaces by the micro-batch size; tensor parallelism divides heads, the MLP
// hidden width and the vocabulary, and sequence parallelism divides the
// sequence of layer norms and residual adds (docs/cost-model.md).
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
/// Sequence length and trailing width of a [B, T, ...] activation.
struct ActivationShape {
  double sequence;
  double width;
};

ActivationShape getActivationShape(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return {static_cast<double>(type.getDimSize(1)),
          static_cast<double>(type.getShape().back())};
}

double getSequenceShard(const CostContext &context) {
  return context.sequenceParallel ? context.tensorParallel : 1;
}

/// Whether `value`'s last dimension is divided among tensor-parallel ranks:
/// the output of a column-split linear, and elementwise functions of it.
bool isFeatureSharded(Value value) {
  Operation *def = value.getDefiningOp();
  if (!def)
    return false;
  if (auto linear = dyn_cast<LinearOp>(def))
    return linear.getSplit() == TensorSplit::column;
  if (isa<GroupQkvOp>(def))
    return true;
  if (isa<GeluOp, SwigluOp, RotaryOp>(def))
    return isFeatureSharded(def->getOperand(0));
  return false;
}

/// The width of one rank's part of `op`'s fused queries, keys and values,
/// `width` wide whole: as the op asks tensor parallelism to lay them out
/// (its share of every head's, or its query heads and the key and value
/// its team shares).
template <typename Op>
double getLocalQkvWidth(Op op, double width, int64_t tensorParallel) {
  int64_t part =
      op.getTensorParallelSplit(0, 2, tensorParallel)
          .getPartExtent(static_cast<int64_t>(width), tensorParallel);
  return part > 0 ? part : width / tensorParallel;
}
} // namespace

void EmbeddingOp::estimateCost(const CostContext &context,
                               SmallVectorImpl<CostRow> &rows) {
  auto [sequence, width] = getActivationShape(getResult());
  double b = context.batch, s = context.elementBytes;
  double tokens = b * sequence;
  double vocab = getWte().getType().getDimSize(0) / context.tensorParallel;
  double positions = getWpe() ? getWpe().getType().getDimSize(0) : 0;
  CostRow row;
  row.name = "embedding";
  // A row gather and the position add; the backward pass scatter-adds.
  row.flopsFwd = row.flopsBwd = tokens * width;
  row.activationIn = tokens * 4; // i32 token ids
  row.activationOut = tokens * width * s;
  row.activationBuffer = row.activationIn;
  row.weights = (vocab + positions) * width * s;
  row.memFwd = row.activationIn + (getWpe() ? 2 : 1) * row.activationOut +
               (getWpe() ? sequence * width * s : 0);
  row.activationGrad = row.activationOut;
  row.weightsGrad = row.weights;
  row.memBwd = row.activationBuffer + row.activationGrad + row.weightsGrad;
  // A vocabulary split leaves each rank with part of each row: the partial
  // embeddings are summed (or reduce-scattered along the sequence).
  if (context.tensorParallel > 1) {
    row.commFwdKind = context.sequenceParallel ? CollectiveKind::reduceScatter
                                               : CollectiveKind::allReduce;
    row.commFwd = row.activationOut;
  }
  rows.push_back(row);
}

void LayerNormOp::estimateCost(const CostContext &context,
                               SmallVectorImpl<CostRow> &rows) {
  auto [sequence, width] = getActivationShape(getResult());
  double normalized = context.batch * sequence / getSequenceShard(context);
  CostRow row =
      layerNormCost(context.batch, sequence / getSequenceShard(context), width,
                    context.elementBytes);
  row.rowStatistics = normalized * 2 * 4;
  row.name = "layer_norm";
  rows.push_back(row);
}

void RmsNormOp::estimateCost(const CostContext &context,
                             SmallVectorImpl<CostRow> &rows) {
  auto [sequence, width] = getActivationShape(getResult());
  CostRow row = rmsNormCost(context.batch, sequence / getSequenceShard(context),
                            width, context.elementBytes);
  row.name = "rms_norm";
  rows.push_back(row);
}

void GroupQkvOp::estimateCost(const CostContext &context,
                              SmallVectorImpl<CostRow> &rows) {
  auto [sequence, width] = getActivationShape(getResult());
  // Each rank's query heads, with their keys and values (whole groups, or
  // its team's group): a tp-th of every head's.
  width /= context.tensorParallel;
  // A copy of every head's queries, keys and values; the gradient sums
  // each group's keys and values. Linear: nothing is kept for it.
  CostRow row =
      activationCost(context.batch, sequence, width, context.elementBytes);
  row.name = "group_qkv";
  row.activationBuffer = 0;
  row.memBwd = row.activationGrad;
  rows.push_back(row);
}

void RotaryOp::estimateCost(const CostContext &context,
                            SmallVectorImpl<CostRow> &rows) {
  auto [sequence, width] = getActivationShape(getResult());
  // The queries and keys turn; the values pass.
  double headWidth = width / getQkvRowHeads(getNumHeads(), getKvHeads());
  double valueHeads = getKvHeads().value_or(getNumHeads());
  if (isFeatureSharded(getQkv())) {
    int64_t tp = context.tensorParallel;
    width = getLocalQkvWidth(*this, width, tp);
    valueHeads =
        getKvHeads() ? getLocalKvHeads(*getKvHeads(), tp) : valueHeads / tp;
  }
  CostRow row =
      activationCost(context.batch, sequence, width - headWidth * valueHeads,
                     context.elementBytes);
  row.name = "rotary";
  // An angle's sine and cosine and the rotation: about 6 FLOPs an element.
  row.flopsFwd = row.flopsBwd = 6 * row.flopsFwd;
  // Linear in its input: the gradient keeps nothing of the forward pass.
  row.activationBuffer = 0;
  row.memBwd = row.activationGrad;
  rows.push_back(row);
}

void LinearOp::estimateCost(const CostContext &context,
                            SmallVectorImpl<CostRow> &rows) {
  auto weightType = getWeight().getType();
  double out = weightType.getDimSize(0), in = weightType.getDimSize(1);
  double sequence = getActivationShape(getResult()).sequence;
  double tp = context.tensorParallel;
  std::optional<TensorSplit> split = tp > 1 ? getSplit() : std::nullopt;
  double shardedIn = split == TensorSplit::row ? in / tp : in;
  double shardedOut = out;
  // A column split's part is laid out as its users ask: teams of ranks
  // that share a key/value head each hold it whole.
  TensorLayout layout = TensorLayout::split(0);
  if (split == TensorSplit::column) {
    layout = getSplitWantedByUsers(getResult(), 0, context.tensorParallel);
    int64_t part = layout.getPartExtent(out, context.tensorParallel);
    shardedOut = part > 0 ? part : out / tp;
  }
  CostRow row = linearCost(context.batch, sequence, shardedIn, shardedOut,
                           static_cast<bool>(getBias()), context.elementBytes);
  row.name = "linear";
  // Projections of one input (SwiGLU's gate and up) keep it once: the
  // first of them in the block counts it.
  Operation *self = getOperation();
  if (llvm::any_of(getInput().getUsers(), [&](Operation *user) {
        return isa<LinearOp>(user) && user != self &&
               user->getBlock() == self->getBlock() &&
               user->isBeforeInBlock(self);
      }))
    row.activationBuffer = 0;
  double s = context.elementBytes, tokens = context.batch * sequence;
  if (layout.shared) {
    // loom.fan_out_shared's VJP: the shared rows' gradient, in one slot per
    // team, all-reduced over the group.
    CostRow team;
    team.name = "team sum";
    team.commBwdKind = CollectiveKind::allReduce;
    team.commBwd =
        layout.blocks * layout.shared * (in + (getBias() ? 1 : 0)) * s;
    rows.push_back(team);
  }
  bool sp = context.sequenceParallel;
  // Megatron's conjugate collectives: a column split gathers its input
  // along the sequence (sequence parallel) and sums its input gradient; a
  // row split sums its output and gathers its output gradient.
  if (split == TensorSplit::column) {
    if (sp) {
      row.commFwdKind = CollectiveKind::allGather;
      row.commFwd = tokens * in * s;
    }
    row.commBwdKind =
        sp ? CollectiveKind::reduceScatter : CollectiveKind::allReduce;
    row.commBwd = tokens * in * s;
  } else if (split == TensorSplit::row) {
    row.commFwdKind =
        sp ? CollectiveKind::reduceScatter : CollectiveKind::allReduce;
    row.commFwd = tokens * out * s;
    if (sp) {
      row.commBwdKind = CollectiveKind::allGather;
      row.commBwd = tokens * out * s;
    }
  }
  rows.push_back(row);
}

void CausalAttentionOp::estimateCost(const CostContext &context,
                                     SmallVectorImpl<CostRow> &rows) {
  auto [sequence, width] = getActivationShape(getResult());
  double heads = getNumHeads();
  double headWidth = width / heads;
  double localHeads = heads / context.tensorParallel;
  double b = context.batch, s = context.elementBytes;
  // Selective recomputation keeps this rank's share of the QKV input, which
  // the projection producing it does not keep itself.
  std::optional<int64_t> kvHeads = getKvHeads();
  double qkv = getLocalQkvWidth(*this, getQkv().getType().getDimSize(2),
                                context.tensorParallel) *
               b * sequence * s;
  if (context.fusedAttention) {
    double localKvHeads =
        kvHeads ? getLocalKvHeads(*kvHeads, context.tensorParallel)
                : localHeads;
    CostRow row =
        fusedAttentionCost(b, sequence, headWidth, localHeads, s, localKvHeads);
    row.name = "attention";
    row.selectiveBuffer = qkv;
    rows.push_back(row);
    return;
  }
  CostRow logits = attentionLogitsCost(b, sequence, headWidth, localHeads, s);
  logits.name = "logits";
  CostRow softmax = softmaxCost(b, sequence, localHeads, s);
  softmax.name = "softmax";
  CostRow attend = attentionAttendCost(b, sequence, headWidth, localHeads, s);
  attend.name = "attend";
  logits.selectiveBuffer = qkv;
  rows.append({logits, softmax, attend});
}

void GeluOp::estimateCost(const CostContext &context,
                          SmallVectorImpl<CostRow> &rows) {
  auto [sequence, width] = getActivationShape(getResult());
  if (isFeatureSharded(getInput()))
    width /= context.tensorParallel;
  CostRow row =
      activationCost(context.batch, sequence, width, context.elementBytes);
  row.name = "gelu";
  rows.push_back(row);
}

void SwigluOp::estimateCost(const CostContext &context,
                            SmallVectorImpl<CostRow> &rows) {
  auto [sequence, width] = getActivationShape(getResult());
  if (isFeatureSharded(getGate()))
    width /= context.tensorParallel;
  CostRow row =
      activationCost(context.batch, sequence, width, context.elementBytes);
  row.name = "swiglu";
  // The sigmoid, the SiLU and the product: about 5 FLOPs an element, twice
  // that for the two gradients; both inputs are read and kept.
  row.flopsFwd *= 5;
  row.flopsBwd *= 10;
  row.activationInOther = row.activationIn;
  row.activationBuffer = 2 * row.activationIn;
  row.memFwd += row.activationInOther;
  row.activationGrad *= 2;
  row.memBwd = row.activationBuffer + row.activationGrad;
  rows.push_back(row);
}

void AddOp::estimateCost(const CostContext &context,
                         SmallVectorImpl<CostRow> &rows) {
  auto [sequence, width] = getActivationShape(getResult());
  double elements =
      context.batch * sequence / getSequenceShard(context) * width;
  double bytes = elements * context.elementBytes;
  CostRow row;
  row.name = "residual";
  row.flopsFwd = elements;
  row.activationIn = row.activationInOther = row.activationOut = bytes;
  row.memFwd = 3 * bytes;
  // The gradient passes through to both operands unchanged.
  row.activationGrad = bytes;
  row.memBwd = bytes;
  rows.push_back(row);
}

void CrossEntropyOp::estimateCost(const CostContext &context,
                                  SmallVectorImpl<CostRow> &rows) {
  auto [sequence, vocab] = getActivationShape(getLogits());
  vocab /= context.tensorParallel;
  double positions = context.batch * sequence;
  double logits = positions * vocab * context.elementBytes;
  double probabilities = positions * vocab * 4;
  CostRow row;
  row.name = "cross_entropy";
  // Max, exponentials, sum, division, log of the target's probability.
  row.flopsFwd = positions * (4 * vocab);
  row.flopsBwd = positions * vocab;
  row.activationIn = logits;
  row.activationInOther = positions * 4; // targets
  row.activationOut = probabilities;
  row.activationBuffer = (context.lossKeepsLogits ? logits : probabilities) +
                         row.activationInOther;
  row.memFwd = logits + row.activationInOther + probabilities;
  row.activationGrad = logits;
  row.gradientOverInput = context.lossKeepsLogits;
  // The traffic stays priced as a trainer's that writes and rereads the
  // fp32 probabilities, whichever is kept: the framework's fitted
  // efficiencies (docs/cost-model.md) were fitted with it.
  row.memBwd = probabilities + row.activationInOther + row.activationGrad;
  if (context.elementBytes < 4)
    row.fp32InputCopy = positions * vocab * 4;
  // A vocabulary split reduces each position's max and sum across ranks.
  if (context.tensorParallel > 1) {
    row.commFwdKind = CollectiveKind::allReduce;
    row.commFwd = 2 * positions * 4;
  }
  rows.push_back(row);
}
