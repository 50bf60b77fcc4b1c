//===- FuseElementwise.cpp - The loom-fuse-elementwise pass ---------------===//
//
// The lowering to linalg makes one loop per op: a bias add, its GELU, the
// widening of a bf16 operand before the op that reads it, each write a
// tensor the next one reads once. Fusing such a producer into its one
// consumer removes the tensor (a buffer of the arena, a pass over memory,
// on a GPU a kernel launch). MLIR's elementwise fusion does the rewriting;
// this pass says where: only where the fused loop computes each element
// once, no work moves into a loop, and no step needs more memory. A GEMM
// of two widened matrices reads the narrow ones: the runtime's GEMMs widen
// as they multiply.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"
#include "loom/Fusion/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMFUSEELEMENTWISE
#include "loom/Fusion/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The bytes of a statically shaped tensor; none for other values, which
/// own no buffer of their own, and an unknown size for dynamic shapes.
std::optional<int64_t> tensorBytes(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    return 0;
  if (!type.hasStaticShape() || !type.getElementType().isIntOrFloat())
    return std::nullopt;
  return getStaticBytes(type);
}

bool isReshape(Operation *op) {
  return isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(op);
}

/// Whether `op` reads its source's elements in place, each element of its
/// result one of the source's: a reshape, or a slice (the vocabulary's
/// columns of logits padded past it).
bool isView(Operation *op) {
  return isReshape(op) || isa<tensor::ExtractSliceOp>(op);
}

/// The tensor whose buffer `value` shares: itself, or the source of the
/// views it is (a layer's slice of the stack of saved activations).
Value getViewedTensor(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (!isView(def))
      break;
    value = def->getOperand(0);
  }
  return value;
}

/// Whether `value` is only read: every use, directly or through views, is
/// an input of a structured op (or a view). A destination, or anything
/// else, may update its buffer in place.
bool isOnlyRead(Value value) {
  return llvm::all_of(value.getUses(), [](OpOperand &use) {
    Operation *user = use.getOwner();
    if (isView(user))
      return isOnlyRead(user->getResult(0));
    auto structured = dyn_cast<DestinationStyleOpInterface>(user);
    return structured && structured.isDpsInput(&use);
  });
}

/// Whether `value` is read at `consumer` or after it anyway, so that
/// reading it from `consumer` instead of from its producer keeps it no
/// longer: a value of an enclosing block (an argument, a conversion
/// hoisted out of a loop) lives through the whole block, and a function's
/// argument that nothing updates in place (a parameter the optimizer
/// updates would need a copy to be read after it) through the function,
/// its caller's. A view lives as long as the tensor it views.
bool isLiveAt(Value value, Operation *consumer) {
  value = getViewedTensor(value);
  Block *block = consumer->getBlock();
  if (value.getParentBlock() != block)
    return true;
  if (auto argument = dyn_cast<BlockArgument>(value))
    if (argument.getOwner()->isEntryBlock() &&
        isa<FunctionOpInterface>(argument.getOwner()->getParentOp()) &&
        isOnlyRead(argument))
      return true;
  return llvm::any_of(value.getUsers(), [&](Operation *user) {
    Operation *ancestor = block->findAncestorOpInBlock(*user);
    return ancestor &&
           (ancestor == consumer || consumer->isBeforeInBlock(ancestor));
  });
}

/// The bytes `op` allocates for its results: its destinations that are
/// new tensors, empty or filled (a reduction's zeros).
int64_t newDestinationBytes(Operation *op) {
  int64_t bytes = 0;
  for (Value init : cast<DestinationStyleOpInterface>(op).getDpsInits()) {
    if (auto fill = init.getDefiningOp<linalg::FillOp>())
      init = fill.getDpsInits()[0];
    if (init.getDefiningOp<tensor::EmptyOp>())
      bytes += tensorBytes(init).value_or(0);
  }
  return bytes;
}

/// The bytes of `op`'s results, which fusing it into its consumer
/// removes; none where a size is unknown.
std::optional<int64_t> resultBytes(Operation *op) {
  int64_t bytes = 0;
  for (Value result : op->getResults()) {
    std::optional<int64_t> size = tensorBytes(result);
    if (!size)
      return std::nullopt;
    bytes += *size;
  }
  return bytes;
}

