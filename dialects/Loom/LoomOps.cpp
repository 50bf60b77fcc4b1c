//===- LoomOps.cpp - Operations of the loom dialect -----------------------===//

#include "Loom/LoomDialect.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
/// Streams a shape as "[4, 64, 768]" for diagnostics.
struct ShapeStr {
  ArrayRef<int64_t> dims;
};
raw_ostream &operator<<(raw_ostream &os, ShapeStr s) {
  os << '[';
  llvm::interleaveComma(s.dims, os);
  return os << ']';
}
Diagnostic &operator<<(Diagnostic &diag, ShapeStr s) {
  std::string str;
  llvm::raw_string_ostream os(str);
  os << s;
  return diag << str;
}
ShapeStr shapeOf(Value v) {
  return {cast<RankedTensorType>(v.getType()).getShape()};
}
ArrayRef<int64_t> dimsOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
Type elementTypeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

/// All float operands and the result share one element type: precision
/// changes are explicit casts, never implicit in an op.
LogicalResult verifySameElementType(Operation *op, ValueRange values) {
  Type expected = elementTypeOf(values.front());
  for (Value v : values.drop_front())
    if (elementTypeOf(v) != expected)
      return op->emitOpError()
             << "expected all float operands and results to have element "
                "type "
             << expected << ", got " << elementTypeOf(v);
  return success();
}

/// Checks that `value` has exactly the shape `expected`.
LogicalResult checkShape(Operation *op, StringRef what, Value value,
                         ArrayRef<int64_t> expected, StringRef why) {
  if (dimsOf(value) == expected)
    return success();
  return op->emitOpError() << "expected " << what << " of shape "
                           << ShapeStr{expected} << " (" << why << "), got "
                           << shapeOf(value);
}

/// Checks that `value` has rank `rank`.
LogicalResult checkRank(Operation *op, StringRef what, Value value,
                        int64_t rank, StringRef layout) {
  if (static_cast<int64_t>(dimsOf(value).size()) == rank)
    return success();
  return op->emitOpError() << "expected " << what << " of rank " << rank << " "
                           << layout << ", got shape " << shapeOf(value);
}
} // namespace

#include "Loom/LoomInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "Loom/LoomOps.cpp.inc"

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  if (failed(verifySameElementType(*this, {getWte(), getWpe(), getResult()})))
    return failure();
  if (failed(checkRank(*this, "tokens", getTokens(), 2, "[batch, sequence]")) ||
      failed(checkRank(*this, "wte", getWte(), 2, "[vocab, width]")) ||
      failed(checkRank(*this, "wpe", getWpe(), 2, "[positions, width]")))
    return failure();
  ArrayRef<int64_t> tokens = dimsOf(getTokens());
  int64_t width = dimsOf(getWte())[1];
  if (dimsOf(getWpe())[1] != width)
    return emitOpError() << "expected wpe of width " << width
                         << " to match wte " << shapeOf(getWte()) << ", got "
                         << shapeOf(getWpe());
  if (tokens[1] > dimsOf(getWpe())[0])
    return emitOpError() << "sequence length " << tokens[1] << " exceeds the "
                         << dimsOf(getWpe())[0] << " positions of wpe";
  return checkShape(*this, "result", getResult(), {tokens[0], tokens[1], width},
                    "[batch, sequence] of tokens and width of wte");
}

