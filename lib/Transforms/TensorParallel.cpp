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
/// Partitions @forward: its ops in order, the layer loop's body as part of
/// it. The parameters are the function's `loom.param` arguments and the
/// loop body's slices of them.
class Partitioner : public TensorParallelRewriter {
public:
  Partitioner(RewriterBase &rewriter, int64_t size, shard::GridOp grid,
              func::FuncOp forward, bool sequenceParallel)
      : TensorParallelRewriter(rewriter, size), grid(grid), forward(forward),
        sequenceParallel(sequenceParallel) {
    for (BlockArgument arg : forward.getArguments())
      if (forward.getArgAttr(arg.getArgNumber(),
                             LoomDialect::getParamAttrName()))
        parameters.insert(arg);
  }

  TensorLayout getLayout(Value value) override {
    return layouts.lookup_or(value, TensorLayout::replicated());
  }
  void setLayout(Value value, TensorLayout layout) override {
    layouts[value] = layout;
  }
  FlatSymbolRefAttr getGrid() override {
    return FlatSymbolRefAttr::get(grid.getSymNameAttr());
  }
  DenseI16ArrayAttr getGridAxes() override {
    return getRewriter().getDenseI16ArrayAttr({kTensorAxis});
  }
  Value buildIndexInGroup(Location loc) override {
    return shard::ProcessMultiIndexOp::create(
               getRewriter(), loc, grid.getSymName(),
               ArrayRef<shard::GridAxis>{kTensorAxis})
        .getResult()
        .front();
  }

  LogicalResult makeReplicated(OpOperand &operand) override {
    Value value = operand.get();
    TensorLayout layout = getLayout(value);
    if (failed(useWhole(operand)))
      return failure();
    if (layout.isPartial())
      setOperand(operand, sumOf(value));
    return success();
  }

  LogicalResult makeFannedOut(OpOperand &operand) override {
    Value value = operand.get();
    TensorLayout layout = getLayout(value);
    if (layout == sequenceLayout() && sequenceParallel) {
      // The sequence gathered: the all-gather's conjugate, a
      // reduce-scatter, sums the ranks' cotangents as a fan-out's would.
      Value &gathered = fannedOut[value];
      if (!gathered) {
        RewriterBase &b = getRewriter();
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointAfterValue(value);
        auto type = cast<RankedTensorType>(value.getType());
        SmallVector<int64_t> shape(type.getShape());
        shape[kSequenceDim] *= getSize();
        gathered = shard::AllGatherOp::create(
            b, value.getLoc(),
            RankedTensorType::get(shape, type.getElementType()),
            grid.getSymName(), ArrayRef<shard::GridAxis>{kTensorAxis}, value,
            APInt(64, kSequenceDim));
        setLayout(gathered, TensorLayout::replicated());
      }
      setOperand(operand, gathered);
      return success();
    }
    if (failed(useWhole(operand)))
      return failure();
    if (layout.isPartial())
      value = sumOf(value);
    Value &fanned = fannedOut[value];
    if (!fanned) {
      RewriterBase &b = getRewriter();
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfterValue(value);
      auto fanOut = FanOutOp::create(b, value.getLoc(), value,
                                     grid.getSymName(), {kTensorAxis});
      // Free to recompute: a layer's backward pass saves its operand
      // instead.
      if (fanOut->getParentOfType<ScanOp>())
        fanOut->setAttr(LoomDialect::getRecomputeAttrName(), b.getUnitAttr());
      fanned = fanOut;
    }
    setOperand(operand, fanned);
    return success();
  }

  LogicalResult makeSplit(OpOperand &operand, TensorLayout wanted) override {
    if (getLayout(operand.get()) != wanted &&
        failed(divideParameter(operand, wanted)))
      return failure();
    if (wanted.shared && parameters.contains(operand.get()))
      setOperand(operand, fanOutShared(operand.get(), wanted));
    return success();
  }