/// Whether any op between `producer` and `consumer` computes into a
/// buffer, or may allocate one: then a tensor kept alive from one to the
/// other adds to what is live there.
bool computesBetween(Operation *producer, Operation *consumer) {
  for (Operation *op = producer->getNextNode(); op != consumer;
       op = op->getNextNode())
    if (!isPure(op) || isa<DestinationStyleOpInterface>(op))
      return true;
  return false;
}

/// Whether fusing `producer` into `consumer` could raise the step's peak.
/// The fused loop reads the producer's operands where the consumer runs,
/// so those the producer was the last to read live until then, in place
/// of the producer's results: a gradient rounded to bf16 and widened again
/// much later must not keep its f32 original instead of the bf16 copy.
/// Where nothing runs in between, only the two loops' own moments count:
/// the fused loop holds the producer's operands and the consumer's new
/// results at once, the two loops held the producer's results with
/// either.
bool raisesPeak(Operation *producer, Operation *consumer) {
  std::optional<int64_t> removed = resultBytes(producer);
  if (!removed)
    return true;
  int64_t kept = 0;
  // The producer's destinations are its results' buffers, counted above.
  for (Value operand :
       cast<DestinationStyleOpInterface>(producer).getDpsInputs()) {
    if (isLiveAt(operand, consumer))
      continue;
    // A view the producer was the last to read keeps what it views.
    std::optional<int64_t> bytes = tensorBytes(getViewedTensor(operand));
    if (!bytes)
      return true;
    kept += *bytes;
  }
  if (kept <= *removed)
    return false;
  if (computesBetween(producer, consumer))
    return true;
  int64_t made = newDestinationBytes(consumer);
  return kept + made > std::max(kept + *removed, *removed + made);
}

/// The destinations of `op` that are `tensor.empty`s of static shape
/// defined at or after `point` in its block, which only `op` uses: they
/// move with it.
SmallVector<Operation *> getMovableInits(linalg::GenericOp op,
                                         Operation *point) {
  SmallVector<Operation *> inits;
  for (Value init : op.getDpsInits())
    if (auto empty = init.getDefiningOp<tensor::EmptyOp>();
        empty && empty->getNumOperands() == 0 && empty->hasOneUse() &&
        empty->getBlock() == point->getBlock() &&
        !empty->isBeforeInBlock(point))
      inits.push_back(empty);
  return inits;
}