//===----------------------------------------------------------------------===//
// LayerNormOp
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::verify() {
  if (failed(verifySameElementType(
          *this, {getInput(), getWeight(), getBias(), getResult()})))
    return failure();
  ArrayRef<int64_t> in = dimsOf(getInput());
  if (in.empty())
    return emitOpError() << "expected an input of rank at least 1";
  int64_t channels = in.back();
  if (failed(checkShape(*this, "weight", getWeight(), {channels},
                        "the input's last dimension")) ||
      failed(checkShape(*this, "bias", getBias(), {channels},
                        "the input's last dimension")) ||
      failed(checkShape(*this, "result", getResult(), in, "the input's")))
    return failure();
  if (!(getEpsilon().convertToDouble() > 0))
    return emitOpError() << "expected a positive epsilon, got "
                         << formatF64(getEpsilon().convertToDouble());
  return success();
}

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::verify() {
  SmallVector<Value> floats = {getInput(), getWeight(), getResult()};
  if (getBias())
    floats.push_back(getBias());
  if (failed(verifySameElementType(*this, floats)))
    return failure();
  ArrayRef<int64_t> in = dimsOf(getInput());
  if (in.empty())
    return emitOpError() << "expected an input of rank at least 1";
  if (failed(checkRank(*this, "weight", getWeight(), 2, "[out, in]")))
    return failure();
  ArrayRef<int64_t> weight = dimsOf(getWeight());
  if (weight[1] != in.back())
    return emitOpError() << "expected weight of shape [N, " << in.back()
                         << "] ((out, in) layout, in = the input's last "
                            "dimension), got "
                         << ShapeStr{weight};
  if (getBias() && failed(checkShape(*this, "bias", getBias(), {weight[0]},
                                     "the weight's out dimension")))
    return failure();
  SmallVector<int64_t> expected(in.drop_back());
  expected.push_back(weight[0]);
  return checkShape(*this, "result", getResult(), expected,
                    "the input's leading dimensions and the weight's out "
                    "dimension");
}

//===----------------------------------------------------------------------===//
// CausalAttentionOp
//===----------------------------------------------------------------------===//

LogicalResult CausalAttentionOp::verify() {
  if (failed(verifySameElementType(*this, {getQkv(), getResult()})))
    return failure();
  if (failed(
          checkRank(*this, "qkv", getQkv(), 3, "[batch, sequence, 3 * width]")))
    return failure();
  ArrayRef<int64_t> qkv = dimsOf(getQkv());
  if (qkv[2] % 3 != 0)
    return emitOpError() << "expected the last dimension of qkv (" << qkv[2]
                         << ") to be 3 * width";
  int64_t width = qkv[2] / 3;
  int64_t heads = getNumHeads();
  if (width % heads != 0)
    return emitOpError() << "expected num_heads (" << heads
                         << ") to divide the width (" << width << ")";
  return checkShape(*this, "result", getResult(), {qkv[0], qkv[1], width},
                    "[batch, sequence, width] with width = qkv's last / 3");
}

