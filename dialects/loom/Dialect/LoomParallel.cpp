//===- LoomParallel.cpp - How loom ops divide among ranks -----------------===//
//
// Each op's TensorParallelOpInterface rule (Megatron-LM's layout of a
// transformer layer), and the vector-Jacobian products of the ops tensor
// parallelism adds: a bias added after the reduction and the fan-out whose
// cotangent is summed over the group (Megatron's f).
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::loom;

TensorParallelRewriter::~TensorParallelRewriter() = default;

int64_t TensorLayout::getPartExtent(int64_t extent, int64_t size) const {
  if (!isSplit())
    return extent;
  if (!shared)
    return extent % (blocks * size) ? -1 : extent / size;
  // Teams of size / blocks ranks, each dividing one block's leading
  // elements and holding its last `shared`.
  if (size % blocks || extent % blocks)
    return -1;
  int64_t team = size / blocks, block = extent / blocks;
  if (block <= shared || (block - shared) % team)
    return -1;
  return (block - shared) / team + shared;
}

RankedTensorType TensorParallelRewriter::getPartType(Type whole,
                                                     int64_t dim) const {
  auto type = cast<RankedTensorType>(whole);
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] /= size;
  return RankedTensorType::get(shape, type.getElementType());
}

RankedTensorType
TensorParallelRewriter::getPartType(Type whole, TensorLayout layout) const {
  auto type = cast<RankedTensorType>(whole);
  SmallVector<int64_t> shape(type.getShape());
  shape[layout.dim] = layout.getPartExtent(shape[layout.dim], size);
  return RankedTensorType::get(shape, type.getElementType());
}

TensorLayout mlir::loom::getSplitWantedByUsers(Value value, int64_t dim,
                                               int64_t size) {
  TensorLayout wanted = TensorLayout::split(dim);
  for (OpOperand &use : value.getUses())
    if (auto user = dyn_cast<TensorParallelOpInterface>(use.getOwner())) {
      TensorLayout asked =
          user.getTensorParallelSplit(use.getOperandNumber(), dim, size);
      if (asked.blocks > wanted.blocks || asked.shared > wanted.shared)
        wanted = asked;
    }
  return wanted;
}

namespace {
int64_t rankOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getRank();
}

/// The rule of ops that act on each element, or each row along the last
/// dimension, alike: the result is laid out as the operands are. Operands
/// laid out differently are made whole; a partial sum is summed first
/// unless the op is linear in it (`sumsOfPartials`: a sum of partial sums
/// is the partial sum of the sum).
LogicalResult partitionAlike(Operation *op, TensorParallelRewriter &rewriter,
                             bool sumsOfPartials) {
  TensorLayout layout = rewriter.getLayout(op->getOperand(0));
  bool alike = llvm::all_of(op->getOperands(), [&](Value operand) {
    return rewriter.getLayout(operand) == layout;
  });
  if (!alike || (layout.isPartial() && !sumsOfPartials)) {
    for (OpOperand &operand : op->getOpOperands())
      if (failed(rewriter.makeReplicated(operand)))
        return failure();
    layout = TensorLayout::replicated();
  }
  rewriter.getRewriter().modifyOpInPlace(
      op, [&] { op->getResult(0).setType(op->getOperand(0).getType()); });
  rewriter.setLayout(op->getResult(0), layout);
  return success();
}

