//===- LoomCost.cpp - FLOPs, bytes and collectives of loom ops ------------===//
//
// The formulas of the seed performance model (seeds/003). Its helper modules
// are not in the seed; these formulas are the ones its printed tables pin
// down, column by column (test/unit/CostModelTest.cpp checks every printed
// figure). A dot product of length k costs 2k - 1 FLOPs, a bias add one FLOP
// per output; the backward pass of a matrix product computes the input
// gradient and the weight gradient.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomCost.h"

#include "llvm/Support/ErrorHandling.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::loom;

llvm::StringRef mlir::loom::getCollectiveName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::none:
    return "";
  case CollectiveKind::allReduce:
    return "allreduce";
  case CollectiveKind::reduceScatter:
    return "reducescatter";
  case CollectiveKind::allGather:
    return "allgather";
  }
  llvm_unreachable("unknown collective");
}

CostRow mlir::loom::linearCost(double b, double l, double in, double out,
                               bool bias, double elementBytes) {
  CostRow row;
  row.tensorCore = true;
  row.matrixWidth = std::min(in, out);
  double tokens = b * l, biasTerms = bias ? tokens * out : 0;
  row.flopsFwd = tokens * out * (2 * in - 1) + biasTerms;
  // Input gradient, weight gradient, bias gradient.
  row.flopsBwd =
      tokens * in * (2 * out - 1) + in * out * (2 * tokens - 1) + biasTerms;
  row.activationIn = tokens * in * elementBytes;
  row.activationOut = tokens * out * elementBytes;
  row.activationBuffer = row.activationIn;
  row.weights = (in * out + (bias ? out : 0)) * elementBytes;
  row.memFwd = row.activationIn + row.activationOut + row.weights;
  row.activationGrad = row.activationIn + row.activationOut;
  row.weightsGrad = row.weights;
  row.memBwd =
      row.activationBuffer + row.activationGrad + row.weights + row.weightsGrad;
  return row;
}

CostRow mlir::loom::attentionLogitsCost(double b, double l, double q, double h,
                                        double elementBytes) {
  CostRow row;
  row.tensorCore = true;
  row.attentionCore = true;
  row.flopsFwd = b * h * l * l * (2 * q - 1);
  // Gradients of the queries and of the keys.
  row.flopsBwd = 2 * b * h * l * q * (2 * l - 1);
  row.activationIn = b * l * h * q * elementBytes;
  row.activationInOther = row.activationIn;
  row.activationOut = b * h * l * l * elementBytes;
  row.activationBuffer = row.activationIn + row.activationInOther;
  row.memFwd = row.activationIn + row.activationInOther + row.activationOut;
  row.activationGrad =
      row.activationOut + row.activationIn + row.activationInOther;
  row.memBwd = row.activationBuffer + row.activationGrad;
  return row;
}

CostRow mlir::loom::softmaxCost(double b, double l, double h,
                                double elementBytes) {
  CostRow row;
  row.attentionCore = true;
  // Per row of l scores: l exponentials, l - 1 additions, l divisions; the
  // backward pass adds a dot product and an elementwise product.
  row.flopsFwd = b * h * l * (3 * l - 1);
  row.flopsBwd = b * h * l * (4 * l - 1);
  double scores = b * h * l * l * elementBytes;
  row.activationIn = scores;
  row.activationOut = scores;
  row.activationBuffer = scores;
  row.memFwd = 2 * scores;
  row.activationGrad = 2 * scores;
  row.memBwd = row.activationBuffer + row.activationGrad;
  return row;
}

CostRow mlir::loom::attentionAttendCost(double b, double l, double q, double h,
                                        double elementBytes) {
  CostRow row;
  row.tensorCore = true;
  row.attentionCore = true;
  row.flopsFwd = b * h * l * q * (2 * l - 1);
  // Gradients of the scores and of the values.
  row.flopsBwd = b * h * l * l * (2 * q - 1) + b * h * l * q * (2 * l - 1);
  row.activationIn = b * h * l * l * elementBytes;
  row.activationInOther = b * h * l * q * elementBytes;
  row.activationOut = b * l * h * q * elementBytes;
  row.activationBuffer = row.activationIn + row.activationInOther;
  row.memFwd = row.activationIn + row.activationInOther + row.activationOut;
  row.activationGrad = row.activationIn + row.activationInOther;
  row.memBwd = row.activationBuffer + row.activationGrad;
  return row;
}

