//===- StreamTransfers.cpp - The loom-stream-transfers pass ---------------===//
//
// A transfer of what a layer loop stacks moves into the loop, so that each
// layer's slice crosses as soon as the loop has made it and the memory it
// leaves never holds the whole stack.
//
// A layer loop's transfers then overlap its compute, double-buffered: each
// layer's gradient crosses while the next layer's backward pass runs (the
// loop hands the gradient's buffer to the next iteration, which waits for
// the copy before starting its own), and each layer's parameters are
// fetched while the layer before computes (the loop hands the fetched
// buffer to the iteration that reads it, which waits for it first). The
// static arena gives a buffer a loop hands on two slots, one for each
// parity of the iteration: the two buffers of double buffering.
//
//===----------------------------------------------------------------------===//

#include "loom/Bufferization/Passes.h"
#include "loom/Dialect/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMSTREAMTRANSFERS
#include "loom/Bufferization/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The slice insertion that builds result `index` of `loop` from an empty
/// tensor, one slice an iteration, when nothing else reads the stack.
tensor::InsertSliceOp getStackingInsert(scf::ForOp loop, unsigned index) {
  OpOperand &init = loop.getInitArgsMutable()[index];
  auto empty = init.get().getDefiningOp<tensor::EmptyOp>();
  BlockArgument stack = loop.getRegionIterArgs()[index];
  if (!empty || !empty->hasOneUse() || !stack.hasOneUse())
    return {};
  auto insert = dyn_cast<tensor::InsertSliceOp>(*stack.getUsers().begin());
  if (!insert || insert.getDest() != stack || !insert->hasOneUse() ||
      insert->getBlock() != loop.getBody())
    return {};
  // A slice along the leading dimension, whole in the others: contiguous,
  // as a transfer's destination must be.
  RankedTensorType type = insert.getDestType();
  ArrayRef<int64_t> offsets = insert.getStaticOffsets();
  ArrayRef<int64_t> sizes = insert.getStaticSizes();
  if (!type.hasStaticShape() || !insert.hasUnitStride() || sizes[0] != 1)
    return {};
  for (int64_t d = 1; d < type.getRank(); ++d)
    if (offsets[d] != 0 || sizes[d] != type.getDimSize(d))
      return {};
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  if (*insert->getUsers().begin() != yield ||
      yield.getOperand(index) != insert.getResult())
    return {};
  return insert;
}

/// A loop's stack and the insert that stacks each iteration's slice.
struct Stacking {
  scf::ForOp loop;
  OpResult stack;
  tensor::InsertSliceOp insert;
};

/// `stack`, a result of an `scf.for`, where the loop's stack can be built
/// in `dest` instead of an empty tensor: nothing else reads the stack, and
/// `dest`, defined before the loop, is read by nothing else either (it
/// would see the stack written slice by slice, or need a copy of it): by
/// at most the one op the stack replaces it in.
std::optional<Stacking> getStackingInto(Value stack, Value dest,
                                        DominanceInfo &dominance) {
  auto result = dyn_cast<OpResult>(stack);
  auto loop = result ? dyn_cast<scf::ForOp>(result.getOwner()) : scf::ForOp();
  if (!loop || !result.hasOneUse() || dest.hasNUsesOrMore(2) ||
      !dominance.properlyDominates(dest, loop))
    return std::nullopt;
  tensor::InsertSliceOp insert =
      getStackingInsert(loop, result.getResultNumber());
  if (!insert)
    return std::nullopt;
  return Stacking{loop, result, insert};
}

/// Makes `loop` build its stack `index` in `dest` instead of an empty
/// tensor.
void stackInto(scf::ForOp loop, unsigned index, Value dest) {
  Operation *empty = loop.getInitArgs()[index].getDefiningOp();
  loop.getInitArgsMutable()[index].assign(dest);
  empty->erase();
}

/// A builder after `insert`'s slice and its place's offsets exist in
/// `loop`'s body: where the slice can cross, so that the device's buffer
/// is free from then on, not at the iteration's end.
OpBuilder afterSliceIsMade(tensor::InsertSliceOp insert, scf::ForOp loop) {
  OpBuilder b(insert);
  Operation *made = insert.getSource().getDefiningOp();
  if (made && made->getBlock() == loop.getBody()) {
    for (Value offset : insert.getOffsets())
      if (Operation *def = offset.getDefiningOp())
        if (def->getBlock() == loop.getBody() && made->isBeforeInBlock(def))
          made = def;
    b.setInsertionPointAfter(made);
  }
  return b;
}