/// Whether `op`, and every op nested in it, reads only values defined
/// before `point` in its block (or outside it), results of `point` itself,
/// or its own movable destinations: then `op` can run right after `point`.
bool canRunAfter(linalg::GenericOp op, Operation *point) {
  Block *block = point->getBlock();
  SmallVector<Operation *> inits = getMovableInits(op, point);
  WalkResult result = op->walk([&](Operation *nested) {
    for (Value operand : nested->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || def == point || op->isAncestor(def) ||
          llvm::is_contained(inits, def))
        continue;
      Operation *ancestor = block->findAncestorOpInBlock(*def);
      if (!ancestor || ancestor->isBeforeInBlock(point))
        continue;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return !result.wasInterrupted();
}

/// The one `CastOp` of a `linalg.generic` that only applies it to its one
/// operand, elementwise, if `op` is one.
template <typename CastOp> CastOp getElementwiseCast(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  if (!generic || generic.getNumDpsInputs() != 1 ||
      generic.getNumDpsInits() != 1 ||
      generic.getNumLoops() != generic.getNumParallelLoops() ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return {};
  // The whole tensor: the same shape in and out.
  auto input = dyn_cast<ShapedType>(generic.getDpsInputs()[0].getType());
  auto init = dyn_cast<ShapedType>(generic.getDpsInits()[0].getType());
  if (!input || !init || input.getShape() != init.getShape())
    return {};
  Block *body = generic.getBody();
  auto cast = dyn_cast<CastOp>(body->front());
  auto yield = dyn_cast<linalg::YieldOp>(body->getTerminator());
  if (!cast || &body->front() != yield->getPrevNode() ||
      cast.getIn() != body->getArgument(0) ||
      yield.getValues() != ValueRange{cast.getResult()})
    return {};
  return cast;
}

/// The narrow tensor a `linalg.generic` only widens to f32 (elementwise,
/// the body one `arith.extf`), if `value` is its result.
Value getWidenedSource(Value value) {
  Operation *op = value.getDefiningOp();
  return getElementwiseCast<arith::ExtFOp>(op)
             ? cast<linalg::GenericOp>(op).getDpsInputs()[0]
             : Value();
}

/// The narrow matrix `value` widens: a widened tensor, or the rows of one
/// (a collapse of its leading dimensions, how linear maps read
/// activations). Null when it is neither.
Value getNarrowMatrix(Value value) {
  if (Value source = getWidenedSource(value))
    return source;
  auto rows = value.getDefiningOp<tensor::CollapseShapeOp>();
  return rows ? getWidenedSource(rows.getSrc()) : Value();
}

/// `value` read from `narrow`, the matrix getNarrowMatrix found: the rows
/// of a widened activation become the rows of the narrow one.
Value readNarrow(PatternRewriter &rewriter, Value value, Value narrow) {
  auto rows = value.getDefiningOp<tensor::CollapseShapeOp>();
  if (!rows || getWidenedSource(value))
    return narrow;
  return tensor::CollapseShapeOp::create(rewriter, rows.getLoc(), narrow,
                                         rows.getReassociationIndices());
}

/// The most operations per element of a loop cheap enough to compute again
/// for every element a broadcast of it spans: a conversion, a row's mean
/// from its sum, its reciprocal standard deviation from its variance.
constexpr unsigned kCheapOps = 4;

/// Whether `op` is an all-parallel loop that computes each element from
/// its operands' elements alone, in at most kCheapOps arithmetic
/// operations.
bool isCheapElementwise(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  if (!generic || !generic.hasPureTensorSemantics() ||
      generic.getNumDpsInits() != 1 ||
      generic.getNumLoops() != generic.getNumParallelLoops() ||
      generic.payloadUsesValueFromOperand(generic.getDpsInitOperand(0)))
    return false;
  unsigned ops = 0;
  for (Operation &inner : generic.getBody()->without_terminator()) {
    if (!isa<arith::ArithDialect, math::MathDialect>(inner.getDialect()))
      return false;
    ++ops;
  }
  return ops <= kCheapOps;
}

/// Whether fusing the producer of `operand` into its consumer computes
/// nothing twice and moves nothing into a loop: the consumer is the
/// producer's only user and reads each element once, unless the producer
/// is cheap (a widening, a row's statistic), which costs less than loading
/// its result; both lie in one block, so that nothing hoisted out of a
/// loop (the parameters' conversions) moves back in.
bool computesOnce(OpOperand *operand) {
  Operation *producer = operand->get().getDefiningOp();
  Operation *consumer = operand->getOwner();
  auto structured = dyn_cast<linalg::LinalgOp>(consumer);
  return producer && structured &&
         (structured.getMatchingIndexingMap(operand).isPermutation() ||
          isCheapElementwise(producer)) &&
         producer->getBlock() == consumer->getBlock() &&
         llvm::all_of(producer->getUsers(),
                      [&](Operation *user) { return user == consumer; });
}

/// Whether the producer of `operand` may be fused into its consumer: it
/// computes nothing twice, and the step's peak cannot rise for it.
bool isFusible(OpOperand *operand) {
  return computesOnce(operand) &&
         !raisesPeak(operand->get().getDefiningOp(), operand->getOwner());
}

/// A consumer that other computations separate from its one producer (a
/// layer norm's input gradient, then the roundings of its weight's and
/// bias's gradients, then the residual add that reads the input gradient)
/// moves up to run right after the producer, where the two then fuse:
/// the fused loop reads the producer's operands where the producer did,
/// and holds the consumer's new results in place of the producer's, which
/// are never written. That cannot raise the peak when the consumer's new
/// results weigh no more than the producer's: then neither the fused loop
/// nor any op it moved past holds more than before. Only a consumer that
/// MLIR's fusion takes, whose destinations are all new, moves: it must not
/// run early without fusing, nor write early into a tensor the ops it
/// moves past read.
bool canHoist(linalg::GenericOp producer, linalg::GenericOp consumer) {
  if (producer->use_empty() || !consumer ||
      producer.getNumLoops() != producer.getNumParallelLoops() ||
      !consumer.hasPureTensorSemantics() ||
      consumer->getBlock() != producer->getBlock() ||
      !producer->isBeforeInBlock(consumer))
    return false;
  for (OpOperand &use : producer->getUses())
    if (use.getOwner() != consumer || !computesOnce(&use) ||
        !linalg::areElementwiseOpsFusable(&use))
      return false;
  std::optional<int64_t> removed = resultBytes(producer);
  return removed &&
         getMovableInits(consumer, producer).size() ==
             consumer.getNumDpsInits() &&
         newDestinationBytes(consumer) <= *removed &&
         computesBetween(producer, consumer) && canRunAfter(consumer, producer);
}

/// Moves up each consumer canHoist allows; whether it moved any.
bool hoistConsumers(Operation *root) {
  SmallVector<std::pair<linalg::GenericOp, linalg::GenericOp>> pairs;
  root->walk([&](linalg::GenericOp producer) {
    if (!producer->use_empty())
      if (auto consumer = dyn_cast<linalg::GenericOp>(*producer->user_begin()))
        pairs.push_back({producer, consumer});
  });
  bool moved = false;
  for (auto [producer, consumer] : pairs) {
    // Checked where the ops are now: an earlier move may have moved either.
    if (!canHoist(producer, consumer))
      continue;
    Operation *point = producer;
    for (Operation *init : getMovableInits(consumer, producer)) {
      init->moveAfter(point);
      point = init;
    }
    consumer->moveAfter(point);
    moved = true;
  }
  return moved;
}

/// A cheap loop that several loops of its block read through broadcasts
/// (a row's mean, read by the layer norm's gradient twice) gets a copy
/// before each reader but the first, so that each can fuse its own: the
/// result is never written, and its operands are as small as it is.
void copyCheapProducers(Operation *root) {
  SmallVector<linalg::GenericOp> producers;
  root->walk([&](linalg::GenericOp op) {
    if (isCheapElementwise(op) && !op->use_empty() && !op->hasOneUse())
      producers.push_back(op);
  });
  for (linalg::GenericOp producer : producers) {
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : producer->getResult(0).getUses())
      uses.push_back(&use);
    // Directly, or through reshapes that only it reads (the rows' statistics
    // expanded to the activation's leading dimensions).
    bool broadcastReaders = llvm::all_of(uses, [&](OpOperand *use) {
      while (isReshape(use->getOwner()) && use->getOwner()->hasOneUse())
        use = &*use->getOwner()->getResult(0).use_begin();
      auto reader = dyn_cast<linalg::GenericOp>(use->getOwner());
      return reader && reader->getBlock() == producer->getBlock() &&
             reader.isDpsInput(use) &&
             !reader.getMatchingIndexingMap(use).isPermutation();
    });
    if (!broadcastReaders)
      continue;
    for (OpOperand *use : ArrayRef(uses).drop_front()) {
      OpBuilder b(use->getOwner());
      IRMapping mapping;
      // A destination of its own, which nothing else then shares.
      Value init = producer.getDpsInits()[0];
      if (auto empty = init.getDefiningOp<tensor::EmptyOp>())
        mapping.map(init, b.clone(*empty)->getResult(0));
      use->set(b.clone(*producer, mapping)->getResult(0));
    }
  }
}

/// Whether the elementwise loop producing `operand`, the source of an
/// expanding reshape (the rows of a layer norm or a product back in the
/// activation's shape), should compute in the reshaped shape instead, so
/// that the one loop reading the reshaped value (its rounding to bf16, the
/// residual add) can take it in. Other reshapes stay where they are.
bool isReshapedForFusion(OpOperand *operand) {
  auto reshape = dyn_cast<tensor::ExpandShapeOp>(operand->getOwner());
  auto producer = operand->get().getDefiningOp<linalg::GenericOp>();
  if (!reshape || !producer || !producer->hasOneUse() ||
      producer.getNumLoops() != producer.getNumParallelLoops() ||
      !reshape->hasOneUse())
    return false;
  OpOperand &use = *reshape->use_begin();
  auto consumer = dyn_cast<linalg::GenericOp>(use.getOwner());
  return consumer && consumer->getBlock() == producer->getBlock() &&
         (consumer.getMatchingIndexingMap(&use).isPermutation() ||
          isCheapElementwise(producer));
}

/// A product of two matrices widened from one narrow type into f32 reads
/// the narrow matrices: its GEMM widens as it multiplies (cuBLASLt's bf16
/// GEMMs on a GPU, the runtime's blocks on the CPU), and the f32 copies go
/// when nothing else reads them. Each operand keeps its own: a copy read
/// by other loops stays, for them.
struct MatmulReadsNarrowOperands : OpRewritePattern<linalg::MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::MatmulOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() ||
        !getElementTypeOrSelf(op.getDpsInits()[0].getType()).isF32())
      return failure();
    Value lhs = op.getDpsInputs()[0], rhs = op.getDpsInputs()[1];
    Value a = getNarrowMatrix(lhs), b = getNarrowMatrix(rhs);
    if (!a || !b ||
        getElementTypeOrSelf(a.getType()) != getElementTypeOrSelf(b.getType()))
      return failure();
    rewriter.setInsertionPoint(op);
    a = readNarrow(rewriter, lhs, a);
    b = readNarrow(rewriter, rhs, b);
    // Built anew: a named op's body takes its operands' element types.
    rewriter.replaceOpWithNewOp<linalg::MatmulOp>(
        op, op->getResultTypes(), ValueRange{a, b}, op.getDpsInits(),
        ArrayRef<NamedAttribute>{
            rewriter.getNamedAttr("indexing_maps", op.getIndexingMaps())});
    return success();
  }
};

