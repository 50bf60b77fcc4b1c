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

using namespace mlir;
using namespace mlir::loom;

TensorParallelRewriter::~TensorParallelRewriter() = default;

RankedTensorType TensorParallelRewriter::getPartType(Type whole,
                                                     int64_t dim) const {
  auto type = cast<RankedTensorType>(whole);
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] /= size;
  return RankedTensorType::get(shape, type.getElementType());
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
        lastSplit          ? rewriter.makeSplit(*parameter, 0, layout.blocks)
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
  if (kvHeads) {
    // The column-parallel projection gives each rank whole groups.
    if (*kvHeads % size)
      return op->emitOpError()
             << "has " << *kvHeads
             << " key/value heads, which tensor parallelism over " << size
             << " ranks does not divide";
    if (rewriter.getLayout(qkv) != TensorLayout::split(2, 1))
      return op->emitOpError("needs its groups split among the ranks (the "
                             "output of a column-parallel projection)");
    return success();
  }
  if (rewriter.getLayout(qkv) != TensorLayout::split(2, 3))
    return op->emitOpError("needs its queries, keys and values split by "
                           "heads (the output of a column-parallel "
                           "projection)");
  return success();
}

/// The blocks a column-parallel projection makes of an attention's fused
/// queries, keys and values: one of whole groups under grouped-query
/// attention, else the queries', the keys' and the values'.
static int64_t getQkvBlocks(std::optional<int64_t> kvHeads) {
  return kvHeads ? 1 : 3;
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
    int64_t blocks = rewriter.getBlocksWanted(getResult());
    if (failed(rewriter.makeFannedOut(getInputMutable())) ||
        failed(rewriter.makeSplit(getWeightMutable(), 0, blocks)) ||
        (getBias() &&
         failed(rewriter.makeSplit(getBiasMutable()[0], 0, blocks))))
      return failure();
    b.modifyOpInPlace(*this, [&] {
      getResult().setType(rewriter.getPartType(getType(), last));
    });
    rewriter.setLayout(getResult(), TensorLayout::split(last, blocks));
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
      setKvHeads(*kvHeads / size);
    getResult().setType(rewriter.getPartType(getResult().getType(), 2));
    getLse().setType(rewriter.getPartType(getLse().getType(), 1));
  });
  rewriter.setLayout(getResult(), TensorLayout::split(2));
  rewriter.setLayout(getLse(), TensorLayout::split(1));
  return success();
}

int64_t CausalAttentionOp::getTensorParallelBlocks(unsigned index) {
  return getQkvBlocks(getKvHeads());
}

LogicalResult
GroupQkvOp::partitionTensorParallel(TensorParallelRewriter &rewriter) {
  // The column-parallel projection gives each rank whole groups: their
  // queries, keys and values make its heads'.
  int64_t size = rewriter.getSize();
  if (getKvHeads() % size)
    return emitOpError() << "has " << getKvHeads()
                         << " key/value heads, which tensor parallelism over "
                         << size << " ranks does not divide";
  if (rewriter.getLayout(getQkv()) != TensorLayout::split(2, 1))
    return emitOpError("needs its groups split among the ranks (the output "
                       "of a column-parallel projection)");
  rewriter.getRewriter().modifyOpInPlace(*this, [&] {
    setNumHeads(getNumHeads() / size);
    setKvHeads(getKvHeads() / size);
    getResult().setType(rewriter.getPartType(getResult().getType(), 2));
  });
  rewriter.setLayout(getResult(), TensorLayout::split(2, 3));
  return success();
}

int64_t GroupQkvOp::getTensorParallelBlocks(unsigned index) { return 1; }

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
      setKvHeads(*kvHeads / size);
    getResult().setType(getQkv().getType());
  });
  rewriter.setLayout(getResult(),
                     TensorLayout::split(2, getQkvBlocks(getKvHeads())));
  return success();
}

int64_t RotaryOp::getTensorParallelBlocks(unsigned index) {
  return getQkvBlocks(getKvHeads());
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