CostRow mlir::loom::dropoutCost(double b, double l, double n,
                                double elementBytes, double maskBytes) {
  CostRow row;
  double elements = b * l * n;
  row.flopsFwd = row.flopsBwd = elements;
  row.activationIn = row.activationOut = elements * elementBytes;
  row.activationInOther = elements * maskBytes;
  row.activationBuffer = row.activationInOther;
  row.memFwd = row.activationIn + row.activationInOther + row.activationOut;
  row.activationGrad = elements * elementBytes;
  row.memBwd = row.activationBuffer + row.activationGrad;
  return row;
}

namespace {
/// A normalization over rows of `e` elements with `params` parameter vectors
/// of the row's width, of `flopsFwd` and `flopsBwd` FLOPs an element.
CostRow normalizationCost(double b, double l, double e, double elementBytes,
                          double params, double flopsFwd, double flopsBwd) {
  CostRow row;
  double elements = b * l * e;
  row.flopsFwd = flopsFwd * elements;
  row.flopsBwd = flopsBwd * elements;
  row.activationIn = row.activationOut = elements * elementBytes;
  row.activationBuffer = row.activationIn;
  row.weights = params * e * elementBytes;
  row.memFwd = row.activationIn + row.activationOut + row.weights;
  row.activationGrad = row.activationIn + row.activationOut;
  row.weightsGrad = row.weights;
  row.memBwd = row.activationBuffer + row.activationGrad + row.weightsGrad;
  return row;
}
} // namespace

CostRow mlir::loom::layerNormCost(double b, double l, double e,
                                  double elementBytes) {
  // Mean, variance, normalization and the affine map: 9 FLOPs an element;
  // 13 for the gradients of the input, the weight and the bias.
  return normalizationCost(b, l, e, elementBytes, /*params=*/2, 9, 13);
}

CostRow mlir::loom::rmsNormCost(double b, double l, double e,
                                double elementBytes) {
  // Sum of squares, scaling and the weight: 4 FLOPs an element; 8 for the
  // gradients of the input and the weight.
  CostRow row = normalizationCost(b, l, e, elementBytes, /*params=*/1, 4, 8);
  row.rowStatistics = b * l * 4; // the f32 reciprocal root mean square
  return row;
}

CostRow mlir::loom::activationCost(double b, double l, double n,
                                   double elementBytes) {
  CostRow row;
  double elements = b * l * n;
  row.flopsFwd = row.flopsBwd = elements;
  row.activationIn = row.activationOut = elements * elementBytes;
  row.activationBuffer = row.activationIn;
  row.memFwd = row.activationIn + row.activationOut;
  row.activationGrad = elements * elementBytes;
  row.memBwd = row.activationBuffer + row.activationGrad;
  return row;
}

CostRow mlir::loom::fusedAttentionCost(double b, double l, double q, double h,
                                       double elementBytes, double kvHeads) {
  CostRow row;
  row.tensorCore = true;
  row.attentionCore = true;
  // Causal: only the lower triangle of the scores is computed.
  double products = b * h * l * l * q;
  row.flopsFwd = 2 * products;
  // Scores recomputed, then the gradients of scores, queries, keys, values.
  row.flopsBwd = 5 * products;
  double qkv = b * l * h * q * elementBytes;
  // The keys' (or the values') bytes.
  double kv = kvHeads > 0 ? qkv * kvHeads / h : qkv;
  double statistics = b * h * l * 4; // fp32 log-sum-exp per row
  row.activationIn = qkv + kv;       // queries and keys
  row.activationInOther = kv;        // values
  row.activationOut = qkv;
  row.activationBuffer = qkv + 2 * kv + statistics;
  row.statisticsBuffer = statistics;
  row.memFwd = 2 * qkv + 2 * kv + statistics;
  // Reads Q, K, V, O, dO and the statistics; writes dQ, dK, dV.
  row.activationGrad = 2 * qkv + 2 * kv;
  row.memBwd = row.activationBuffer + row.activationOut + row.activationGrad;
  return row;
}
