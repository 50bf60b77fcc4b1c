//===- OffloadGradients.cpp - Gradients that cross as they are made -------===//
//
// Offload sends each gradient to the host where the step has it whole. A
// layer loop's stack can then cross layer by layer (loom-stream-transfers)
// only if the transfer reads the loop's stack itself: not a widening of it
// after the loop, nor a sum of it over micro-batches. These rewrites move
// the widening into the loop and the sums to the host, with the same
// arithmetic, so that the results stay bit for bit those of the plan
// without offload.
//
//===----------------------------------------------------------------------===//

#include "OffloadGradients.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
/// `scan` with `value`, defined before it, carried through its body
/// unchanged, so that the body can read it: the body is isolated from
/// above. Returns the scan (a new one unless it carries `value` so already)
/// and the carried value's block argument.
std::pair<ScanOp, BlockArgument> carryInvariant(ScanOp scan, Value value) {
  unsigned numCarries = scan.getNumCarries();
  for (auto [i, init] : llvm::enumerate(scan.getInits()))
    if (init == value &&
        scan.getYield()->getOperand(i) == scan.getCarryArguments()[i])
      return {scan, scan.getCarryArguments()[i]};
  SmallVector<Value> inits(scan.getInits());
  inits.push_back(value);
  SmallVector<Type> types(scan.getResults().take_front(numCarries).getTypes());
  types.push_back(value.getType());
  llvm::append_range(types, scan.getStackedResults().getTypes());
  OpBuilder b(scan);
  auto carried =
      ScanOp::create(b, scan.getLoc(), types, inits, scan.getStacked(),
                     scan.getLength(), scan.getReverse());
  carried->setDiscardableAttrs(scan->getDiscardableAttrDictionary());
  carried.getBody().takeBody(scan.getBody());
  BlockArgument inside = carried.getBodyBlock().insertArgument(
      numCarries, value.getType(), value.getLoc());
  YieldOp yield = carried.getYield();
  yield->insertOperands(numCarries, inside);
  for (auto [i, result] : llvm::enumerate(scan.getResults()))
    result.replaceAllUsesWith(carried.getResult(i < numCarries ? i : i + 1));
  scan.erase();
  return {carried, inside};
}

/// Whether `loop`'s iteration is not its first: whether a sum is there to
/// add to. Computed once, at the top of the body, where the layer loop's
/// transfers that read it will be.
Value isNotFirst(scf::ForOp loop) {
  Block *body = loop.getBody();
  if (auto first = dyn_cast<arith::CmpIOp>(body->front());
      first && first.getPredicate() == arith::CmpIPredicate::ne &&
      first.getLhs() == loop.getInductionVar() &&
      first.getRhs() == loop.getLowerBound())
    return first;
  OpBuilder b = OpBuilder::atBlockBegin(body);
  return arith::CmpIOp::create(b, loop.getLoc(), arith::CmpIPredicate::ne,
                               loop.getInductionVar(), loop.getLowerBound());
}

/// What result `result` of `call` returns: a stack its callee's layer loop
/// makes, and the conversion that widens it after the loop, if one does.
/// Null where the callee returns no layer loop's stack there.
struct ReturnedStack {
  OpResult stack;
  ConvertOp widen;
};
ReturnedStack getReturnedStack(func::CallOp call, unsigned result) {
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      call, call.getCalleeAttr());
  if (!callee || callee.isExternal() || !callee.getBody().hasOneBlock())
    return {};
  Value returned = callee.getBody().front().getTerminator()->getOperand(result);
  auto widen = returned.getDefiningOp<ConvertOp>();
  if (widen)
    returned = widen.getInput();
  auto stack = dyn_cast<OpResult>(returned);
  auto scan = stack ? dyn_cast<ScanOp>(stack.getOwner()) : ScanOp();
  if (!scan || stack.getResultNumber() < scan.getNumCarries())
    return {};
  return {stack, widen};
}