/// Rewrites `transfer` of a loop's stack, where it is one: the loop stacks
/// in the destination, and each slice crosses into its place there.
/// Returns the transfer in the loop.
TransferOp streamTransfer(TransferOp transfer, DominanceInfo &dominance) {
  std::optional<Stacking> stacking =
      getStackingInto(transfer.getSource(), transfer.getDest(), dominance);
  if (!stacking)
    return {};
  tensor::InsertSliceOp insert = stacking->insert;
  stackInto(stacking->loop, stacking->stack.getResultNumber(),
            transfer.getDest());
  OpBuilder b = afterSliceIsMade(insert, stacking->loop);
  Location loc = transfer.getLoc();
  Value slot = tensor::ExtractSliceOp::create(
      b, loc, insert.getSourceType(), insert.getDest(),
      insert.getMixedOffsets(), insert.getMixedSizes(),
      insert.getMixedStrides());
  // A sum (accumulate) adds each slice to the place's, which the loop's
  // stack starts from.
  auto sent = TransferOp::create(b, loc, insert.getSource().getType(),
                                 insert.getSource(), slot, transfer.getTo(),
                                 /*async=*/false, transfer.getAccumulate());
  insert.getSourceMutable().assign(sent);
  transfer.replaceAllUsesWith(stacking->stack);
  transfer.erase();
  return sent;
}

/// ZeRO-2: `layers`, this rank's layers of a loop's stack reduce-scattered
/// along them over the replicas (as loom-data-parallel makes it), where
/// the loop can build the rank's layers in `dest` (see getStackingInto).
/// Each layer's slice is instead summed onto the rank that owns it
/// (`shard.reduce`) as the loop makes it, DeepSpeed's ZeRO-2 reduction,
/// and `place(b, sum, slot)` puts the owner's sum in its slot among the
/// rank's layers (`slot()` extracts the slot's present value): the same sums
/// and traffic, and the device never holds the stack whole. `layers` is then
/// the loop's result, and goes; returns it, or null where the pattern does not
/// hold.
Value ownLayers(
    shard::ReduceScatterOp layers, Value dest, DominanceInfo &dominance,
    function_ref<Value(OpBuilder &, Value, function_ref<Value()>)> place) {
  if (layers.getReduction() != shard::ReductionKind::Sum ||
      !layers.getScatterAxis().isZero() || layers.getGridAxes().size() != 1)
    return {};
  std::optional<Stacking> stacking =
      getStackingInto(layers.getInput(), dest, dominance);
  if (!stacking)
    return {};
  scf::ForOp loop = stacking->loop;
  OpResult stack = stacking->stack;
  tensor::InsertSliceOp insert = stacking->insert;
  auto mine = cast<RankedTensorType>(layers.getType());
  Location loc = layers.getLoc();

  // Rank r owns layers [r * n, (r + 1) * n), its 1/dp of the stack.
  OpBuilder b(loop);
  Value rank = shard::ProcessMultiIndexOp::create(b, loc, layers.getGrid(),
                                                  layers.getGridAxes())
                   .getResult()
                   .front();
  Value perRank = arith::ConstantIndexOp::create(b, loc, mine.getDimSize(0));
  Value first = arith::MulIOp::create(b, loc, rank, perRank);
  if (dest.getType() != mine)
    dest = tensor::ExpandShapeOp::create(
        b, loc, mine, dest,
        *getReassociationIndicesForReshape(cast<ShapedType>(dest.getType()),
                                           mine));
  stackInto(loop, stack.getResultNumber(), dest);
  BlockArgument placed = loop.getRegionIterArgs()[stack.getResultNumber()];
  placed.setType(mine);
  stack.setType(mine);

  OpBuilder in = afterSliceIsMade(insert, loop);
  Value layer =
      getValueOrCreateConstantIndexOp(in, loc, insert.getMixedOffsets()[0]);
  Value owner = arith::DivUIOp::create(in, loc, layer, perRank);
  Value summed = shard::ReduceOp::create(
      in, loc, insert.getSourceType(), layers.getGrid(), layers.getGridAxes(),
      insert.getSource(), shard::ReductionKind::Sum,
      ArrayRef<int64_t>{ShapedType::kDynamic}, owner);
  Value owned =
      arith::CmpIOp::create(in, loc, arith::CmpIPredicate::eq, owner, rank);
  auto ownerPlaces = scf::IfOp::create(
      in, loc, owned,
      [&](OpBuilder &then, Location) {
        SmallVector<OpFoldResult> offsets = insert.getMixedOffsets();
        offsets[0] = arith::SubIOp::create(then, loc, layer, first).getResult();
        auto slot = [&]() -> Value {
          return tensor::ExtractSliceOp::create(
              then, loc, insert.getSourceType(), placed, offsets,
              insert.getMixedSizes(), insert.getMixedStrides());
        };
        scf::YieldOp::create(then, loc,
                             tensor::InsertSliceOp::create(
                                 then, loc, place(then, summed, slot), placed,
                                 offsets, insert.getMixedSizes(),
                                 insert.getMixedStrides())
                                 .getResult());
      },
      [&](OpBuilder &otherwise, Location) {
        scf::YieldOp::create(otherwise, loc, Value(placed));
      });
  insert.replaceAllUsesWith(ownerPlaces.getResult(0));
  insert.erase();
  layers.replaceAllUsesWith(Value(stack));
  layers.erase();
  return stack;
}