  /// Divides the parameter `operand` reads as `wanted` says.
  LogicalResult divideParameter(OpOperand &operand, TensorLayout wanted) {
    Value value = operand.get();
    TensorLayout layout = getLayout(value);
    Operation *owner = operand.getOwner();
    auto parameter = dyn_cast<BlockArgument>(value);
    auto described = [&](InFlightDiagnostic diag) -> InFlightDiagnostic {
      diag << " split along dimension " << wanted.dim << " in " << wanted.blocks
           << " block(s)";
      if (wanted.shared)
        diag << " shared by teams of ranks (the last " << wanted.shared
             << " elements of each)";
      return diag;
    };
    if (!parameter || !parameters.contains(parameter))
      return described(owner->emitOpError()
                       << "needs operand #" << operand.getOperandNumber())
             << ", which is not how tensor parallelism laid it out";
    auto type = cast<RankedTensorType>(value.getType());
    if (!layout.isReplicated() || wholeParameters.contains(parameter))
      return owner->emitOpError()
             << "needs a parameter split along dimension " << wanted.dim
             << " that another op uses laid out otherwise";
    if (wanted.dim >= type.getRank() ||
        wanted.getPartExtent(type.getDimSize(wanted.dim), getSize()) < 0)
      return described(owner->emitOpError()
                       << "needs a parameter of type " << type)
             << " among " << getSize()
             << " tensor-parallel ranks, which do not divide it";
    parameter.setType(getPartType(type, wanted));
    setLayout(parameter, wanted);
    return success();
  }

  FailureOr<Value> reducePartial(Location loc, Value partial) override {
    if (!sequenceParallel)
      return sumOf(partial);
    // Sequence parallelism: each rank keeps the sum of its slice of the
    // sequence (the volume of an all-reduce, in half the steps).
    auto type = cast<RankedTensorType>(partial.getType());
    if (type.getRank() < 2 || type.getDimSize(kSequenceDim) % getSize())
      return emitError(loc) << "sequence parallelism over " << getSize()
                            << " ranks cannot divide the sequence of " << type;
    RewriterBase &b = getRewriter();
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfterValue(partial);
    Value slice = shard::ReduceScatterOp::create(
        b, loc, getPartType(type, kSequenceDim), grid.getSymName(),
        ArrayRef<shard::GridAxis>{kTensorAxis}, partial,
        shard::ReductionKind::Sum, APInt(64, kSequenceDim));
    setLayout(slice, sequenceLayout());
    return slice;
  }

  /// Partitions the function; every value it returns is whole on every
  /// rank. Divided parameters get their part's type and `loom.tp_split`.
  LogicalResult run() {
    if (failed(partition(forward.getBody().front())))
      return failure();
    for (BlockArgument arg : forward.getArguments()) {
      TensorLayout layout = getLayout(arg);
      if (layout.isSplit())
        forward.setArgAttr(
            arg.getArgNumber(), LoomDialect::getTensorSplitAttrName(),
            getRewriter().getDenseI64ArrayAttr(
                layout.shared ? ArrayRef<int64_t>{layout.dim, layout.blocks,
                                                  layout.shared}
                              : ArrayRef<int64_t>{layout.dim, layout.blocks}));
    }
    forward.setFunctionType(FunctionType::get(
        forward.getContext(), forward.getBody().getArgumentTypes(),
        forward.getFunctionType().getResults()));
    return success();
  }

private:
  /// [batch, sequence, ...]: activations' sequence dimension.
  static constexpr int64_t kSequenceDim = 1;
  static TensorLayout sequenceLayout() {
    return TensorLayout::split(kSequenceDim);
  }

  /// The layout a layer loop carries its values in: whole, or split along
  /// the sequence under sequence parallelism.
  TensorLayout carriedLayout() const {
    return sequenceParallel ? sequenceLayout() : TensorLayout::replicated();
  }
  LogicalResult makeCarried(OpOperand &operand) {
    if (!sequenceParallel)
      return makeReplicated(operand);
    TensorLayout layout = getLayout(operand.get());
    if (layout == sequenceLayout())
      return success();
    if (!layout.isPartial())
      return operand.getOwner()->emitOpError()
             << "carries operand #" << operand.getOperandNumber()
             << " through the layers, which sequence parallelism needs split "
                "along the sequence or as partial sums to scatter";
    FailureOr<Value> slice =
        reducePartial(operand.get().getLoc(), operand.get());
    if (failed(slice))
      return failure();
    setOperand(operand, *slice);
    return success();
  }

