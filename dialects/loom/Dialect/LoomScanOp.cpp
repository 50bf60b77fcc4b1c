//===- LoomScanOp.cpp - The layer loop: loom.scan -------------------------===//
//
// loom.scan, the loop over a model's layers: its body's arguments and
// results, its verifier, and its vector-Jacobian product, a backward scan
// over the layers in reverse that recomputes or saves what it reads of the
// forward pass.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"

#include "loom/Dialect/LoomAutodiff.h"
#include "loom/Dialect/LoomOpUtils.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::detail;

//===----------------------------------------------------------------------===//
// ScanOp
//===----------------------------------------------------------------------===//

RankedTensorType ScanOp::getStackedType(Type type, int64_t length) {
  auto tensor = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape = {length};
  llvm::append_range(shape, tensor.getShape());
  return RankedTensorType::get(shape, tensor.getElementType());
}

RankedTensorType ScanOp::getSliceType(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return RankedTensorType::get(tensor.getShape().drop_front(),
                               tensor.getElementType());
}

void ScanOp::retypeBodyArguments() {
  for (auto [argument, init] : llvm::zip(getCarryArguments(), getInits()))
    argument.setType(init.getType());
  for (auto [argument, stacked] : llvm::zip(getSliceArguments(), getStacked()))
    argument.setType(getSliceType(stacked.getType()));
}

void ScanOp::retypeResults() {
  for (auto [i, value] : llvm::enumerate(getYield().getOperands()))
    getResult(i).setType(i < getNumCarries()
                             ? value.getType()
                             : getStackedType(value.getType(), getLength()));
}

YieldOp ScanOp::getYield() {
  return cast<YieldOp>(getBodyBlock().getTerminator());
}

Block::BlockArgListType ScanOp::getCarryArguments() {
  return getBodyBlock().getArguments().take_front(getNumCarries());
}

Block::BlockArgListType ScanOp::getSliceArguments() {
  return getBodyBlock().getArguments().drop_front(getNumCarries());
}

ResultRange ScanOp::getCarryResults() {
  return getResults().take_front(getNumCarries());
}

ResultRange ScanOp::getStackedResults() {
  return getResults().drop_front(getNumCarries());
}

Block &ScanOp::addBodyBlock() {
  Block *block = new Block();
  getBody().push_back(block);
  for (Value init : getInits())
    block->addArgument(init.getType(), getLoc());
  for (Value stacked : getStacked())
    block->addArgument(getSliceType(stacked.getType()), getLoc());
  return *block;
}

LogicalResult ScanOp::verify() {
  int64_t length = getLength();
  for (auto [i, stacked] : llvm::enumerate(getStacked())) {
    ArrayRef<int64_t> dims = dimsOf(stacked);
    if (dims.empty() || dims.front() != length)
      return emitOpError() << "expected stacked operand #" << i
                           << " to have a leading dimension of the length "
                           << length << ", got shape " << ShapeStr{dims};
  }
  return success();
}

LogicalResult ScanOp::verifyRegions() {
  Block &body = getBodyBlock();
  unsigned numCarries = getNumCarries();
  SmallVector<Type> expected(getInits().getTypes());
  for (Value stacked : getStacked())
    expected.push_back(getSliceType(stacked.getType()));
  if (body.getArgumentTypes() != ArrayRef<Type>(expected))
    return emitOpError() << "expected the body's arguments to be the carried "
                            "values' types then one slice per stacked "
                            "operand, got "
                         << body.getArgumentTypes();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError() << "expected the body to end in loom.yield";
  if (yield.getNumOperands() != getNumResults() ||
      yield.getNumOperands() < numCarries)
    return emitOpError() << "yields " << yield.getNumOperands()
                         << " values for " << getNumResults() << " results, "
                         << "of which " << numCarries << " are carried";
  for (auto [i, value] : llvm::enumerate(yield.getOperands())) {
    Type type = value.getType();
    Type result = getResult(i).getType();
    if (i < numCarries && (type != result || type != getInits()[i].getType()))
      return emitOpError() << "carried value #" << i << " has type "
                           << getInits()[i].getType() << " but the body yields "
                           << type << " and the op returns " << result;
    if (i >= numCarries && result != getStackedType(type, getLength()))
      return emitOpError() << "result #" << i << " must stack the yielded "
                           << type << " over " << getLength()
                           << " iterations, got " << result;
  }
  return success();
}