/// ZeRO-2 with offload: `transfer` of this rank's layers of a loop's stack
/// (ownLayers), where it is one: each owner's sum crosses from the device
/// into its place among the rank's layers in the destination, where the
/// loop builds them. Returns the transfer in the loop, or null.
TransferOp streamOwnedLayers(TransferOp transfer, DominanceInfo &dominance) {
  auto rows = transfer.getSource().getDefiningOp<tensor::CollapseShapeOp>();
  auto layers = rows ? rows.getSrc().getDefiningOp<shard::ReduceScatterOp>()
                     : shard::ReduceScatterOp();
  if (!layers || !rows->hasOneUse() || !layers->hasOneUse() ||
      transfer.getTo() != Placement::host || transfer.getAccumulate())
    return {};
  TransferOp sent;
  Value stack = ownLayers(
      layers, transfer.getDest(), dominance,
      [&](OpBuilder &b, Value sum, function_ref<Value()> slot) -> Value {
        sent =
            TransferOp::create(b, transfer.getLoc(), sum.getType(), sum, slot(),
                               Placement::host, /*async=*/false, Value());
        return sent;
      });
  if (!stack)
    return {};
  OpBuilder after(transfer);
  Value arrived = tensor::CollapseShapeOp::create(
      after, transfer.getLoc(), rows.getResultType(), stack,
      rows.getReassociationIndices());
  transfer.replaceAllUsesWith(arrived);
  transfer.erase();
  rows.erase();
  return sent;
}

/// ZeRO-2 on the device: `layers` (ownLayers) summed onto each owner as
/// the loop makes them, the owner's sum kept among the rank's layers,
/// which the loop builds in a tensor of their own.
void keepOwnedLayers(shard::ReduceScatterOp layers, DominanceInfo &dominance) {
  auto loop = layers.getInput().getDefiningOp<scf::ForOp>();
  if (!loop)
    return;
  OpBuilder b(loop);
  auto mine = cast<RankedTensorType>(layers.getType());
  Value rankLayers = tensor::EmptyOp::create(
      b, layers.getLoc(), mine.getShape(), mine.getElementType());
  if (!ownLayers(
          layers, rankLayers, dominance,
          [](OpBuilder &, Value sum, function_ref<Value()>) { return sum; }))
    rankLayers.getDefiningOp()->erase();
}

/// Adds one iteration argument to `loop` for each of `inits`, which the
/// body yields `yields(newArguments)` to; returns the new loop.
scf::ForOp
addIterArgs(scf::ForOp loop, ValueRange inits,
            function_ref<SmallVector<Value>(ArrayRef<BlockArgument>)> yields) {
  IRRewriter rewriter(loop.getContext());
  rewriter.setInsertionPoint(loop);
  FailureOr<LoopLikeOpInterface> grown = loop.replaceWithAdditionalYields(
      rewriter, inits, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &, Location, ArrayRef<BlockArgument> arguments) {
        return yields(arguments);
      });
  return cast<scf::ForOp>(grown->getOperation());
}

/// Whether `value` is made by the ops of `loop`'s body: a result that
/// bufferizes to a buffer of the iteration's own, or to a view of or in
/// place of such a value. The loop can then hand that buffer to the next
/// iteration as it is (bufferization does not copy it at the yield), and
/// the next iteration waits on the address the copy reads.
bool isMadeByIteration(Value value, scf::ForOp loop,
                       const bufferization::AnalysisState &state) {
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != loop.getBody())
    return false;
  return llvm::all_of(state.getAliasingOpOperands(value),
                      [&](const bufferization::AliasingOpOperand &alias) {
                        return isMadeByIteration(alias.opOperand->get(), loop,
                                                 state);
                      });
}

