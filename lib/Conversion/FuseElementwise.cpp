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

#include "Loom/LoomDialect.h"
#include "loom/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMFUSEELEMENTWISE
#include "loom/Conversion/Passes.h.inc"
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

/// Whether `value` is read at `consumer` or after it anyway, so that
/// reading it from `consumer` instead of from its producer keeps it no
/// longer: a value of an enclosing block (an argument, a conversion
/// hoisted out of a loop) lives through the whole block.
bool isLiveAt(Value value, Operation *consumer) {
  Block *block = consumer->getBlock();
  if (value.getParentBlock() != block)
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
  int64_t removed = 0, kept = 0;
  for (Value result : producer->getResults()) {
    std::optional<int64_t> bytes = tensorBytes(result);
    if (!bytes)
      return true;
    removed += *bytes;
  }
  // The producer's destinations are its results' buffers, counted above.
  for (Value operand :
       cast<DestinationStyleOpInterface>(producer).getDpsInputs()) {
    if (isLiveAt(operand, consumer))
      continue;
    std::optional<int64_t> bytes = tensorBytes(operand);
    if (!bytes)
      return true;
    kept += *bytes;
  }
  if (kept <= removed)
    return false;
  if (computesBetween(producer, consumer))
    return true;
  int64_t made = newDestinationBytes(consumer);
  return kept + made > std::max(kept + removed, removed + made);
}

/// Whether the producer of `operand` may be fused into its consumer: the
/// consumer is the producer's only user and reads each element once (no
/// broadcast, which the fused loop would recompute per element it spans),
/// so nothing is computed twice; both lie in one block, so that nothing
/// hoisted out of a loop (the parameters' conversions) moves back in; and
/// the step's peak cannot rise for it.
bool isFusible(OpOperand *operand) {
  Operation *producer = operand->get().getDefiningOp();
  Operation *consumer = operand->getOwner();
  auto structured = dyn_cast<linalg::LinalgOp>(consumer);
  return producer && structured &&
         structured.getMatchingIndexingMap(operand).isPermutation() &&
         producer->getBlock() == consumer->getBlock() &&
         llvm::all_of(producer->getUsers(),
                      [&](Operation *user) { return user == consumer; }) &&
         !raisesPeak(producer, consumer);
}

/// The narrow tensor a `linalg.generic` only widens to f32 (elementwise,
/// the body one `arith.extf`), if `value` is its result.
Value getWidenedSource(Value value) {
  auto generic = value.getDefiningOp<linalg::GenericOp>();
  if (!generic || generic.getNumDpsInputs() != 1 ||
      generic.getNumDpsInits() != 1 ||
      generic.getNumLoops() != generic.getNumParallelLoops() ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return {};
  Block *body = generic.getBody();
  auto extend = dyn_cast<arith::ExtFOp>(body->front());
  auto yield = dyn_cast<linalg::YieldOp>(body->getTerminator());
  if (!extend || &body->front() != yield->getPrevNode() ||
      extend.getIn() != body->getArgument(0) ||
      yield.getValues() != ValueRange{extend.getResult()})
    return {};
  return generic.getDpsInputs()[0];
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

struct FuseElementwisePass
    : loom::impl::LoomFuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, isFusible);
    patterns.add<MatmulReadsNarrowOperands>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