/// The rule of ops that act on each row along the last dimension with
/// parameters of the row's width (layer norm's scale and shift, a bias):
/// the result is laid out as the rows are, a partial sum summed first.
/// Parameters are split as the rows are when the rows are split along the
/// last dimension, whole otherwise; ranks that each hold other rows
/// (sequence parallelism) each contribute to their cotangent, so they are
/// fanned out. Unless `splitRows`, rows split along the last dimension are
/// refused (layer norm normalizes over it).
LogicalResult partitionRowwise(Operation *op, OpOperand &rows,
                               ArrayRef<OpOperand *> parameters, bool splitRows,
                               TensorParallelRewriter &rewriter) {
  TensorLayout layout = rewriter.getLayout(rows.get());
  if (layout.isPartial()) {
    if (failed(rewriter.makeReplicated(rows)))
      return failure();
    layout = TensorLayout::replicated();
  }
  bool lastSplit = layout.isSplit() && layout.dim == rankOf(rows.get()) - 1;
  if (lastSplit && !splitRows)
    return op->emitOpError("works on whole rows along its last dimension, "
                           "which tensor parallelism has split");
  for (OpOperand *parameter : parameters) {
    LogicalResult made =
        lastSplit          ? rewriter.makeSplit(*parameter, layout.along(0))
        : layout.isSplit() ? rewriter.makeFannedOut(*parameter)
                           : rewriter.makeReplicated(*parameter);
    if (failed(made))
      return failure();
  }
  rewriter.getRewriter().modifyOpInPlace(
      op, [&] { op->getResult(0).setType(rows.get().getType()); });
  rewriter.setLayout(op->getResult(0), layout);
  return success();
}
} // namespace

/// How a column-parallel projection splits an attention's fused queries,
/// keys and values (`qkv`, whole) along `dim` among `size` ranks: the
/// queries', the keys' and the values' blocks; whole groups under
/// grouped-query attention; or, where the ranks outnumber the groups, each
/// group's query heads divided among a team of ranks that each hold the
/// group's key and value (Megatron-LM's replicated key/value heads).
static TensorLayout getQkvSplit(Value qkv, int64_t numHeads,
                                std::optional<int64_t> kvHeads, int64_t dim,
                                int64_t size) {
  if (!kvHeads)
    return TensorLayout::split(dim, 3);
  if (*kvHeads % size == 0 || size % *kvHeads)
    return TensorLayout::split(dim, 1);
  int64_t headWidth = cast<RankedTensorType>(qkv.getType()).getDimSize(2) /
                      getQkvRowHeads(numHeads, kvHeads);
  return TensorLayout::sharedBlocks(dim, *kvHeads, 2 * headWidth);
}

int64_t mlir::loom::getLocalKvHeads(int64_t kvHeads, int64_t size) {
  return kvHeads % size ? 1 : kvHeads / size;
}

DimSlice::DimSlice(OpBuilder &b, RankedTensorType whole, int64_t dim,
                   int64_t offset, int64_t size)
    : offsets(whole.getRank(), b.getIndexAttr(0)),
      strides(whole.getRank(), b.getIndexAttr(1)) {
  SmallVector<int64_t> shape(whole.getShape());
  shape[dim] = size;
  type = RankedTensorType::get(shape, whole.getElementType());
  offsets[dim] = b.getIndexAttr(offset);
  for (int64_t extent : shape)
    sizes.push_back(b.getIndexAttr(extent));
}

Value DimSlice::extract(OpBuilder &b, Location loc, Value from) const {
  return tensor::ExtractSliceOp::create(b, loc, type, from, offsets, sizes,
                                        strides);
}

Value DimSlice::insert(OpBuilder &b, Location loc, Value slice,
                       Value into) const {
  return tensor::InsertSliceOp::create(b, loc, slice, into, offsets, sizes,
                                       strides);
}