/// Differentiates the body into a reverse scan. The backward body starts as
/// a copy of the forward body followed by its VJP; every forward value the
/// VJP reads is then either kept in the backward body (constants, and ops
/// marked `loom.recompute`, whose operands are treated the same way) or
/// saved: the forward scan yields it, stacked over iterations, and the
/// backward scan takes the stack as one more `over` operand. The backward
/// scan carries the cotangents of the carried values and returns, stacked,
/// the cotangent of each float stacked operand (the layers' weight
/// gradients).
namespace {
/// A value the backward body of a scan reads from the forward pass: the
/// block argument standing for it there, and the forward value to save.
struct ScanSaved {
  BlockArgument argument;
  Value forwardValue;
};
} // namespace

/// Decides what the backward body of a scan recomputes and what its
/// forward pass saves: of the copies of the forward ops at the start of
/// `body` (`forwardOps`), constants and ops marked for recomputation stay,
/// each other op's used results become block arguments saved from the
/// forward values they copy (`original`), and the op goes. Forward carried
/// values (the first `numCarries` of `saved`) the VJP does not read are not
/// saved.
static LogicalResult saveForwardValues(RewriterBase &rewriter, Location loc,
                                       Block &body,
                                       ArrayRef<Operation *> forwardOps,
                                       const DenseMap<Value, Value> &original,
                                       SmallVectorImpl<ScanSaved> &saved,
                                       unsigned numCarries) {
  for (Operation *op : llvm::reverse(forwardOps)) {
    if (op->use_empty()) {
      rewriter.eraseOp(op);
      continue;
    }
    if (op->hasTrait<OpTrait::ConstantLike>() ||
        op->hasAttr(LoomDialect::getRecomputeAttrName()))
      continue;
    for (OpResult result : op->getResults()) {
      if (result.use_empty())
        continue;
      BlockArgument argument = body.addArgument(result.getType(), loc);
      rewriter.replaceAllUsesWith(result, argument);
      Value from = original.lookup(result);
      if (!from)
        return op->emitOpError("is not a copy of a forward op of the scan");
      saved.push_back({argument, from});
    }
    rewriter.eraseOp(op);
  }
  // Forward carried values the VJP does not read need not be saved.
  for (int i = numCarries - 1; i >= 0; --i) {
    if (!saved[i].argument.use_empty())
      continue;
    body.eraseArgument(saved[i].argument.getArgNumber());
    saved.erase(saved.begin() + i);
  }

  return success();
}

