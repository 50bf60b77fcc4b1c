//===- LoomOps.cpp - Operations of the loom dialect -----------------------===//

#include "loom/Dialect/LoomDialect.h"

#include "loom/Dialect/LoomOpUtils.h"

#include "mlir/IR/TypeUtilities.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::detail;

namespace {
/// Emits an op's diagnostics, both where the op exists (its verifier) and
/// where only its operands do (result type inference, which checks the
/// operands of the forward ops and reports nothing without a location).
class Checker {
public:
  Checker(Operation *op) : op(op) {}
  Checker(std::optional<Location> loc, StringRef opName)
      : loc(loc), opName(opName) {}

  InFlightDiagnostic emitError() const {
    if (op)
      return op->emitOpError();
    if (!loc)
      return InFlightDiagnostic();
    return mlir::emitError(*loc) << "'" << opName << "' op ";
  }

  /// All float operands and the result share one element type: precision
  /// changes are explicit casts, never implicit in an op.
  LogicalResult sameElementType(ValueRange values) const {
    Type expected = elementTypeOf(values.front());
    for (Value v : values.drop_front())
      if (elementTypeOf(v) != expected)
        return emitError() << "expected all float operands and results to "
                              "have element type "
                           << expected << ", got " << elementTypeOf(v);
    return success();
  }

  /// Checks that `value` has exactly the shape `expected`.
  LogicalResult shape(StringRef what, Value value, ArrayRef<int64_t> expected,
                      StringRef why) const {
    if (dimsOf(value) == expected)
      return success();
    return emitError() << "expected " << what << " of shape "
                       << ShapeStr{expected} << " (" << why << "), got "
                       << shapeOf(value);
  }

  /// Checks that `value` has rank `rank`.
  LogicalResult rank(StringRef what, Value value, int64_t rank,
                     StringRef layout) const {
    if (static_cast<int64_t>(dimsOf(value).size()) == rank)
      return success();
    return emitError() << "expected " << what << " of rank " << rank << " "
                       << layout << ", got shape " << shapeOf(value);
  }

private:
  Operation *op = nullptr;
  std::optional<Location> loc;
  StringRef opName;
};

RankedTensorType tensorOf(ArrayRef<int64_t> shape, Value like) {
  return RankedTensorType::get(shape, elementTypeOf(like));
}
} // namespace

#include "loom/Dialect/LoomInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "loom/Dialect/LoomOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Forward ops: result types from operands
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  Checker check(loc, getOperationName());
  Value tokens = adaptor.getTokens(), wte = adaptor.getWte(),
        wpe = adaptor.getWpe();
  if (failed(check.rank("tokens", tokens, 2, "[batch, sequence]")) ||
      failed(check.rank("wte", wte, 2, "[vocab, width]")))
    return failure();
  ArrayRef<int64_t> dims = dimsOf(tokens);
  int64_t width = dimsOf(wte)[1];
  if (wpe) {
    if (failed(check.sameElementType({wte, wpe})) ||
        failed(check.rank("wpe", wpe, 2, "[positions, width]")))
      return failure();
    if (dimsOf(wpe)[1] != width)
      return check.emitError()
             << "expected wpe of width " << width << " to match wte "
             << shapeOf(wte) << ", got " << shapeOf(wpe);
    if (dims[1] > dimsOf(wpe)[0])
      return check.emitError()
             << "sequence length " << dims[1] << " exceeds the "
             << dimsOf(wpe)[0] << " positions of wpe";
  }
  types.push_back(tensorOf({dims[0], dims[1], width}, wte));
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  Checker check(loc, getOperationName());
  Value input = adaptor.getInput();
  if (failed(check.sameElementType(
          {input, adaptor.getWeight(), adaptor.getBias()})))
    return failure();
  ArrayRef<int64_t> in = dimsOf(input);
  if (in.empty())
    return check.emitError() << "expected an input of rank at least 1";
  if (failed(check.shape("weight", adaptor.getWeight(), in.back(),
                         "the input's last dimension")) ||
      failed(check.shape("bias", adaptor.getBias(), in.back(),
                         "the input's last dimension")))
    return failure();
  types.push_back(input.getType());
  auto rows = RankedTensorType::get(in.drop_back(),
                                    Float32Type::get(input.getContext()));
  types.append({rows, rows});
  return success();
}