/// `value`, of another element type than `view`'s source, reshaped or
/// sliced as `view` (isView) views its source.
Value viewLike(OpBuilder &b, Operation *view, Value value) {
  auto type = cast<RankedTensorType>(view->getResult(0).getType())
                  .clone(getElementTypeOrSelf(value.getType()));
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(view))
    return tensor::ExtractSliceOp::create(
        b, slice.getLoc(), type, value, slice.getMixedOffsets(),
        slice.getMixedSizes(), slice.getMixedStrides());
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(view))
    return tensor::CollapseShapeOp::create(b, view->getLoc(), type, value,
                                           collapse.getReassociationIndices());
  auto expand = cast<tensor::ExpandShapeOp>(view);
  return tensor::ExpandShapeOp::create(b, view->getLoc(), type, value,
                                       expand.getReassociationIndices(),
                                       expand.getMixedOutputShape());
}

/// The single user of `value` and the reshapes before it, if `value` has
/// one user and so has each reshape.
Operation *soleUserThroughReshapes(Value value,
                                   SmallVectorImpl<Operation *> &reshapes) {
  while (value.hasOneUse()) {
    Operation *user = *value.getUsers().begin();
    if (!isReshape(user))
      return user;
    reshapes.push_back(user);
    value = user->getResult(0);
  }
  return nullptr;
}