/// Whether `op`'s `numHeads` heads divide among the ranks and its fused
/// queries, keys and values `qkv` come split by heads (the blocks of a
/// column-parallel projection), as attention and the rotation need.
static LogicalResult checkHeadsSplit(Operation *op, int64_t numHeads,
                                     std::optional<int64_t> kvHeads, Value qkv,
                                     TensorParallelRewriter &rewriter) {
  int64_t size = rewriter.getSize();
  if (numHeads % size)
    return op->emitOpError()
           << "has " << numHeads << " heads, which tensor parallelism over "
           << size << " ranks does not divide";
  TensorLayout layout = rewriter.getLayout(qkv);
  if (kvHeads) {
    if (*kvHeads % size && size % *kvHeads)
      return op->emitOpError()
             << "has " << *kvHeads
             << " key/value heads, which tensor parallelism over " << size
             << " ranks neither divides nor is a multiple of";
    // The column-parallel projection gives each rank whole groups, or
    // its team's group: the rank's query heads, then the group's key and
    // value, `shared` elements of a part that holds its queries and those.
    int64_t partWidth = cast<RankedTensorType>(qkv.getType()).getDimSize(2);
    bool teams = *kvHeads % size != 0;
    bool expected =
        teams ? layout.isSplit() && layout.dim == 2 &&
                    layout.blocks == *kvHeads && layout.shared > 0 &&
                    layout.shared * (numHeads / size + 2) == 2 * partWidth
              : layout == TensorLayout::split(2, 1);
    if (!expected)
      return op->emitOpError("needs its groups split among the ranks (the "
                             "output of a column-parallel projection)");
    return success();
  }
  if (layout != TensorLayout::split(2, 3))
    return op->emitOpError("needs its queries, keys and values split by "
                           "heads (the output of a column-parallel "
                           "projection)");
  return success();
}

/// The index of the first token of this rank's part of the vocabulary.
static Value buildVocabStart(TensorParallelRewriter &rewriter, Location loc,
                             int64_t rowsPerRank) {
  RewriterBase &b = rewriter.getRewriter();
  return arith::MulIOp::create(
      b, loc, rewriter.buildIndexInGroup(loc),
      arith::ConstantIndexOp::create(b, loc, rowsPerRank));
}

LogicalResult
EmbeddingOp::partitionTensorParallel(TensorParallelRewriter &rewriter) {
  // Vocabulary parallel: each rank looks up the tokens of its rows of the
  // table; the parts' sum, which the pass builds where the result is
  // needed whole, is the embedding. The position table is added by one
  // part, so its cotangent comes from one rank and is summed (fanned out).
  if (getVocabStart())
    return emitOpError("is partitioned already");
  if (failed(rewriter.makeReplicated(getTokensMutable())) ||
      failed(rewriter.makeSplit(getWteMutable(), 0, 1)) ||
      (getWpe() && failed(rewriter.makeFannedOut(getWpeMutable()[0]))))
    return failure();
  Value start =
      buildVocabStart(rewriter, getLoc(), getWte().getType().getDimSize(0));
  rewriter.getRewriter().modifyOpInPlace(
      *this, [&] { getVocabStartMutable().assign(start); });
  rewriter.setLayout(getResult(), TensorLayout::partial());
  return success();
}

LogicalResult
CrossEntropyOp::partitionTensorParallel(TensorParallelRewriter &rewriter) {
  TensorLayout logits = rewriter.getLayout(getLogits());
  int64_t last = rankOf(getLogits()) - 1;
  if (failed(rewriter.makeReplicated(getTargetsMutable())))
    return failure();
  if (!logits.isSplit() || logits.dim != last || logits.blocks != 1) {
    if (failed(rewriter.makeReplicated(getLogitsMutable())))
      return failure();
    rewriter.setLayout(getResult(), TensorLayout::replicated());
    return success();
  }
  // Vocabulary parallel: the rank's columns of the logits, with the
  // statistics of whole rows reduced over the group inside the op.
  if (getVocabStart())
    return emitOpError("is partitioned already");
  Value start = buildVocabStart(rewriter, getLoc(),
                                getLogits().getType().getDimSize(last));
  rewriter.getRewriter().modifyOpInPlace(*this, [&] {
    getVocabStartMutable().assign(start);
    setGridAttr(rewriter.getGrid());
    setGridAxesAttr(rewriter.getGridAxes());
  });
  rewriter.setLayout(getResult(), TensorLayout::replicated());
  return success();
}