bool LayerNormOp::isWideResult(unsigned index) {
  return index != cast<OpResult>(getResult()).getResultNumber();
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  Checker check(loc, getOperationName());
  Value input = adaptor.getInput();
  if (failed(check.sameElementType({input, adaptor.getWeight()})))
    return failure();
  ArrayRef<int64_t> in = dimsOf(input);
  if (in.empty())
    return check.emitError() << "expected an input of rank at least 1";
  if (failed(check.shape("weight", adaptor.getWeight(), in.back(),
                         "the input's last dimension")))
    return failure();
  types.push_back(input.getType());
  types.push_back(RankedTensorType::get(in.drop_back(),
                                        Float32Type::get(input.getContext())));
  return success();
}

bool RmsNormOp::isWideResult(unsigned index) { return index == 1; }

namespace {
/// The head width D of the grouped [B, T, G (R + 2) D] tensor `grouped`
/// (`what`, of rank 3) for `numHeads` query heads in `kvHeads` groups.
FailureOr<int64_t> groupedHeadWidth(const Checker &check, StringRef what,
                                    Value grouped, int64_t numHeads,
                                    int64_t kvHeads) {
  if (numHeads % kvHeads != 0)
    return check.emitError() << "expected kv_heads (" << kvHeads
                             << ") to divide num_heads (" << numHeads << ")";
  int64_t groupHeads = getQkvRowHeads(numHeads, kvHeads);
  int64_t last = dimsOf(grouped)[2];
  if (last % groupHeads != 0)
    return check.emitError()
           << "expected kv_heads * (num_heads / kv_heads + 2) (" << groupHeads
           << ") to divide " << what << "'s last dimension (" << last << ")";
  return last / groupHeads;
}

/// The head width D of an attention's fused `qkv` operand: [B, T, 3
/// num_heads D], or grouped with `kvHeads`.
FailureOr<int64_t> qkvHeadWidth(const Checker &check, Value qkv,
                                int64_t numHeads,
                                std::optional<int64_t> kvHeads) {
  if (kvHeads)
    return groupedHeadWidth(check, "qkv", qkv, numHeads, *kvHeads);
  int64_t last = dimsOf(qkv)[2];
  if (last % (3 * numHeads) != 0)
    return check.emitError()
           << "expected 3 * num_heads (" << 3 * numHeads
           << ") to divide qkv's last dimension (" << last << ")";
  return last / (3 * numHeads);
}

/// Checks a grouped [B, T, G (R + 2) D] tensor `grouped` against every
/// head's [B, T, 3 num_heads D] `all`, for `num_heads` heads in `kvHeads`
/// groups.
LogicalResult checkGroupedQkv(Operation *op, Value grouped, Value all,
                              int64_t numHeads, int64_t kvHeads) {
  Checker check(op);
  if (failed(check.sameElementType({grouped, all})) ||
      failed(check.rank("the grouped tensor", grouped, 3,
                        "[batch, sequence, groups * (R + 2) * head width]")))
    return failure();
  FailureOr<int64_t> headWidth =
      groupedHeadWidth(check, "the grouped tensor", grouped, numHeads, kvHeads);
  if (failed(headWidth))
    return failure();
  ArrayRef<int64_t> dims = dimsOf(grouped);
  return check.shape("every head's tensor", all,
                     {dims[0], dims[1], 3 * numHeads * *headWidth},
                     "[batch, sequence, 3 * num_heads * head width]");
}
} // namespace

int64_t mlir::loom::getQkvRowHeads(int64_t numHeads,
                                   std::optional<int64_t> kvHeads) {
  if (!kvHeads)
    return 3 * numHeads;
  return *kvHeads * (numHeads / *kvHeads + 2);
}

namespace {
/// The type of one layout's tensor given the other's: for `fromGrouped`,
/// every head's [B, T, 3 num_heads D] from the groups' [B, T, G (R + 2) D],
/// otherwise the reverse. Leaves the checks to the verifiers.
Type groupedQkvPeer(Value value, int64_t numHeads, int64_t kvHeads,
                    bool fromGrouped) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getRank() != 3 || kvHeads <= 0 || numHeads % kvHeads != 0)
    return type;
  int64_t groupHeads = kvHeads * (numHeads / kvHeads + 2);
  int64_t last = type.getDimSize(2);
  int64_t width = fromGrouped ? last / groupHeads : last / (3 * numHeads);
  SmallVector<int64_t> shape(type.getShape());
  shape[2] = width * (fromGrouped ? 3 * numHeads : groupHeads);
  return RankedTensorType::get(shape, type.getElementType());
}
} // namespace

