//===- LoomOpGradients.cpp - Vector-Jacobian products of the forward ops -===//
//
// DifferentiableOpInterface of the forward ops: each builds the gradient ops
// of LoomOps.td from its result cotangents (docs/dialect.md). The ops that
// tensor parallelism adds build theirs in LoomParallel.cpp.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"

using namespace mlir;
using namespace mlir::loom;

LogicalResult EmbeddingOp::buildVJP(RewriterBase &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Type wpeType = getWpe() ? getWpe().getType() : Type();
  auto grad = EmbeddingGradOp::create(b, getLoc(), getWte().getType(), wpeType,
                                      resultGrads[0], getTokens(),
                                      /*wte_init=*/Value(), getVocabStart());
  operandGrads.assign({Value(), grad.getWteGrad()});
  if (getWpe())
    operandGrads.push_back(grad.getWpeGrad());
  if (getVocabStart())
    operandGrads.push_back(Value());
  return success();
}

LogicalResult LayerNormOp::buildVJP(RewriterBase &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // The statistics are by-products that nothing differentiates.
  auto grad = LayerNormGradOp::create(
      b, getLoc(), getInput().getType(), getWeight().getType(),
      getBias().getType(), resultGrads[0], getInput(), getWeight(), getMean(),
      getRstd());
  operandGrads.assign(
      {grad.getInputGrad(), grad.getWeightGrad(), grad.getBiasGrad()});
  return success();
}

LogicalResult RmsNormOp::buildVJP(RewriterBase &b, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  // The statistic is a by-product that nothing differentiates.
  auto grad = RmsNormGradOp::create(b, getLoc(), getInput().getType(),
                                    getWeight().getType(), resultGrads[0],
                                    getInput(), getWeight(), getRstd());
  operandGrads.assign({grad.getInputGrad(), grad.getWeightGrad()});
  return success();
}

LogicalResult GroupQkvOp::buildVJP(RewriterBase &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  Value grad =
      GroupQkvGradOp::create(b, getLoc(), getQkv().getType(), resultGrads[0],
                             getNumHeadsAttr(), getKvHeadsAttr());
  operandGrads.assign({grad});
  return success();
}

LogicalResult RotaryOp::buildVJP(RewriterBase &b, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  // A rotation's transpose is its inverse.
  Value grad = RotaryOp::create(b, getLoc(), getType(), resultGrads[0],
                                getNumHeadsAttr(), getThetaAttr(),
                                getInverse() ? nullptr : b.getUnitAttr(),
                                getLlama3ScalingAttr(), getKvHeadsAttr());
  operandGrads.assign({grad});
  return success();
}

LogicalResult SwigluOp::buildVJP(RewriterBase &b, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  auto grad = SwigluGradOp::create(b, getLoc(), getType(), getType(),
                                   resultGrads[0], getGate(), getUp());
  operandGrads.assign({grad.getGateGrad(), grad.getUpGrad()});
  return success();
}

LogicalResult LinearOp::buildVJP(RewriterBase &b, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  Type biasType = getBias() ? getBias().getType() : Type();
  auto grad = LinearGradOp::create(b, getLoc(), getInput().getType(),
                                   getWeight().getType(), biasType,
                                   resultGrads[0], getInput(), getWeight());
  operandGrads.assign({grad.getInputGrad(), grad.getWeightGrad()});
  if (getBias())
    operandGrads.push_back(grad.getBiasGrad());
  return success();
}

LogicalResult
CausalAttentionOp::buildVJP(RewriterBase &b, ValueRange resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  // The log-sum-exp is a by-product that nothing differentiates.
  Value grad = CausalAttentionGradOp::create(
      b, getLoc(), getQkv().getType(), resultGrads[0], getQkv(), getResult(),
      getLse(), getNumHeadsAttr(), /*query_sums=*/nullptr, getKvHeadsAttr());
  operandGrads.assign({grad});
  return success();
}

LogicalResult GeluOp::buildVJP(RewriterBase &b, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  Value grad =
      GeluGradOp::create(b, getLoc(), getType(), resultGrads[0], getInput());
  operandGrads.assign({grad});
  return success();
}

LogicalResult AddOp::buildVJP(RewriterBase &b, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({resultGrads[0], resultGrads[0]});
  return success();
}

LogicalResult CrossEntropyOp::buildVJP(RewriterBase &b, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  if (getLogits().getType().getElementType() != b.getF32Type())
    return emitOpError("is differentiated only for f32 logits");
  Value grad = CrossEntropyGradOp::create(
      b, getLoc(), getLogits().getType(), resultGrads[0], getLogits(),
      getTargets(), getVocabStart(), getNumClassesAttr(), getGridAttr(),
      getGridAxesAttr());
  operandGrads.assign({grad, Value()});
  if (getVocabStart())
    operandGrads.push_back(Value());
  return success();
}