LogicalResult
LayerNormOp::partitionTensorParallel(TensorParallelRewriter &rewriter) {
  if (failed(partitionRowwise(*this, getInputMutable(),
                              {&getWeightMutable(), &getBiasMutable()},
                              /*splitRows=*/false, rewriter)))
    return failure();
  // The rows' statistics are split as the rows are (sequence parallelism),
  // never along the normalized dimension.
  TensorLayout layout = rewriter.getLayout(getResult());
  auto rows = RankedTensorType::get(getInput().getType().getShape().drop_back(),
                                    getMean().getType().getElementType());
  rewriter.getRewriter().modifyOpInPlace(*this, [&] {
    getMean().setType(rows);
    getRstd().setType(rows);
  });
  rewriter.setLayout(getMean(), layout);
  rewriter.setLayout(getRstd(), layout);
  return success();
}

LogicalResult
RmsNormOp::partitionTensorParallel(TensorParallelRewriter &rewriter) {
  if (failed(partitionRowwise(*this, getInputMutable(), {&getWeightMutable()},
                              /*splitRows=*/false, rewriter)))
    return failure();
  // The rows' statistic is split as the rows are (sequence parallelism).
  TensorLayout layout = rewriter.getLayout(getResult());
  auto rows = RankedTensorType::get(getInput().getType().getShape().drop_back(),
                                    getRstd().getType().getElementType());
  rewriter.getRewriter().modifyOpInPlace(*this,
                                         [&] { getRstd().setType(rows); });
  rewriter.setLayout(getRstd(), layout);
  return success();
}

LogicalResult
LinearOp::partitionTensorParallel(TensorParallelRewriter &rewriter) {
  int64_t last = rankOf(getInput()) - 1;
  RewriterBase &b = rewriter.getRewriter();
  if (!getSplit()) {
    for (OpOperand &operand : (*this)->getOpOperands())
      if (failed(rewriter.makeReplicated(operand)))
        return failure();
    rewriter.setLayout(getResult(), TensorLayout::replicated());
    return success();
  }
  if (*getSplit() == TensorSplit::column) {
    // Each rank computes its blocks of the output features from the whole
    // input (Megatron's f before it).
    TensorLayout output =
        getSplitWantedByUsers(getResult(), last, rewriter.getSize());
    if (output.getPartExtent(getType().getDimSize(last), rewriter.getSize()) <
        0)
      return emitOpError() << "has " << getType().getDimSize(last)
                           << " output features, which tensor parallelism "
                              "over "
                           << rewriter.getSize()
                           << " ranks cannot divide as its users need";
    if (failed(rewriter.makeFannedOut(getInputMutable())) ||
        failed(rewriter.makeSplit(getWeightMutable(), output.along(0))) ||
        (getBias() &&
         failed(rewriter.makeSplit(getBiasMutable()[0], output.along(0)))))
      return failure();
    b.modifyOpInPlace(*this, [&] {
      getResult().setType(rewriter.getPartType(getType(), output));
    });
    rewriter.setLayout(getResult(), output);
    return success();
  }
  // Row parallel: each rank's input features give a partial product; the
  // bias is added once they are summed (Megatron's g before it).
  TensorLayout input = rewriter.getLayout(getInput());
  if (!input.isSplit() || input.dim != last)
    return emitOpError("is row parallel and needs its input split along its "
                       "last dimension (the output of a column-parallel op)");
  if (failed(rewriter.makeSplit(getWeightMutable(), 1, input.blocks)))
    return failure();
  Location loc = getLoc();
  auto partial = LinearOp::create(b, loc, getInput(), getWeight(),
                                  /*bias=*/Value(), getSplitAttr());
  rewriter.setLayout(partial, TensorLayout::partial());
  FailureOr<Value> sum = rewriter.reducePartial(loc, partial);
  if (failed(sum))
    return failure();
  Value result = *sum;
  if (Value bias = getBias()) {
    auto add = BiasAddOp::create(b, loc, result, bias);
    if (failed(cast<TensorParallelOpInterface>(add.getOperation())
                   .partitionTensorParallel(rewriter)))
      return failure();
    result = add;
  }
  b.replaceOp(*this, result);
  return success();
}