/// The `arith.truncf` of a `linalg.generic` that only narrows its one
/// operand elementwise to `type`, if `op` is one.
arith::TruncFOp getNarrowing(Operation *op, Type type) {
  arith::TruncFOp truncate = getElementwiseCast<arith::TruncFOp>(op);
  return truncate && truncate.getType() == type ? truncate : arith::TruncFOp();
}

/// How a widened tensor is read where it is used: as a loop's operand
/// (each element once), by a `tensor.extract`, or as the destination of a
/// loop whose result is only narrowed back (the cross-entropy's gradient,
/// written over the logits).
struct WidenedUse {
  enum Kind { Operand, Extract, NarrowedDestination } kind;
  OpOperand *use;
  /// The views (isView) from the widened tensor to the use.
  SmallVector<Operation *> views;
  /// For a destination: the reshapes of the loop's result, and the loop
  /// that narrows it.
  SmallVector<Operation *> resultReshapes = {};
  Operation *narrowing = nullptr;
};

/// Classifies the uses of `value` (a widened tensor, or a view of one)
/// into `uses`; false when one is of no kind above, or lies outside
/// `block`.
bool classifyWidenedUses(Value value, Block *block, Type narrowType,
                         SmallVector<Operation *> views,
                         SmallVectorImpl<WidenedUse> &uses) {
  for (OpOperand &use : value.getUses()) {
    Operation *owner = use.getOwner();
    if (!block->findAncestorOpInBlock(*owner))
      return false;
    if (isView(owner)) {
      // Static shapes, which the widenings made for the uses copy.
      if (owner->getBlock() != block ||
          !cast<RankedTensorType>(owner->getResult(0).getType())
               .hasStaticShape())
        return false;
      SmallVector<Operation *> chain(views);
      chain.push_back(owner);
      if (!classifyWidenedUses(owner->getResult(0), block, narrowType, chain,
                               uses))
        return false;
      continue;
    }
    if (isa<tensor::ExtractOp>(owner)) {
      uses.push_back({WidenedUse::Extract, &use, views});
      continue;
    }
    auto generic = dyn_cast<linalg::GenericOp>(owner);
    if (!generic || generic->getBlock() != block ||
        !generic.hasPureTensorSemantics())
      return false;
    // Read through a broadcast, each element is widened once per element
    // the broadcast spans, which costs less than loading it wide.
    if (generic.isDpsInput(&use)) {
      uses.push_back({WidenedUse::Operand, &use, views});
      continue;
    }
    // A destination: the loop must compute each element apart (all its
    // loops parallel, each writing its own element), so that rounding its
    // results once at the end is rounding each.
    WidenedUse destination{WidenedUse::NarrowedDestination, &use, views};
    if (generic.getNumDpsInits() != 1 ||
        generic.getNumLoops() != generic.getNumParallelLoops() ||
        !generic.getMatchingIndexingMap(&use).isPermutation())
      return false;
    destination.narrowing = soleUserThroughReshapes(generic->getResult(0),
                                                    destination.resultReshapes);
    if (!getNarrowing(destination.narrowing, narrowType))
      return false;
    uses.push_back(std::move(destination));
  }
  return true;
}