/// Lets the copies `sends` of `loop` (values the iteration makes, crossing
/// to the host) run alongside the next iteration: each starts, the loop
/// hands its source to the next iteration, which waits for the copy before
/// it starts its own, and the last is waited for after the loop. Returns
/// the new loop.
scf::ForOp overlapSends(scf::ForOp loop, ArrayRef<TransferOp> sends) {
  OpBuilder b(loop);
  SmallVector<Value> inits;
  // What the first iteration waits on: no copy is in flight yet. A buffer
  // only the loop uses, which the static arena places in the odd slot of
  // the buffers the loop hands on.
  for (TransferOp send : sends)
    inits.push_back(tensor::EmptyOp::create(
        b, send.getLoc(), send.getSource().getType(), ValueRange{}));
  scf::ForOp grown =
      addIterArgs(loop, inits, [&](ArrayRef<BlockArgument> previous) {
        for (auto [index, before] : llvm::enumerate(previous)) {
          TransferOp send = sends[index];
          // In the loop's body: a send under a condition (a layer this
          // rank owns) still leaves its buffer to the next iteration.
          Operation *here = send;
          while (!isa<scf::ForOp>(here->getParentOp()))
            here = here->getParentOp();
          OpBuilder at(here);
          TransferWaitOp::create(at, send.getLoc(), before);
          send.setAsync(true);
        }
        SmallVector<Value> sources;
        for (TransferOp send : sends)
          sources.push_back(send.getSource());
        return sources;
      });
  b.setInsertionPointAfter(grown);
  for (Value last : grown.getResults().take_back(sends.size()))
    TransferWaitOp::create(b, grown.getLoc(), last);
  return grown;
}

/// Whether `value` is `loop`'s induction variable, defined outside it, or
/// computed from those by pure operations without regions in its body:
/// what can be computed again for another iteration.
bool isOfIteration(Value value, scf::ForOp loop) {
  if (value == loop.getInductionVar() ||
      !loop->isAncestor(value.getParentRegion()->getParentOp()))
    return true;
  Operation *def = value.getDefiningOp();
  return def && def->getBlock() == loop.getBody() && isPure(def) &&
         def->getNumRegions() == 0 &&
         llvm::all_of(def->getOperands(),
                      [&](Value v) { return isOfIteration(v, loop); });
}

/// `value` (isOfIteration) computed again at `b` for iteration `index`.
Value computeAt(OpBuilder &b, Value value, scf::ForOp loop, Value index,
                IRMapping &mapping) {
  if (value == loop.getInductionVar())
    return index;
  if (!loop->isAncestor(value.getParentRegion()->getParentOp()))
    return value;
  if (Value done = mapping.lookupOrNull(value))
    return done;
  Operation *def = value.getDefiningOp();
  for (Value operand : def->getOperands())
    mapping.map(operand, computeAt(b, operand, loop, index, mapping));
  return b.clone(*def, mapping)
      ->getResult(cast<OpResult>(value).getResultNumber());
}

/// A fetch of a slice of host memory into a fresh buffer, in `loop`'s body,
/// whose slice another iteration can name: what can be fetched an
/// iteration ahead.
bool isPrefetchable(TransferOp fetch, scf::ForOp loop) {
  auto slice = fetch.getSource().getDefiningOp<tensor::ExtractSliceOp>();
  auto empty = fetch.getDest().getDefiningOp<tensor::EmptyOp>();
  // The first fetch is started before the loop: the loop must run.
  std::optional<int64_t> lower = getConstantIntValue(loop.getLowerBound()),
                         upper = getConstantIntValue(loop.getUpperBound());
  return lower && upper && *lower < *upper &&
         fetch.getTo() == Placement::device && !fetch.getAsync() &&
         fetch->getBlock() == loop.getBody() && slice && empty &&
         empty->hasOneUse() && empty.getType().hasStaticShape() &&
         llvm::all_of(slice->getOperands(),
                      [&](Value v) { return isOfIteration(v, loop); });
}

/// A fresh buffer of `fetch`'s type.
Value emptyLike(OpBuilder &b, TransferOp fetch) {
  return tensor::EmptyOp::create(b, fetch.getLoc(), fetch.getType(),
                                 ValueRange{});
}