/// Whether `sent` copies an f32 value whole into host memory that is an
/// argument of its block: where the host could sum it instead.
bool sendsWholeToHost(TransferOp sent) {
  return sent.getTo() == Placement::host && !sent.getAccumulate() &&
         getElementTypeOrSelf(sent.getSource().getType()).isF32() &&
         isa<BlockArgument>(sent.getDest()) &&
         sent.getDest().getParentBlock() == sent->getBlock();
}
} // namespace

namespace mlir::loom::offload {

bool isStackedByLayerLoop(Value grad) {
  auto result = cast<OpResult>(grad);
  return static_cast<bool>(
      getReturnedStack(cast<func::CallOp>(result.getOwner()),
                       result.getResultNumber())
          .stack);
}

/// Mixed precision: the backward loop stacks a layer gradient in the
/// step's precision, and the gradient function widens the whole stack to
/// f32 after the loop (dividing it by fp16's loss scale). For the stack to
/// cross to the host as it is made (loom-stream-transfers), each layer's
/// gradient is widened in the loop instead, by the same scale: the same
/// elements, and the device never holds either stack whole. Only for a
/// gradient nothing else on the device reads: a stack that stays would be
/// f32 through the loop. The gradient function is rewritten for every
/// caller: as an entry of its own (gradient checks) it stacks f32 too.
void widenInLoop(func::CallOp call, unsigned result) {
  auto [stack, widen] = getReturnedStack(call, result);
  if (!stack || !widen || !widen->hasOneUse() || !stack.hasOneUse())
    return;
  auto scan = cast<ScanOp>(stack.getOwner());
  // The scale reaches the body as a carried value (fp16's loss scale is
  // computed once, before the loops).
  Value scale = widen.getScale();
  Value scaleInside;
  if (scale) {
    Operation *def = scale.getDefiningOp();
    if (def &&
        (def->getBlock() != scan->getBlock() || !def->isBeforeInBlock(scan)))
      return;
    unsigned stacked = stack.getResultNumber() - scan.getNumCarries();
    std::tie(scan, scaleInside) = carryInvariant(scan, scale);
    stack = scan.getStackedResults()[stacked];
  }
  OpOperand &yielded = scan.getYield()->getOpOperand(stack.getResultNumber());
  Type wide = getElementTypeOrSelf(widen.getType());
  OpBuilder b(scan.getYield());
  yielded.set(ConvertOp::create(
      b, widen.getLoc(),
      cast<RankedTensorType>(yielded.get().getType()).clone(wide),
      yielded.get(), scaleInside));
  stack.setType(widen.getType());
  widen.replaceAllUsesWith(stack);
  widen.erase();
}

/// Micro-batches: their loop sums each gradient on the device, from zeros,
/// and the sum crosses to the host after it (`sent`). Where nothing else
/// reads the sum, each micro-batch's gradient crosses instead as the loop
/// makes it, and the host sums them where the sum would have arrived (a
/// transfer that accumulates): the device never holds the sum, and a layer
/// loop's gradients cross layer by layer in every micro-batch. Returns the
/// transfer in the loop, or null.
TransferOp accumulateOnHost(TransferOp sent) {
  auto sum = dyn_cast<OpResult>(sent.getSource());
  auto loop = sum ? dyn_cast<scf::ForOp>(sum.getOwner()) : scf::ForOp();
  if (!loop || !sum.hasOneUse() || !sendsWholeToHost(sent))
    return {};
  unsigned index = sum.getResultNumber();
  BlockArgument partial = loop.getRegionIterArgs()[index];
  auto add = loop.getYieldedValues()[index].getDefiningOp<AddOp>();
  // Only from +0: the host's first sum is 0 + the gradient, as the
  // device's was, so that a -0 stays what it was.
  if (!add || !add->hasOneUse() || add->getBlock() != loop.getBody() ||
      !partial.hasOneUse() ||
      !matchPattern(loop.getInitArgs()[index], m_PosZeroFloat()))
    return {};
  Value grad = add.getLhs() == partial ? add.getRhs() : add.getLhs();
  if (grad == partial)
    return {};
  Operation *zeros = loop.getInitArgs()[index].getDefiningOp();
  loop.getInitArgsMutable()[index].assign(sent.getDest());
  if (zeros && zeros->use_empty())
    zeros->erase();
  OpBuilder b(add);
  auto summed =
      TransferOp::create(b, add.getLoc(), grad.getType(), grad, partial,
                         Placement::host, /*async=*/false, isNotFirst(loop));
  add.replaceAllUsesWith(summed.getResult());
  add.erase();
  sent.replaceAllUsesWith(sum);
  sent.erase();
  return summed;
}

SmallVector<TransferOp> accumulateCallsOnHost(TransferOp sent) {
  if (!sendsWholeToHost(sent))
    return {};
  // The sum as the device makes it: ((g0 + g1) + g2) ..., each partial sum
  // read by the next addition alone, each g a call's result, made in order.
  SmallVector<AddOp> adds;
  SmallVector<Value> grads;
  Value sum = sent.getSource();
  auto isCallResult = [](Value v) {
    return isa_and_nonnull<func::CallOp>(v.getDefiningOp());
  };
  while (auto add = sum.getDefiningOp<AddOp>()) {
    if (!add->hasOneUse() || add->getBlock() != sent->getBlock())
      return {};
    adds.push_back(add);
    bool lhsCall = isCallResult(add.getLhs());
    bool rhsCall = isCallResult(add.getRhs());
    if (lhsCall && rhsCall) {
      grads.push_back(add.getRhs());
      grads.push_back(add.getLhs());
      break;
    }
    if (!lhsCall && !rhsCall)
      return {};
    grads.push_back(lhsCall ? add.getLhs() : add.getRhs());
    sum = lhsCall ? add.getRhs() : add.getLhs();
  }
  if (adds.empty() || grads.size() != adds.size() + 1)
    return {};
  std::reverse(grads.begin(), grads.end());
  std::reverse(adds.begin(), adds.end());
  for (Value grad : grads)
    if (grad.getDefiningOp()->getBlock() != sent->getBlock())
      return {};
  // Each crosses where the device added it, adding the host's sum so far
  // to itself as the device added its own (IEEE addition commutes); the
  // first crosses as it is, there too, unless a layer loop stacks it, which
  // it then leaves layer by layer, so it crosses right after its call. As
  // on the device, nothing else reads a gradient before the earlier ones
  // are summed, so the canonical forms that fuse such an addition into the
  // op making a gradient (an embedding's scatter, started from the other
  // micro-batch's table) apply as they do without offload, and the sums
  // stay bit for bit the same.
  Block *block = sent->getBlock();
  OpBuilder b = OpBuilder::atBlockBegin(block);
  Value more;
  if (auto first = dyn_cast<arith::ConstantOp>(block->front());
      first && first.getValue() == b.getBoolAttr(true))
    more = first;
  else
    more = arith::ConstantOp::create(b, sent.getLoc(), b.getBoolAttr(true));
  SmallVector<TransferOp> transfers;
  Value dest = sent.getDest();
  for (auto [i, grad] : llvm::enumerate(grads)) {
    if (i == 0 && isStackedByLayerLoop(grad)) {
      // After the call's other transfers, in the order of the gradients.
      Operation *after = grad.getDefiningOp();
      while (isa_and_nonnull<TransferOp>(after->getNextNode()))
        after = after->getNextNode();
      b.setInsertionPointAfter(after);
    } else {
      b.setInsertionPoint(adds[i == 0 ? 0 : i - 1]);
    }
    auto transfer = TransferOp::create(b, grad.getLoc(), grad.getType(), grad,
                                       dest, Placement::host, /*async=*/false,
                                       i == 0 ? Value() : more);
    dest = transfer.getResult();
    transfers.push_back(transfer);
  }
  sent.replaceAllUsesWith(dest);
  sent.erase();
  for (AddOp add : llvm::reverse(adds))
    add.erase();
  return transfers;
}
} // namespace mlir::loom::offload