/// A widening whose f32 copy several loops read (the logits, widened for
/// the loss's maximum, its sum and its target's logit) is dissolved into
/// its uses when each can read the narrow tensor instead: a loop's operand
/// gets a widening of its own, which the elementwise fusion then merges
/// into it; a `tensor.extract` widens the element it reads; and a loop
/// computing into the copy, whose result is only narrowed back (the
/// loss's gradient), computes into the narrow tensor, widening each
/// element it reads and narrowing each it writes. Every value is the same,
/// bit for bit; the f32 copy, its pass over memory and its buffer go.
struct DissolveWidening : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    Value narrow = getWidenedSource(op->getResult(0));
    // Static shapes, which the widenings and reshapes made here copy.
    if (!narrow || op->getResult(0).use_empty() ||
        !cast<RankedTensorType>(narrow.getType()).hasStaticShape())
      return failure();
    Type narrowType = getElementTypeOrSelf(narrow.getType());
    SmallVector<WidenedUse> uses;
    if (!classifyWidenedUses(op->getResult(0), op->getBlock(), narrowType, {},
                             uses))
      return failure();
    // One loop reading the copy directly is the elementwise fusion's.
    if (uses.size() == 1 && uses.front().kind == WidenedUse::Operand &&
        uses.front().views.empty())
      return failure();
    // A loop that computes into the copy is rebuilt: it must not read the
    // copy otherwise too.
    for (WidenedUse &destination : uses)
      if (destination.kind == WidenedUse::NarrowedDestination)
        for (WidenedUse &other : uses)
          if (&other != &destination &&
              destination.use->getOwner()->isAncestor(other.use->getOwner()))
            return failure();
    Block *block = op->getBlock();
    for (WidenedUse &use : uses) {
      Operation *owner = use.use->getOwner();
      Operation *anchor = block->findAncestorOpInBlock(*owner);
      rewriter.setInsertionPoint(anchor);
      Value view = narrow;
      for (Operation *through : use.views)
        view = viewLike(rewriter, through, view);
      switch (use.kind) {
      case WidenedUse::Operand: {
        Value widened = widen(rewriter, owner->getLoc(), view,
                              getElementTypeOrSelf(use.use->get().getType()));
        rewriter.modifyOpInPlace(owner, [&] { use.use->set(widened); });
        break;
      }
      case WidenedUse::Extract: {
        auto extract = cast<tensor::ExtractOp>(owner);
        rewriter.setInsertionPoint(extract);
        Value element = tensor::ExtractOp::create(rewriter, extract.getLoc(),
                                                  view, extract.getIndices());
        rewriter.replaceOpWithNewOp<arith::ExtFOp>(extract, extract.getType(),
                                                   element);
        break;
      }
      case WidenedUse::NarrowedDestination:
        computeIntoNarrow(rewriter, cast<linalg::GenericOp>(owner), view, use);
        break;
      }
    }
    // The views of the copy, then the copy, have no users left.
    eraseDeadViews(rewriter, op->getResult(0));
    rewriter.eraseOp(op);
    return success();
  }

  /// Erases the reshapes and slices of `value` (and theirs) that nothing
  /// reads.
  static void eraseDeadViews(PatternRewriter &rewriter, Value value) {
    for (Operation *user : llvm::make_early_inc_range(value.getUsers())) {
      if (!isView(user))
        continue;
      eraseDeadViews(rewriter, user->getResult(0));
      if (user->use_empty())
        rewriter.eraseOp(user);
    }
  }

  /// An elementwise widening of `narrow` into `type`.
  static Value widen(OpBuilder &b, Location loc, Value narrow, Type type) {
    auto narrowType = cast<RankedTensorType>(narrow.getType());
    Value empty = tensor::EmptyOp::create(b, loc, narrowType.getShape(), type);
    unsigned rank = narrowType.getRank();
    SmallVector<AffineMap> maps(2, b.getMultiDimIdentityMap(rank));
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    return linalg::GenericOp::create(
               b, loc, empty.getType(), narrow, empty, maps, iterators,
               [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
                 linalg::YieldOp::create(
                     nested, nestedLoc,
                     arith::ExtFOp::create(nested, nestedLoc, type, args[0])
                         .getResult());
               })
        .getResult(0);
  }

  /// `loop`, whose destination is the widened copy, computed into `narrow`
  /// instead; the narrowing of its result is replaced by the new result.
  static void computeIntoNarrow(PatternRewriter &rewriter,
                                linalg::GenericOp loop, Value narrow,
                                WidenedUse &use) {
    Type narrowType = getElementTypeOrSelf(narrow.getType());
    rewriter.setInsertionPoint(loop);
    auto computed = linalg::GenericOp::create(
        rewriter, loop.getLoc(), TypeRange{narrow.getType()},
        loop.getDpsInputs(), ValueRange{narrow}, loop.getIndexingMapsArray(),
        loop.getIteratorTypesArray());
    rewriter.inlineRegionBefore(loop.getRegion(), computed.getRegion(),
                                computed.getRegion().begin());
    Block *body = computed.getBody();
    BlockArgument wide = body->getArguments().back();
    BlockArgument element = body->addArgument(narrowType, wide.getLoc());
    rewriter.setInsertionPointToStart(body);
    Value widened =
        arith::ExtFOp::create(rewriter, wide.getLoc(), wide.getType(), element);
    rewriter.replaceAllUsesWith(wide, widened);
    body->eraseArgument(wide.getArgNumber());
    // Rounded as the narrowing rounded.
    auto yield = cast<linalg::YieldOp>(body->getTerminator());
    arith::TruncFOp truncate =
        getNarrowing(use.narrowing, getElementTypeOrSelf(narrow.getType()));
    IRMapping mapping;
    mapping.map(truncate.getIn(), yield.getValues()[0]);
    rewriter.setInsertionPoint(yield);
    Value rounded = rewriter.clone(*truncate, mapping)->getResult(0);
    rewriter.modifyOpInPlace(yield, [&] { yield->setOperand(0, rounded); });
    // The narrowing's result, reshaped as the loop's was on its way there.
    rewriter.setInsertionPoint(use.narrowing);
    Value result = computed.getResult(0);
    for (Operation *reshape : use.resultReshapes)
      result = viewLike(rewriter, reshape, result);
    rewriter.replaceOp(use.narrowing, result);
    for (Operation *reshape : llvm::reverse(use.resultReshapes))
      rewriter.eraseOp(reshape);
    rewriter.eraseOp(loop);
  }
};

struct FuseElementwisePass
    : loom::impl::LoomFuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    // First the widenings that several ops read, and the GEMMs of widened
    // matrices, which read the narrow ones; then the elementwise fusion,
    // which would otherwise merge a narrowing with the loop that computes
    // into a widened copy before that loop could compute into the narrow
    // tensor.
    RewritePatternSet narrow(&getContext());
    narrow.add<MatmulReadsNarrowOperands, DissolveWidening>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(narrow))))
      return signalPassFailure();
    copyCheapProducers(getOperation());
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, isFusible);
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns,
                                                      isReshapedForFusion);
    FrozenRewritePatternSet fusion(std::move(patterns));
    // Fusing a loop with its rounding can make it light enough to move up
    // to its producer, and the two then fuse in turn.
    do {
      if (failed(applyPatternsGreedily(getOperation(), fusion)))
        return signalPassFailure();
    } while (hoistConsumers(getOperation()));
  }
};
} // namespace