/// The fetch `fetch` started for iteration `index` into `buffer`, or into a
/// fresh one.
Value startFetch(OpBuilder &b, TransferOp fetch, scf::ForOp loop, Value index,
                 Value buffer = {}) {
  IRMapping mapping;
  Value slice = computeAt(b, fetch.getSource(), loop, index, mapping);
  if (!buffer)
    buffer = emptyLike(b, fetch);
  return TransferOp::create(b, fetch.getLoc(), slice, buffer, fetch.getTo(),
                            /*async=*/true);
}

/// Fetches each of `fetches` of `loop` an iteration ahead: the first before
/// the loop, the next at the place of this one's, which the iteration
/// then waits for and reads from the buffer the previous one handed it.
void prefetch(scf::ForOp loop, ArrayRef<TransferOp> fetches) {
  OpBuilder b(loop);
  SmallVector<Value> firsts;
  for (TransferOp fetch : fetches)
    firsts.push_back(startFetch(b, fetch, loop, loop.getLowerBound()));
  addIterArgs(loop, firsts, [&](ArrayRef<BlockArgument> current) {
    OpBuilder at(fetches.front());
    Location loc = loop.getLoc();
    Value next =
        arith::AddIOp::create(at, loc, loop.getInductionVar(), loop.getStep());
    Value more = arith::CmpIOp::create(at, loc, arith::CmpIPredicate::slt, next,
                                       loop.getUpperBound());
    SmallVector<Value> yields;
    for (auto [index, fetched] : llvm::enumerate(current)) {
      TransferOp fetch = fetches[index];
      at.setInsertionPoint(fetch);
      Location here = fetch.getLoc();
      Value buffer = emptyLike(at, fetch);
      auto ahead = scf::IfOp::create(
          at, here, more,
          [&](OpBuilder &then, Location) {
            scf::YieldOp::create(then, here,
                                 startFetch(then, fetch, loop, next, buffer));
          },
          [&](OpBuilder &otherwise, Location) {
            scf::YieldOp::create(otherwise, here, buffer);
          });
      TransferWaitOp::create(at, here, fetched);
      yields.push_back(ahead.getResult(0));
      Operation *empty = fetch.getDest().getDefiningOp();
      fetch.replaceAllUsesWith(fetched);
      fetch.erase();
      empty->erase();
    }
    return yields;
  });
}

struct StreamTransfersPass
    : public loom::impl::LoomStreamTransfersBase<StreamTransfersPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<TransferOp> transfers;
    getOperation().walk(
        [&](TransferOp transfer) { transfers.push_back(transfer); });
    DominanceInfo dominance(getOperation());
    bufferization::BufferizationOptions options;
    bufferization::AnalysisState aliases(options);
    // Each loop's transfers, in order: the sends streamTransfer puts in
    // it, whose source the iteration makes in its body (which the loop can
    // then hand on), and the fetches it had.
    llvm::MapVector<Operation *, SmallVector<TransferOp>> sends, fetches;
    for (TransferOp transfer : transfers) {
      TransferOp sent = streamTransfer(transfer, dominance);
      if (!sent)
        sent = streamOwnedLayers(transfer, dominance);
      if (sent) {
        auto loop = sent->getParentOfType<scf::ForOp>();
        if (isMadeByIteration(sent.getSource(), loop, aliases))
          sends[loop].push_back(sent);
        continue;
      }
      auto loop = dyn_cast<scf::ForOp>(transfer->getParentOp());
      if (loop && isPrefetchable(transfer, loop))
        fetches[loop].push_back(transfer);
    }
    // The layers the device keeps: what streamOwnedLayers left, whose
    // rank's layers no transfer sends.
    SmallVector<shard::ReduceScatterOp> scatters;
    getOperation().walk(
        [&](shard::ReduceScatterOp op) { scatters.push_back(op); });
    for (shard::ReduceScatterOp layers : scatters)
      keepOwnedLayers(layers, dominance);
    if (!overlap)
      return;
    SetVector<Operation *> loops;
    for (auto &entry : sends)
      loops.insert(entry.first);
    for (auto &entry : fetches)
      loops.insert(entry.first);
    for (Operation *op : loops) {
      auto loop = cast<scf::ForOp>(op);
      if (auto it = sends.find(op); it != sends.end())
        loop = overlapSends(loop, it->second);
      if (auto it = fetches.find(op); it != fetches.end())
        prefetch(loop, it->second);
    }
  }
};
} // namespace