LogicalResult
CausalAttentionOp::partitionTensorParallel(TensorParallelRewriter &rewriter) {
  // Heads are independent: each rank attends with its heads' queries, keys
  // and values, the column-parallel projection's blocks.
  int64_t size = rewriter.getSize();
  if (failed(checkHeadsSplit(*this, getNumHeads(), getKvHeads(), getQkv(),
                             rewriter)))
    return failure();
  rewriter.getRewriter().modifyOpInPlace(*this, [&] {
    setNumHeads(getNumHeads() / size);
    if (std::optional<uint64_t> kvHeads = getKvHeads())
      setKvHeads(getLocalKvHeads(*kvHeads, size));
    getResult().setType(rewriter.getPartType(getResult().getType(), 2));
    getLse().setType(rewriter.getPartType(getLse().getType(), 1));
  });
  rewriter.setLayout(getResult(), TensorLayout::split(2));
  rewriter.setLayout(getLse(), TensorLayout::split(1));
  return success();
}

TensorLayout CausalAttentionOp::getTensorParallelSplit(unsigned index,
                                                       int64_t dim,
                                                       int64_t size) {
  return getQkvSplit(getQkv(), getNumHeads(), getKvHeads(), dim, size);
}

LogicalResult
GroupQkvOp::partitionTensorParallel(TensorParallelRewriter &rewriter) {
  // The column-parallel projection gives each rank whole groups, or its
  // team's group: their queries, keys and values make its heads'.
  int64_t size = rewriter.getSize();
  if (failed(checkHeadsSplit(*this, getNumHeads(), getKvHeads(), getQkv(),
                             rewriter)))
    return failure();
  rewriter.getRewriter().modifyOpInPlace(*this, [&] {
    setNumHeads(getNumHeads() / size);
    setKvHeads(getLocalKvHeads(getKvHeads(), size));
    getResult().setType(rewriter.getPartType(getResult().getType(), 2));
  });
  rewriter.setLayout(getResult(), TensorLayout::split(2, 3));
  return success();
}

TensorLayout GroupQkvOp::getTensorParallelSplit(unsigned index, int64_t dim,
                                                int64_t size) {
  return getQkvSplit(getQkv(), getNumHeads(), getKvHeads(), dim, size);
}

LogicalResult
RotaryOp::partitionTensorParallel(TensorParallelRewriter &rewriter) {
  // Each rank turns its heads' queries and keys, the column-parallel
  // projection's blocks, as the attention after it reads them.
  int64_t size = rewriter.getSize();
  if (failed(checkHeadsSplit(*this, getNumHeads(), getKvHeads(), getQkv(),
                             rewriter)))
    return failure();
  rewriter.getRewriter().modifyOpInPlace(*this, [&] {
    setNumHeads(getNumHeads() / size);
    if (std::optional<uint64_t> kvHeads = getKvHeads())
      setKvHeads(getLocalKvHeads(*kvHeads, size));
    getResult().setType(getQkv().getType());
  });
  rewriter.setLayout(getResult(), rewriter.getLayout(getQkv()));
  return success();
}

TensorLayout RotaryOp::getTensorParallelSplit(unsigned index, int64_t dim,
                                              int64_t size) {
  return getQkvSplit(getQkv(), getNumHeads(), getKvHeads(), dim, size);
}

LogicalResult
SwigluOp::partitionTensorParallel(TensorParallelRewriter &rewriter) {
  return partitionAlike(*this, rewriter, /*sumsOfPartials=*/false);
}

LogicalResult
GeluOp::partitionTensorParallel(TensorParallelRewriter &rewriter) {
  return partitionAlike(*this, rewriter, /*sumsOfPartials=*/false);
}

LogicalResult AddOp::partitionTensorParallel(TensorParallelRewriter &rewriter) {
  return partitionAlike(*this, rewriter, /*sumsOfPartials=*/true);
}