//===----------------------------------------------------------------------===//
// CrossEntropyOp
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::verify() {
  if (failed(checkRank(*this, "logits", getLogits(), 3,
                       "[batch, sequence, vocab]")) ||
      failed(checkRank(*this, "targets", getTargets(), 2, "[batch, sequence]")))
    return failure();
  ArrayRef<int64_t> logits = dimsOf(getLogits());
  if (failed(checkShape(*this, "targets", getTargets(), logits.take_front(2),
                        "the batch and sequence of the logits")))
    return failure();
  if (static_cast<int64_t>(getNumClasses()) > logits[2])
    return emitOpError() << "num_classes (" << getNumClasses()
                         << ") exceeds the logits' vocabulary dimension ("
                         << logits[2] << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

namespace {
/// Checks that `value` has the type of the forward value it is the cotangent
/// of.
LogicalResult checkSameType(Operation *op, StringRef what, Value value,
                            Value forward, StringRef forwardName) {
  if (value.getType() == forward.getType())
    return success();
  return op->emitOpError() << "expected " << what << " to have the type of "
                           << forwardName << " (" << forward.getType()
                           << "), got " << value.getType();
}
} // namespace

LogicalResult EmbeddingGradOp::verify() {
  if (failed(verifySameElementType(*this,
                                   {getGrad(), getWteGrad(), getWpeGrad()})) ||
      failed(
          checkRank(*this, "grad", getGrad(), 3, "[batch, sequence, width]")) ||
      failed(checkRank(*this, "wte_grad", getWteGrad(), 2, "[vocab, width]")) ||
      failed(
          checkRank(*this, "wpe_grad", getWpeGrad(), 2, "[positions, width]")))
    return failure();
  ArrayRef<int64_t> grad = dimsOf(getGrad());
  if (failed(checkShape(*this, "tokens", getTokens(), grad.take_front(2),
                        "the batch and sequence of grad")))
    return failure();
  if (dimsOf(getWteGrad())[1] != grad[2] || dimsOf(getWpeGrad())[1] != grad[2])
    return emitOpError() << "expected the tables' width to be grad's ("
                         << grad[2] << ")";
  if (dimsOf(getWpeGrad())[0] < grad[1])
    return emitOpError() << "expected at least " << grad[1]
                         << " positions in wpe_grad";
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  if (failed(checkSameType(*this, "grad", getGrad(), getInput(), "input")) ||
      failed(checkSameType(*this, "input_grad", getInputGrad(), getInput(),
                           "input")) ||
      failed(checkSameType(*this, "weight_grad", getWeightGrad(), getWeight(),
                           "weight")) ||
      failed(checkSameType(*this, "bias_grad", getBiasGrad(), getWeight(),
                           "weight")))
    return failure();
  ArrayRef<int64_t> input = dimsOf(getInput());
  return checkShape(*this, "weight", getWeight(), input.take_back(),
                    "the last dimension of the input");
}

LogicalResult LinearGradOp::verify() {
  if (failed(checkSameType(*this, "input_grad", getInputGrad(), getInput(),
                           "input")) ||
      failed(checkSameType(*this, "weight_grad", getWeightGrad(), getWeight(),
                           "weight")) ||
      failed(checkRank(*this, "weight", getWeight(), 2, "[out, in]")))
    return failure();
  ArrayRef<int64_t> input = dimsOf(getInput());
  ArrayRef<int64_t> weight = dimsOf(getWeight());
  if (input.size() < 2 || input.back() != weight[1])
    return emitOpError() << "expected an input [..., " << weight[1]
                         << "] for a weight of shape " << ShapeStr{weight}
                         << ", got " << ShapeStr{input};
  SmallVector<int64_t> gradShape(input.drop_back());
  gradShape.push_back(weight[0]);
  if (failed(checkShape(*this, "grad", getGrad(), gradShape,
                        "the input's leading dimensions and the weight's "
                        "output dimension")))
    return failure();
  if (Value biasGrad = getBiasGrad())
    return checkShape(*this, "bias_grad", biasGrad, {weight[0]},
                      "the weight's output dimension");
  return success();
}

LogicalResult CausalAttentionGradOp::verify() {
  if (failed(checkSameType(*this, "qkv_grad", getQkvGrad(), getQkv(), "qkv")) ||
      failed(
          checkRank(*this, "qkv", getQkv(), 3, "[batch, sequence, 3 * width]")))
    return failure();
  ArrayRef<int64_t> qkv = dimsOf(getQkv());
  if (qkv[2] % (3 * getNumHeads()) != 0)
    return emitOpError() << "expected 3 * num_heads (" << 3 * getNumHeads()
                         << ") to divide qkv's last dimension (" << qkv[2]
                         << ")";
  return checkShape(*this, "grad", getGrad(), {qkv[0], qkv[1], qkv[2] / 3},
                    "the attention result's shape");
}

//===----------------------------------------------------------------------===//
// Vector-Jacobian products
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  auto grad =
      EmbeddingGradOp::create(b, getLoc(), getWte().getType(),
                              getWpe().getType(), resultGrads[0], getTokens());
  operandGrads.assign({Value(), grad.getWteGrad(), grad.getWpeGrad()});
  return success();
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  auto grad = LayerNormGradOp::create(
      b, getLoc(), getInput().getType(), getWeight().getType(),
      getBias().getType(), resultGrads[0], getInput(), getWeight(),
      getEpsilonAttr());
  operandGrads.assign(
      {grad.getInputGrad(), grad.getWeightGrad(), grad.getBiasGrad()});
  return success();
}

LogicalResult LinearOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
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
CausalAttentionOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  Value grad = CausalAttentionGradOp::create(b, getLoc(), getQkv().getType(),
                                             resultGrads[0], getQkv(),
                                             getNumHeadsAttr());
  operandGrads.assign({grad});
  return success();
}

LogicalResult GeluOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  Value grad =
      GeluGradOp::create(b, getLoc(), getType(), resultGrads[0], getInput());
  operandGrads.assign({grad});
  return success();
}

LogicalResult AddOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign({resultGrads[0], resultGrads[0]});
  return success();
}

LogicalResult CrossEntropyOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  if (elementTypeOf(getLogits()) != b.getF32Type())
    return emitOpError("is differentiated only for f32 logits");
  Value grad = CrossEntropyGradOp::create(b, getLoc(), getLogits().getType(),
                                          resultGrads[0], getLogits(),
                                          getTargets(), getNumClassesAttr());
  operandGrads.assign({grad, Value()});
  return success();
}
