//===- TensorParallel.cpp - The loom-tensor-parallel pass -----------------===//
//
// Megatron-LM's tensor parallelism, before differentiation. Each op of a
// layer loop's body divides itself (TensorParallelOpInterface); this pass
// keeps every value's layout, divides the parameters the ops ask for and
// inserts the collectives between one op's layout and the next's. Only
// forward collectives are built here: a reduction's and a fan-out's
// vector-Jacobian products give the backward pass their conjugates.
//
//===----------------------------------------------------------------------===//

#include "Replicas.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMTENSORPARALLEL
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// Partitions the body of one layer loop, whose slices of the stacked
/// parameters are the values it may divide.
class BodyPartitioner : public TensorParallelRewriter {
public:
  BodyPartitioner(RewriterBase &rewriter, int64_t size, StringRef grid,
                  ScanOp scan)
      : TensorParallelRewriter(rewriter, size), grid(grid), scan(scan) {
    for (BlockArgument slice : scan.getSliceArguments())
      parameters.insert(slice);
  }

  TensorLayout getLayout(Value value) override {
    return layouts.lookup_or(value, TensorLayout::replicated());
  }
  void setLayout(Value value, TensorLayout layout) override {
    layouts[value] = layout;
  }

  LogicalResult makeReplicated(OpOperand &operand) override {
    Value value = operand.get();
    TensorLayout layout = getLayout(value);
    if (layout.isSplit())
      return operand.getOwner()->emitOpError()
             << "needs operand #" << operand.getOperandNumber()
             << " whole on every rank, and tensor parallelism has split it";
    if (parameters.contains(value))
      wholeParameters.insert(value);
    if (layout.isPartial())
      setOperand(operand, sumOf(value));
    return success();
  }

  LogicalResult makeFannedOut(OpOperand &operand) override {
    Value value = operand.get();
    TensorLayout layout = getLayout(value);
    if (layout.isSplit())
      return operand.getOwner()->emitOpError()
             << "needs operand #" << operand.getOperandNumber()
             << " whole on every rank, and tensor parallelism has split it";
    if (parameters.contains(value))
      wholeParameters.insert(value);
    if (layout.isPartial())
      value = sumOf(value);
    Value &fanned = fannedOut[value];
    if (!fanned) {
      RewriterBase &b = getRewriter();
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfterValue(value);
      auto fanOut =
          FanOutOp::create(b, value.getLoc(), value, grid, {kTensorAxis});
      // Free to recompute: the backward pass saves its operand instead.
      fanOut->setAttr(LoomDialect::getRecomputeAttrName(), b.getUnitAttr());
      fanned = fanOut;
    }
    setOperand(operand, fanned);
    return success();
  }

  LogicalResult makeSplit(OpOperand &operand, int64_t dim,
                          int64_t blocks) override {
    Value value = operand.get();
    TensorLayout wanted = TensorLayout::split(dim, blocks);
    TensorLayout layout = getLayout(value);
    if (layout == wanted)
      return success();
    Operation *owner = operand.getOwner();
    auto parameter = dyn_cast<BlockArgument>(value);
    if (!parameter || !parameters.contains(parameter))
      return owner->emitOpError()
             << "needs operand #" << operand.getOperandNumber()
             << " split along dimension " << dim << " in " << blocks
             << " block(s), which is not how tensor parallelism laid it out";
    auto type = cast<RankedTensorType>(value.getType());
    if (!layout.isReplicated() || wholeParameters.contains(parameter))
      return owner->emitOpError()
             << "needs a layer parameter split along dimension " << dim
             << " that another op uses laid out otherwise";
    if (dim >= type.getRank() || type.getDimSize(dim) % (blocks * getSize()))
      return owner->emitOpError()
             << "needs a layer parameter of type " << type
             << " split along dimension " << dim << " in " << blocks
             << " block(s) among " << getSize()
             << " tensor-parallel ranks, which do not divide it";
    parameter.setType(getPartType(type, dim));
    setLayout(parameter, wanted);
    return success();
  }

  FailureOr<Value> reducePartial(Location loc, Value partial) override {
    Value sum = sumOf(partial);
    return sum;
  }

  int64_t getBlocksWanted(Value value) override {
    int64_t blocks = 1;
    for (OpOperand &use : value.getUses())
      if (auto user = dyn_cast<TensorParallelOpInterface>(use.getOwner()))
        blocks = std::max(blocks,
                          user.getTensorParallelBlocks(use.getOperandNumber()));
    return blocks;
  }