LogicalResult
BiasAddOp::partitionTensorParallel(TensorParallelRewriter &rewriter) {
  return partitionRowwise(*this, getInputMutable(), {&getBiasMutable()},
                          /*splitRows=*/true, rewriter);
}

//===----------------------------------------------------------------------===//
// Vector-Jacobian products
//===----------------------------------------------------------------------===//

LogicalResult BiasAddOp::buildVJP(RewriterBase &b, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  Value biasGrad =
      BiasAddGradOp::create(b, getLoc(), getBias().getType(), resultGrads[0]);
  operandGrads.assign({resultGrads[0], biasGrad});
  return success();
}

LogicalResult FanOutOp::buildVJP(RewriterBase &b, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  Value sum = shard::AllReduceOp::create(b, getLoc(), getType(), getGrid(),
                                         getGridAxes(), resultGrads[0],
                                         shard::ReductionKind::Sum);
  operandGrads.assign({sum});
  return success();
}

LogicalResult FanOutSharedOp::verify() {
  auto type = cast<RankedTensorType>(getType());
  int64_t dim = getDim();
  if (dim < 0 || dim >= type.getRank())
    return emitOpError() << "dim " << dim << " is not a dimension of " << type;
  if (getShared() < 1 || getShared() >= type.getDimSize(dim))
    return emitOpError() << "expected 0 < shared (" << getShared()
                         << ") < the extent of dimension " << dim << " ("
                         << type.getDimSize(dim) << ")";
  if (getTeams() < 1 || getTeamSize() < 2 || getGridAxes().size() != 1)
    return emitOpError("expected teams of at least two ranks on one grid "
                       "axis");
  return success();
}

LogicalResult FanOutSharedOp::buildVJP(RewriterBase &b, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value grad = resultGrads[0];
  auto type = cast<RankedTensorType>(grad.getType());
  // The shared elements go into this rank's team's slot of a tensor with
  // one slot per team, zeros elsewhere; summed over the whole group, each
  // slot is its team's sum. A collective over part of the axis would move
  // `teams` times fewer bytes; only the key/value heads' gradients pay it.
  DimSlice shared(b, type, getDim(), type.getDimSize(getDim()) - getShared(),
                  getShared());
  Value mine = shared.extract(b, loc, grad);

  SmallVector<int64_t> slotsShape = {getTeams()};
  llvm::append_range(slotsShape, shared.type.getShape());
  auto slotsType = RankedTensorType::get(slotsShape, type.getElementType());
  Value zeros = arith::ConstantOp::create(
      b, loc, cast<TypedAttr>(b.getZeroAttr(slotsType)));
  Value index =
      shard::ProcessMultiIndexOp::create(b, loc, getGrid(), getGridAxes().vec())
          .getResult()
          .front();
  Value team = arith::DivUIOp::create(
      b, loc, index, arith::ConstantIndexOp::create(b, loc, getTeamSize()));
  // The team's slot: from [team, 0, ...], one of the shared elements.
  SmallVector<OpFoldResult> slotOffsets(slotsShape.size(), b.getIndexAttr(0)),
      slotSizes = {b.getIndexAttr(1)},
      slotStrides(slotsShape.size(), b.getIndexAttr(1));
  slotOffsets[0] = team;
  llvm::append_range(slotSizes, shared.sizes);
  Value slots = tensor::InsertSliceOp::create(b, loc, mine, zeros, slotOffsets,
                                              slotSizes, slotStrides);
  Value sums =
      shard::AllReduceOp::create(b, loc, slotsType, getGrid(), getGridAxes(),
                                 slots, shard::ReductionKind::Sum);
  Value total = tensor::ExtractSliceOp::create(
      b, loc, shared.type, sums, slotOffsets, slotSizes, slotStrides);
  operandGrads.assign({shared.insert(b, loc, total, grad)});
  return success();
}