  /// Partitions the ops of `block` in order, then makes what its
  /// terminator returns whole on every rank, or what it yields laid out as
  /// the layer loop carries it.
  LogicalResult partition(Block &block) {
    RewriterBase &b = getRewriter();
    SmallVector<Operation *> ops;
    for (Operation &op : block.without_terminator())
      ops.push_back(&op);
    for (Operation *op : ops) {
      b.setInsertionPoint(op);
      if (auto scan = dyn_cast<ScanOp>(op)) {
        if (failed(partition(scan)))
          return failure();
        continue;
      }
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
    Operation *terminator = block.getTerminator();
    auto scan = dyn_cast<ScanOp>(block.getParentOp());
    for (OpOperand &operand : terminator->getOpOperands()) {
      bool carried = scan && operand.getOperandNumber() < scan.getNumCarries();
      if (failed(carried ? makeCarried(operand) : makeReplicated(operand)))
        return failure();
    }
    return success();
  }

  /// A layer loop: the carried values enter whole, the body's slices of the
  /// stacked parameters are parameters, and a divided slice divides the
  /// stacked operand (a parameter of the function) along the same
  /// dimension of each layer.
  LogicalResult partition(ScanOp scan) {
    for (auto [init, carry, result] :
         llvm::zip(scan.getInitsMutable(), scan.getCarryArguments(),
                   scan.getCarryResults())) {
      if (failed(makeCarried(init)))
        return failure();
      carry.setType(init.get().getType());
      result.setType(init.get().getType());
      setLayout(carry, carriedLayout());
      setLayout(result, carriedLayout());
    }
    for (auto [slice, stacked] :
         llvm::zip(scan.getSliceArguments(), scan.getStacked()))
      if (parameters.contains(stacked))
        parameters.insert(slice);
    if (failed(partition(scan.getBodyBlock())))
      return failure();
    for (auto [index, stacked] : llvm::enumerate(scan.getStacked())) {
      BlockArgument slice = scan.getSliceArguments()[index];
      TensorLayout layout = getLayout(slice);
      if (layout.isReplicated())
        continue;
      auto arg = dyn_cast<BlockArgument>(stacked);
      if (!arg || !parameters.contains(arg) || !arg.hasOneUse())
        return scan.emitOpError()
               << "divides stacked operand #" << index
               << " among the tensor-parallel ranks, which is not a "
                  "parameter of @forward read by this loop alone";
      arg.setType(ScanOp::getStackedType(slice.getType(), scan.getLength()));
      setLayout(arg, layout.along(layout.dim + 1));
    }
    return success();
  }

  /// The parameter part `part`, whose last elements along the split
  /// dimension its team of ranks shares, as the ops read it: their
  /// cotangent summed over the team (loom.fan_out_shared). Built once.
  Value fanOutShared(Value part, TensorLayout layout) {
    Value &fanned = sharedFannedOut[part];
    if (!fanned) {
      RewriterBase &b = getRewriter();
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfterValue(part);
      auto fanOut = FanOutSharedOp::create(
          b, part.getLoc(), part, grid.getSymName(), {kTensorAxis}, layout.dim,
          layout.blocks, getSize() / layout.blocks, layout.shared);
      // A layer's backward pass reads the parameter again rather than
      // keeping a copy.
      if (fanOut->getParentOfType<ScanOp>())
        fanOut->setAttr(LoomDialect::getRecomputeAttrName(), b.getUnitAttr());
      setLayout(fanOut, layout);
      fanned = fanOut;
    }
    return fanned;
  }

  /// Records that `operand`'s value is used whole (a parameter then may no
  /// longer be divided); fails on a value tensor parallelism has split.
  LogicalResult useWhole(OpOperand &operand) {
    Value value = operand.get();
    if (getLayout(value).isSplit())
      return operand.getOwner()->emitOpError()
             << "needs operand #" << operand.getOperandNumber()
             << " whole on every rank, and tensor parallelism has split it";
    if (parameters.contains(value))
      wholeParameters.insert(value);
    return success();
  }

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
                                       grid.getSymName(),
                                       ArrayRef<shard::GridAxis>{kTensorAxis},
                                       partial, shard::ReductionKind::Sum);
      setLayout(sum, TensorLayout::replicated());
    }
    return sum;
  }

  shard::GridOp grid;
  func::FuncOp forward;
  bool sequenceParallel;
  DenseMap<Value, TensorLayout> layouts;
  DenseMap<Value, Value> sums, fannedOut, sharedFannedOut;
  /// The parameters, and those an op uses whole.
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
    FailureOr<func::FuncOp> forward = getForwardToDifferentiate(
        module, "tensor parallelism divides the model");
    if (failed(forward))
      return signalPassFailure();
    FailureOr<shard::GridOp> grid = getOrCreateGrid(module, *plan);
    if (failed(grid))
      return signalPassFailure();
    IRRewriter rewriter(&getContext());
    Partitioner partitioner(rewriter, plan->tp, *grid, *forward,
                            plan->sequenceParallel);
    if (failed(partitioner.run()))
      return signalPassFailure();
  }
};
} // namespace