  /// Partitions every op of the body, in order; the values the body
  /// yields stay whole on every rank.
  LogicalResult run() {
    RewriterBase &b = getRewriter();
    Block &body = scan.getBodyBlock();
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    for (Operation *op : ops) {
      b.setInsertionPoint(op);
      if (auto partitioned = dyn_cast<TensorParallelOpInterface>(op)) {
        if (failed(partitioned.partitionTensorParallel(*this)))
          return failure();
        continue;
      }
      // Without a rule of its own, an op computes the same on every rank.
      for (OpOperand &operand : op->getOpOperands())
        if (failed(makeReplicated(operand)))
          return failure();
    }
    for (OpOperand &operand : scan.getYield()->getOpOperands())
      if (failed(makeReplicated(operand)))
        return failure();
    return success();
  }

  /// The layout each slice of a stacked parameter ended in.
  TensorLayout getSliceLayout(unsigned index) {
    return getLayout(scan.getSliceArguments()[index]);
  }

private:
  void setOperand(OpOperand &operand, Value value) {
    getRewriter().modifyOpInPlace(operand.getOwner(),
                                  [&] { operand.set(value); });
  }

  /// The all-reduce of a partial value (Megatron's g), built once.
  Value sumOf(Value partial) {
    Value &sum = sums[partial];
    if (!sum) {
      RewriterBase &b = getRewriter();
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfterValue(partial);
      sum = shard::AllReduceOp::create(b, partial.getLoc(), partial.getType(),
                                       grid,
                                       ArrayRef<shard::GridAxis>{kTensorAxis},
                                       partial, shard::ReductionKind::Sum);
      setLayout(sum, TensorLayout::replicated());
    }
    return sum;
  }

  StringRef grid;
  ScanOp scan;
  DenseMap<Value, TensorLayout> layouts;
  DenseMap<Value, Value> sums, fannedOut;
  /// The body's slices of the stacked parameters, and those an op uses
  /// whole.
  DenseSet<Value> parameters, wholeParameters;
};

struct TensorParallelPass
    : public loom::impl::LoomTensorParallelBase<TensorParallelPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan))
      return signalPassFailure();
    if (plan->tp == 1)
      return;
    if (plan->sequenceParallel) {
      module.emitError("sequence parallelism (sp=1) does not compile yet; "
                       "use tensor parallelism without it (sp=0)");
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> forward = getForwardToDifferentiate(
        module, "tensor parallelism divides the layers");
    if (failed(forward))
      return signalPassFailure();
    FailureOr<shard::GridOp> grid = getOrCreateGrid(module, *plan);
    if (failed(grid))
      return signalPassFailure();

    IRRewriter rewriter(&getContext());
    SmallVector<ScanOp> scans;
    forward->walk([&](ScanOp scan) { scans.push_back(scan); });
    for (ScanOp scan : scans)
      if (failed(partition(rewriter, *forward, scan, grid->getSymName(),
                           plan->tp)))
        return signalPassFailure();
    Block &entry = forward->getBody().front();
    forward->setFunctionType(
        FunctionType::get(&getContext(), entry.getArgumentTypes(),
                          forward->getFunctionType().getResults()));
  }

  /// Partitions `scan`'s body, then gives each divided parameter's argument
  /// of `forward` its part's type and its `loom.tp_split`.
  LogicalResult partition(RewriterBase &rewriter, func::FuncOp forward,
                          ScanOp scan, StringRef grid, int64_t size) {
    BodyPartitioner partitioner(rewriter, size, grid, scan);
    if (failed(partitioner.run()))
      return failure();
    for (auto [index, stacked] : llvm::enumerate(scan.getStacked())) {
      TensorLayout layout = partitioner.getSliceLayout(index);
      if (layout.isReplicated())
        continue;
      auto arg = dyn_cast<BlockArgument>(stacked);
      if (!arg || arg.getOwner() != &forward.getBody().front() ||
          !forward.getArgAttr(arg.getArgNumber(),
                              LoomDialect::getParamAttrName()) ||
          !arg.hasOneUse())
        return scan.emitOpError()
               << "divides stacked operand #" << index
               << " among the tensor-parallel ranks, which is not a "
                  "parameter of @forward read by this loop alone";
      Type slice = scan.getSliceArguments()[index].getType();
      arg.setType(ScanOp::getStackedType(slice, scan.getLength()));
      forward.setArgAttr(
          arg.getArgNumber(), LoomDialect::getTensorSplitAttrName(),
          rewriter.getDenseI64ArrayAttr({layout.dim + 1, layout.blocks}));
    }
    return success();
  }
};
} // namespace