LogicalResult GroupQkvOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location>,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  types.push_back(groupedQkvPeer(adaptor.getQkv(), adaptor.getNumHeads(),
                                 adaptor.getKvHeads(), /*fromGrouped=*/true));
  return success();
}

LogicalResult GroupQkvGradOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location>,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  types.push_back(groupedQkvPeer(adaptor.getGrad(), adaptor.getNumHeads(),
                                 adaptor.getKvHeads(), /*fromGrouped=*/false));
  return success();
}

LogicalResult GroupQkvOp::verify() {
  return checkGroupedQkv(*this, getQkv(), getResult(), getNumHeads(),
                         getKvHeads());
}

LogicalResult GroupQkvGradOp::verify() {
  return checkGroupedQkv(*this, getQkvGrad(), getGrad(), getNumHeads(),
                         getKvHeads());
}

LogicalResult RotaryOp::verify() {
  if (failed(Checker(*this).rank("qkv", getQkv(), 3,
                                 "[batch, sequence, 3 * width]")))
    return failure();
  FailureOr<int64_t> headWidth =
      qkvHeadWidth(Checker(*this), getQkv(), getNumHeads(), getKvHeads());
  if (failed(headWidth))
    return failure();
  // Channels j and j + D/2 of a head are rotated together.
  if (*headWidth % 2 != 0)
    return emitOpError() << "expected an even head width, got " << *headWidth;
  if (!(getTheta().convertToDouble() > 1))
    return emitOpError() << "expected theta above 1, got "
                         << getTheta().convertToDouble();
  if (std::optional<ArrayRef<double>> scaling = getLlama3Scaling()) {
    if (scaling->size() != 4 ||
        !checkRopeScaling({(*scaling)[0], (*scaling)[1], (*scaling)[2],
                           static_cast<int64_t>((*scaling)[3])}) ||
        (*scaling)[3] != std::floor((*scaling)[3]))
      return emitOpError("expected llama3_scaling = [factor >= 1, 0 < "
                         "low_freq_factor < high_freq_factor, "
                         "original_context > 0, an integer]");
  }
  return success();
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  Checker check(loc, getOperationName());
  Value input = adaptor.getInput(), weight = adaptor.getWeight(),
        bias = adaptor.getBias();
  SmallVector<Value> floats = {input, weight};
  if (bias)
    floats.push_back(bias);
  if (failed(check.sameElementType(floats)))
    return failure();
  ArrayRef<int64_t> in = dimsOf(input);
  if (in.empty())
    return check.emitError() << "expected an input of rank at least 1";
  if (failed(check.rank("weight", weight, 2, "[out, in]")))
    return failure();
  ArrayRef<int64_t> w = dimsOf(weight);
  if (w[1] != in.back())
    return check.emitError() << "expected weight of shape [N, " << in.back()
                             << "] ((out, in) layout, in = the input's last "
                                "dimension), got "
                             << ShapeStr{w};
  if (bias &&
      failed(check.shape("bias", bias, {w[0]}, "the weight's out dimension")))
    return failure();
  SmallVector<int64_t> shape(in.drop_back());
  shape.push_back(w[0]);
  types.push_back(tensorOf(shape, input));
  return success();
}

LogicalResult
CausalAttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                    Adaptor adaptor,
                                    SmallVectorImpl<Type> &types) {
  Checker check(loc, getOperationName());
  Value qkv = adaptor.getQkv();
  if (failed(check.rank("qkv", qkv, 3, "[batch, sequence, 3 * width]")))
    return failure();
  ArrayRef<int64_t> dims = dimsOf(qkv);
  int64_t heads = adaptor.getNumHeads();
  std::optional<int64_t> kvHeads = adaptor.getKvHeads();
  if (heads <= 0 || (kvHeads && *kvHeads <= 0))
    return check.emitError() << "expected positive num_heads and kv_heads";
  int64_t width;
  if (kvHeads) {
    FailureOr<int64_t> headWidth = qkvHeadWidth(check, qkv, heads, kvHeads);
    if (failed(headWidth))
      return failure();
    width = heads * *headWidth;
  } else {
    if (dims[2] % 3 != 0)
      return check.emitError() << "expected the last dimension of qkv ("
                               << dims[2] << ") to be 3 * width";
    width = dims[2] / 3;
    if (width % heads != 0)
      return check.emitError() << "expected num_heads (" << heads
                               << ") to divide the width (" << width << ")";
  }
  types.push_back(tensorOf({dims[0], dims[1], width}, qkv));
  types.push_back(RankedTensorType::get({dims[0], heads, dims[1]},
                                        Float32Type::get(qkv.getContext())));
  return success();
}