LogicalResult ScanOp::buildVJP(RewriterBase &rewriter, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  unsigned numCarries = getNumCarries();
  Block &forward = getBodyBlock();
  YieldOp forwardYield = getYield();
  OpBuilder::InsertPoint backwardPoint = rewriter.saveInsertionPoint();

  SmallVector<ScanSaved> saved;

  // Arguments: carried cotangents, the stacked operands' slices, the
  // cotangents of stacked results, then the saved values; the forward
  // carried values come first among those.
  auto body = std::make_unique<Block>();
  for (Value init : getInits())
    body->addArgument(init.getType(), loc);
  for (Value stacked : getStacked())
    body->addArgument(getSliceType(stacked.getType()), loc);
  SmallVector<Value> stackedGrads;
  for (auto [result, grad] :
       llvm::zip(getStackedResults(), resultGrads.drop_front(numCarries))) {
    body->addArgument(getSliceType(result.getType()), loc);
    stackedGrads.push_back(grad);
  }
  IRMapping mapping;
  for (BlockArgument carry : getCarryArguments()) {
    BlockArgument copy = body->addArgument(carry.getType(), loc);
    mapping.map(carry, copy);
    saved.push_back({copy, carry});
  }
  for (auto [slice, copy] :
       llvm::zip(getSliceArguments(),
                 body->getArguments().slice(numCarries, getStacked().size())))
    mapping.map(slice, copy);

  // The forward body, then its VJP.
  rewriter.setInsertionPointToEnd(body.get());
  DenseMap<Value, Value> original;
  size_t numForwardOps = 0;
  for (Operation &op : forward.without_terminator()) {
    Operation *copy = rewriter.clone(op, mapping);
    for (auto [from, to] : llvm::zip(op.getResults(), copy->getResults()))
      original[to] = from;
    ++numForwardOps;
  }
  SmallVector<Operation *> forwardOps;
  for (Operation &op : *body)
    forwardOps.push_back(&op);
  CotangentMap cotangents;
  for (auto [value, grad] :
       llvm::zip(forwardYield.getOperands(),
                 body->getArguments().take_front(numCarries)))
    cotangents.accumulate(rewriter, loc, mapping.lookup(value), grad);
  unsigned gradArg = numCarries + getStacked().size();
  for (Value value : forwardYield.getOperands().drop_front(numCarries))
    cotangents.accumulate(rewriter, loc, mapping.lookup(value),
                          body->getArgument(gradArg++));
  if (failed(backpropagate(rewriter, forwardOps, cotangents)))
    return failure();
  // Ops differentiated in turn (a nested scan) may have replaced
  // themselves, in place: the first ops of the block are the forward ones.
  forwardOps.clear();
  for (Operation &op : llvm::make_range(body->begin(), body->end())) {
    if (forwardOps.size() == numForwardOps)
      break;
    forwardOps.push_back(&op);
  }

  SmallVector<Value> yielded;
  auto gradOrZeros = [&](Value value) {
    Value g = cotangents.lookup(value);
    return g ? g : buildZeros(rewriter, loc, value.getType());
  };
  for (const ScanSaved &carry : saved)
    yielded.push_back(gradOrZeros(carry.argument));
  SmallVector<unsigned> floatStacked;
  for (auto [i, stacked] : llvm::enumerate(getStacked())) {
    if (!isa<FloatType>(elementTypeOf(stacked)))
      continue;
    floatStacked.push_back(i);
    yielded.push_back(gradOrZeros(body->getArgument(numCarries + i)));
  }
  YieldOp::create(rewriter, loc, yielded);

  if (failed(saveForwardValues(rewriter, loc, *body, forwardOps, original,
                               saved, numCarries)))
    return failure();

  // The forward scan, also returning the saved values.
  rewriter.setInsertionPoint(*this);
  SmallVector<Type> forwardTypes(getResultTypes());
  for (const ScanSaved &value : saved)
    forwardTypes.push_back(
        getStackedType(value.forwardValue.getType(), getLength()));
  auto newForward = ScanOp::create(rewriter, loc, forwardTypes, getInits(),
                                   getStacked(), getLength(), getReverse());
  rewriter.inlineRegionBefore(getBody(), newForward.getBody(),
                              newForward.getBody().end());
  YieldOp newYield = newForward.getYield();
  rewriter.modifyOpInPlace(newYield, [&] {
    for (const ScanSaved &value : saved)
      newYield->insertOperands(newYield->getNumOperands(), value.forwardValue);
  });
  ValueRange savedStacks = newForward.getResults().drop_front(getNumResults());

  // The backward scan, in the other direction.
  rewriter.restoreInsertionPoint(backwardPoint);
  SmallVector<Value> backwardInits(resultGrads.take_front(numCarries));
  SmallVector<Value> backwardStacked(getStacked());
  llvm::append_range(backwardStacked, stackedGrads);
  llvm::append_range(backwardStacked, savedStacks);
  SmallVector<Type> backwardTypes(getInits().getTypes());
  for (unsigned i : floatStacked)
    backwardTypes.push_back(getStacked()[i].getType());
  auto backward = ScanOp::create(rewriter, loc, backwardTypes, backwardInits,
                                 backwardStacked, getLength(), !getReverse());
  backward.getBody().push_back(body.release());

  operandGrads.assign(getNumOperands(), Value());
  for (unsigned i = 0; i < numCarries; ++i)
    operandGrads[i] = backward.getResult(i);
  for (auto [k, i] : llvm::enumerate(floatStacked))
    operandGrads[numCarries + i] = backward.getResult(numCarries + k);
  rewriter.replaceOp(*this,
                     newForward.getResults().take_front(getNumResults()));
  return success();
}
