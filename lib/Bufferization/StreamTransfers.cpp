//===- StreamTransfers.cpp - The loom-stream-transfers pass ---------------===//
//
// A transfer of what a layer loop stacks moves into the loop, so that each
// layer's slice crosses as soon as the loop has made it and the memory it
// leaves never holds the whole stack.
//
//===----------------------------------------------------------------------===//

#include "loom/Bufferization/Passes.h"
#include "loom/Dialect/LoomDialect.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"

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

/// Rewrites `transfer` of a loop's stack, where it is one: the loop stacks
/// in the destination, and each slice crosses into its place there.
bool streamTransfer(TransferOp transfer, DominanceInfo &dominance) {
  auto stack = dyn_cast<OpResult>(transfer.getSource());
  auto loop = stack ? dyn_cast<scf::ForOp>(stack.getOwner()) : scf::ForOp();
  // The destination, once the loop's stack, must be read by nothing else,
  // which would see it written slice by slice (or need a copy of it).
  if (!loop || !stack.hasOneUse() || !transfer.getDest().hasOneUse() ||
      !dominance.properlyDominates(transfer.getDest(), loop))
    return false;
  unsigned index = stack.getResultNumber();
  tensor::InsertSliceOp insert = getStackingInsert(loop, index);
  if (!insert)
    return false;
  Operation *empty = loop.getInitArgs()[index].getDefiningOp();
  loop.getInitArgsMutable()[index].assign(transfer.getDest());
  empty->erase();
  OpBuilder b(insert);
  Location loc = transfer.getLoc();
  Value slot = tensor::ExtractSliceOp::create(
      b, loc, insert.getSourceType(), insert.getDest(),
      insert.getMixedOffsets(), insert.getMixedSizes(),
      insert.getMixedStrides());
  Value sent =
      TransferOp::create(b, loc, insert.getSource(), slot, transfer.getTo());
  insert.getSourceMutable().assign(sent);
  transfer.replaceAllUsesWith(stack);
  transfer.erase();
  return true;
}

struct StreamTransfersPass
    : public loom::impl::LoomStreamTransfersBase<StreamTransfersPass> {
  void runOnOperation() override {
    SmallVector<TransferOp> transfers;
    getOperation().walk(
        [&](TransferOp transfer) { transfers.push_back(transfer); });
    DominanceInfo dominance(getOperation());
    for (TransferOp transfer : transfers)
      streamTransfer(transfer, dominance);
  }
};
} // namespace