bool CausalAttentionOp::isWideResult(unsigned index) {
  return index == cast<OpResult>(getLse()).getResultNumber();
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *context,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  Checker check(loc, getOperationName());
  Value logits = adaptor.getLogits(), targets = adaptor.getTargets();
  if (failed(check.rank("logits", logits, 3, "[batch, sequence, vocab]")) ||
      failed(check.rank("targets", targets, 2, "[batch, sequence]")))
    return failure();
  ArrayRef<int64_t> dims = dimsOf(logits);
  if (failed(check.shape("targets", targets, dims.take_front(2),
                         "the batch and sequence of the logits")))
    return failure();
  // A part of the vocabulary (vocab_start) may hold fewer columns.
  if (!adaptor.getVocabStart() &&
      static_cast<int64_t>(adaptor.getNumClasses()) > dims[2])
    return check.emitError()
           << "num_classes (" << adaptor.getNumClasses()
           << ") exceeds the logits' vocabulary dimension (" << dims[2] << ")";
  types.push_back(RankedTensorType::get({}, Float32Type::get(context)));
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

LogicalResult CrossEntropyOp::verify() {
  if (getVocabStart() && (!getGridAttr() || !getGridAxesAttr()))
    return emitOpError("with vocab_start needs the grid and grid_axes its "
                       "parts of the vocabulary are spread over");
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  SmallVector<Value> floats = {getGrad(), getWteGrad()};
  if (getWpeGrad())
    floats.push_back(getWpeGrad());
  if (failed(Checker(*this).sameElementType(floats)) ||
      failed(Checker(*this).rank("grad", getGrad(), 3,
                                 "[batch, sequence, width]")) ||
      failed(
          Checker(*this).rank("wte_grad", getWteGrad(), 2, "[vocab, width]")))
    return failure();
  ArrayRef<int64_t> grad = dimsOf(getGrad());
  if (failed(Checker(*this).shape("tokens", getTokens(), grad.take_front(2),
                                  "the batch and sequence of grad")))
    return failure();
  if (dimsOf(getWteGrad())[1] != grad[2])
    return emitOpError() << "expected the tables' width to be grad's ("
                         << grad[2] << ")";
  if (Value wpeGrad = getWpeGrad()) {
    if (failed(
            Checker(*this).rank("wpe_grad", wpeGrad, 2, "[positions, width]")))
      return failure();
    if (dimsOf(wpeGrad)[1] != grad[2])
      return emitOpError() << "expected the tables' width to be grad's ("
                           << grad[2] << ")";
    if (dimsOf(wpeGrad)[0] < grad[1])
      return emitOpError() << "expected at least " << grad[1]
                           << " positions in wpe_grad";
  }
  if (getWteInit() && getWteInit().getType() != getWteGrad().getType())
    return emitOpError() << "expected wte_init of the type of wte_grad ("
                         << getWteGrad().getType() << "), got "
                         << getWteInit().getType();
  return success();
}

LogicalResult ScatterAddRowsOp::verify() {
  if (failed(Checker(*this).rank("updates", getUpdates(), 2,
                                 "[indices, width]")) ||
      failed(Checker(*this).rank("init", getInit(), 2, "[rows, width]")))
    return failure();
  ArrayRef<int64_t> updates = dimsOf(getUpdates());
  if (failed(Checker(*this).shape("indices", getIndices(), updates.take_front(),
                                  "the rows of updates")))
    return failure();
  if (dimsOf(getInit())[1] != updates[1])
    return emitOpError() << "expected init's width to be updates' ("
                         << updates[1] << "), got " << dimsOf(getInit())[1];
  return success();
}

LogicalResult SoftmaxStatsOp::verify() {
  if (failed(Checker(*this).rank("logits", getLogits(), 2, "[rows, columns]")))
    return failure();
  ArrayRef<int64_t> logits = dimsOf(getLogits());
  if (failed(Checker(*this).shape("max", getMax(), logits.take_front(),
                                  "the rows of the logits")))
    return failure();
  if (getClasses() < 1 || getClasses() > logits[1])
    return emitOpError() << "expected classes in [1, " << logits[1]
                         << "] (the logits' columns), got " << getClasses();
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
  if (failed(Checker(*this).shape("weight", getWeight(), input.take_back(),
                                  "the last dimension of the input")) ||
      failed(Checker(*this).shape("mean", getMean(), input.drop_back(),
                                  "the input's rows")))
    return failure();
  return Checker(*this).shape("rstd", getRstd(), input.drop_back(),
                              "the input's rows");
}

bool LayerNormGradOp::isWideOperand(unsigned index) {
  return index == getMeanMutable().getOperandNumber() ||
         index == getRstdMutable().getOperandNumber();
}

LogicalResult RmsNormGradOp::verify() {
  if (failed(checkSameType(*this, "grad", getGrad(), getInput(), "input")) ||
      failed(checkSameType(*this, "input_grad", getInputGrad(), getInput(),
                           "input")) ||
      failed(checkSameType(*this, "weight_grad", getWeightGrad(), getWeight(),
                           "weight")))
    return failure();
  ArrayRef<int64_t> input = dimsOf(getInput());
  if (failed(Checker(*this).shape("weight", getWeight(), input.take_back(),
                                  "the last dimension of the input")))
    return failure();
  return Checker(*this).shape("rstd", getRstd(), input.drop_back(),
                              "the input's rows");
}

bool RmsNormGradOp::isWideOperand(unsigned index) {
  return index == getRstdMutable().getOperandNumber();
}

LogicalResult LinearGradOp::verify() {
  if (failed(checkSameType(*this, "input_grad", getInputGrad(), getInput(),
                           "input")) ||
      failed(checkSameType(*this, "weight_grad", getWeightGrad(), getWeight(),
                           "weight")) ||
      failed(Checker(*this).rank("weight", getWeight(), 2, "[out, in]")))
    return failure();
  ArrayRef<int64_t> input = dimsOf(getInput());
  ArrayRef<int64_t> weight = dimsOf(getWeight());
  if (input.size() < 2 || input.back() != weight[1])
    return emitOpError() << "expected an input [..., " << weight[1]
                         << "] for a weight of shape " << ShapeStr{weight}
                         << ", got " << ShapeStr{input};
  SmallVector<int64_t> gradShape(input.drop_back());
  gradShape.push_back(weight[0]);
  if (failed(Checker(*this).shape(
          "grad", getGrad(), gradShape,
          "the input's leading dimensions and the weight's "
          "output dimension")))
    return failure();
  if (Value biasGrad = getBiasGrad())
    return Checker(*this).shape("bias_grad", biasGrad, {weight[0]},
                                "the weight's output dimension");
  return success();
}

/// A bias [N] along the last dimension of `rows` [..., N].
static LogicalResult checkBias(Operation *op, Value rows, StringRef biasName,
                               Value bias) {
  Checker check(op);
  if (failed(check.sameElementType({rows, bias})))
    return failure();
  ArrayRef<int64_t> dims = dimsOf(rows);
  if (dims.size() < 2)
    return op->emitOpError("expected rows [..., N] of rank 2 or more");
  return check.shape(biasName, bias, {dims.back()},
                     "the last dimension of the rows");
}

LogicalResult SumSquaresOp::verify() {
  if (getInputs().empty())
    return emitOpError("expects at least one input");
  return success();
}

LogicalResult BiasAddOp::verify() {
  return checkBias(*this, getInput(), "bias", getBias());
}

LogicalResult BiasAddGradOp::verify() {
  return checkBias(*this, getGrad(), "bias_grad", getBiasGrad());
}

LogicalResult CausalAttentionGradOp::verify() {
  if (failed(checkSameType(*this, "qkv_grad", getQkvGrad(), getQkv(), "qkv")) ||
      failed(Checker(*this).rank("qkv", getQkv(), 3,
                                 "[batch, sequence, 3 * width]")))
    return failure();
  ArrayRef<int64_t> qkv = dimsOf(getQkv());
  FailureOr<int64_t> headWidth =
      qkvHeadWidth(Checker(*this), getQkv(), getNumHeads(), getKvHeads());
  if (failed(headWidth))
    return failure();
  SmallVector<int64_t> result = {
      qkv[0], qkv[1], static_cast<int64_t>(getNumHeads()) * *headWidth};
  if (failed(Checker(*this).shape("grad", getGrad(), result,
                                  "the attention result's shape")) ||
      failed(Checker(*this).shape("out", getOut(), result,
                                  "the attention result's shape")))
    return failure();
  auto heads = static_cast<int64_t>(getNumHeads());
  return Checker(*this).shape("lse", getLse(), {qkv[0], heads, qkv[1]},
                              "[batch, num_heads, sequence]");
}

bool CausalAttentionGradOp::isWideOperand(unsigned index) {
  return index == getLseMutable().getOperandNumber();
}

//===----------------------------------------------------------------------===//
// Canonicalization
//===----------------------------------------------------------------------===//

namespace {
/// add(x, embedding_grad(g, t).wte_grad) -> embedding_grad(g, t into x):
/// the scatter starts from x instead of from a zeroed table.
struct AddIntoEmbeddingGrad : public OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    for (auto [mine, other] : {std::pair(add.getLhs(), add.getRhs()),
                               std::pair(add.getRhs(), add.getLhs())}) {
      auto grad = mine.getDefiningOp<EmbeddingGradOp>();
      if (!grad || grad.getWteInit() || mine != grad.getWteGrad() ||
          !mine.hasOneUse())
        continue;
      // The fused op takes the add's place: the position table's gradient
      // must not be read before it (a tensor-parallel sum of it, say).
      Block *block = add->getBlock();
      Value wpeGrad = grad.getWpeGrad();
      if (wpeGrad && llvm::any_of(wpeGrad.getUsers(), [&](Operation *user) {
            Operation *there = block->findAncestorOpInBlock(*user);
            return !there || !add->isBeforeInBlock(there);
          }))
        continue;
      auto fused = EmbeddingGradOp::create(
          rewriter, grad.getLoc(), grad.getWteGrad().getType(),
          wpeGrad ? wpeGrad.getType() : Type(), grad.getGrad(),
          grad.getTokens(), other, grad.getVocabStart());
      if (wpeGrad)
        rewriter.replaceAllUsesWith(wpeGrad, fused.getWpeGrad());
      rewriter.replaceOp(add, fused.getWteGrad());
      rewriter.eraseOp(grad);
      return success();
    }
    return failure();
  }
};
} // namespace

void AddOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                        MLIRContext *context) {
  patterns.add<AddIntoEmbeddingGrad>(context);
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

Value AdamWOp::getUpdatedParam() { return getParam(); }
Value AdamWOp::getUpdateGrad() { return getGrad(); }
OperandRange AdamWOp::getUpdateStates() {
  return getOperation()->getOperands().slice(2, 2);
}
void AdamWOp::setSkipCondition(Value skip) { getSkipMutable().assign(skip); }

Value SGDOp::getUpdatedParam() { return getParam(); }
Value SGDOp::getUpdateGrad() { return getGrad(); }
OperandRange SGDOp::getUpdateStates() {
  return getOperation()->getOperands().slice(2, 1);
}
void SGDOp::setSkipCondition(Value skip) { getSkipMutable().assign(skip); }

//===----------------------------------------------------------------------===//
// Mixed precision
//===----------------------------------------------------------------------===//

OpFoldResult ConvertOp::fold(FoldAdaptor) {
  // A narrow value widened to f32 and narrowed back is itself: f32 holds
  // every bf16 and f16 exactly. The offloaded step widens the device's
  // copies of the parameters for the gradient function, which narrows them.
  auto widened = getInput().getDefiningOp<ConvertOp>();
  if (!widened || getScale() || widened.getScale())
    return {};
  Value source = widened.getInput();
  auto wide = getElementTypeOrSelf(widened.getResult().getType());
  auto narrow = getElementTypeOrSelf(source.getType());
  if (source.getType() != getResult().getType() || !wide.isF32() ||
      !(narrow.isBF16() || narrow.isF16()))
    return {};
  return source;
}

LogicalResult TransferOp::verify() {
  if (!getAccumulate())
    return success();
  if (getTo() != Placement::host)
    return emitOpError("accumulates only into host memory");
  if (!getElementTypeOrSelf(getSource().getType()).isF32())
    return emitOpError("accumulates only f32 elements");
  return success();
}

LogicalResult ConvertOp::verify() {
  if (dimsOf(getInput()) != dimsOf(getResult()))
    return emitOpError() << "expected the result's shape "
                         << shapeOf(getResult()) << " to be the input's "
                         << shapeOf(getInput());
  if (getInput().getType() == getResult().getType() && !getScale())
    return emitOpError("converts to its own type without a scale");
  return success();
}
