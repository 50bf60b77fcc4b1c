//===- OffloadHostOps.cpp - What an offloaded step runs on the host -------===//

#include "OffloadHostOps.h"

#include "loom/Dialect/LoomDialect.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::loom;

namespace mlir {
namespace loom {
namespace offload {

bool isHostComputable(Operation *op) {
  return isPure(op) && op->getNumRegions() == 0 &&
         !isa<shard::ShardDialect>(op->getDialect());
}

bool isHostArgument(func::FuncOp step, Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg || arg.getOwner() != &step.getBody().front())
    return false;
  unsigned i = arg.getArgNumber();
  return step.getArgAttr(i, LoomDialect::getParamAttrName()) ||
         step.getArgAttr(i, LoomDialect::getStateAttrName());
}

bool isHostValue(func::FuncOp step, Value value) {
  if (auto transfer = value.getDefiningOp<TransferOp>())
    return transfer.getTo() == Placement::host;
  // The micro-batches' sum the host makes where it lies.
  if (auto loop = value.getDefiningOp<scf::ForOp>())
    return isHostValue(
        step, loop.getYieldedValues()[cast<OpResult>(value).getResultNumber()]);
  return isHostArgument(step, value);
}

bool feedsOnlyHost(Operation *op, llvm::DenseMap<Operation *, bool> &known) {
  auto it = known.find(op);
  if (it != known.end())
    return it->second;
  bool host = false;
  if (isa<OptimizerUpdateOpInterface, func::ReturnOp>(op))
    host = true;
  else if (isHostComputable(op)) {
    host = llvm::all_of(op->getUsers(), [&](Operation *user) {
      return user->getBlock() == op->getBlock() && feedsOnlyHost(user, known);
    });
  }
  known[op] = host;
  return host;
}

bool isNarrowing(Operation *op) {
  auto convert = dyn_cast<ConvertOp>(op);
  if (!convert || convert.getScale())
    return false;
  return getElementTypeOrSelf(convert.getResult().getType())
             .getIntOrFloatBitWidth() <
         getElementTypeOrSelf(convert.getInput().getType())
             .getIntOrFloatBitWidth();
}

FailureOr<llvm::SetVector<Operation *>> collectHostOps(func::FuncOp step) {
  Block &body = step.getBody().front();
  llvm::DenseSet<Value> host;
  for (BlockArgument arg : body.getArguments())
    if (isHostArgument(step, arg))
      host.insert(arg);
  for (TransferOp transfer : body.getOps<TransferOp>())
    if (isHostValue(step, transfer.getResult()))
      host.insert(transfer.getResult());
  SmallVector<Operation *> candidates;
  bool anyUpdate = false;
  for (Operation &op : body.without_terminator()) {
    bool update = isa<OptimizerUpdateOpInterface>(op);
    anyUpdate |= update;
    // Communication stays on the device: ZeRO-1/2's gathers of the updated
    // parameters run there, on what the host sends back.
    bool derived = isHostComputable(&op) &&
                   llvm::all_of(op.getOperands(),
                                [&](Value v) { return host.contains(v); });
    if (!update && !derived)
      continue;
    host.insert(op.result_begin(), op.result_end());
    candidates.push_back(&op);
  }
  if (!anyUpdate)
    return step.emitOpError("has no optimizer update to place on the host");
  // From the last op back: a derived op joins when everything that reads it
  // is on the host or is the step's return (a constant some device op also
  // reads is copied into the host function instead).
  llvm::SetVector<Operation *> ops;
  Operation *terminator = body.getTerminator();
  for (Operation *op : llvm::reverse(candidates)) {
    bool update = isa<OptimizerUpdateOpInterface>(op);
    bool hostUsers = llvm::all_of(op->getUsers(), [&](Operation *user) {
      return user == terminator || ops.contains(user);
    });
    if (update || (hostUsers && !op->use_empty()) || isNarrowing(op))
      ops.insert(op);
  }
  WalkResult nested = step.walk([&](OptimizerUpdateOpInterface update) {
    return ops.contains(update) ? WalkResult::advance()
                                : WalkResult::interrupt();
  });
  if (nested.wasInterrupted())
    return step.emitOpError("updates parameters inside a loop or region; "
                            "loom-place-offload moves updates of the step's "
                            "own block");
  return ops;
}

llvm::SetVector<Operation *> collectHostSums(func::FuncOp step) {
  Block &body = step.getBody().front();
  llvm::DenseSet<Value> host;
  for (TransferOp transfer : body.getOps<TransferOp>())
    if (isHostValue(step, transfer.getResult()))
      host.insert(transfer.getResult());
  llvm::SetVector<Operation *> derived;
  for (Operation &op : body.without_terminator()) {
    if (!isHostComputable(&op) || op.getNumOperands() == 0 ||
        isa<OptimizerUpdateOpInterface>(op))
      continue;
    // Constants alone do not make an op the host's: the device might need
    // it before any gradient is sent.
    bool readsHost = llvm::any_of(op.getOperands(),
                                  [&](Value v) { return host.contains(v); });
    if (readsHost && llvm::all_of(op.getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return host.contains(v) ||
                 (def && def->hasTrait<OpTrait::ConstantLike>());
        })) {
      host.insert(op.result_begin(), op.result_end());
      derived.insert(&op);
    }
  }
  // What leads only to the updates and the step's outputs is the host
  // update's to compute (collectHostOps), not these.
  llvm::DenseSet<Operation *> staysOnHost;
  for (Operation *op : llvm::reverse(derived))
    if (llvm::all_of(op->getUsers(), [&](Operation *user) {
          return isa<OptimizerUpdateOpInterface, func::ReturnOp>(user) ||
                 staysOnHost.contains(user);
        }))
      staysOnHost.insert(op);
  // The others cross back, where they are tensors (the transfers' unit)
  // and read the host's values alone.
  llvm::SetVector<Operation *> sums;
  for (Operation *op : derived) {
    bool crosses =
        !staysOnHost.contains(op) &&
        llvm::all_of(op->getResultTypes(), llvm::IsaPred<RankedTensorType>);
    if (crosses && llvm::all_of(op->getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return isa_and_nonnull<TransferOp>(def) || sums.contains(def) ||
                 (def && def->hasTrait<OpTrait::ConstantLike>());
        }))
      sums.insert(op);
  }
  return llvm::SetVector<Operation *>(sums.rbegin(), sums.rend());
}

bool isReadByUpdatesOnly(OpOperand &use) {
  Operation *user = use.getOwner();
  if (isa<OptimizerUpdateOpInterface>(user))
    return true;
  if (!isa<tensor::ExtractSliceOp, tensor::CollapseShapeOp,
           tensor::ExpandShapeOp>(user))
    return false;
  return llvm::all_of(user->getResult(0).getUses(), isReadByUpdatesOnly);
}

bool isHostCall(Operation *op) {
  auto call = dyn_cast<func::CallOp>(op);
  auto callee = call ? SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
                           call, call.getCalleeAttr())
                     : func::FuncOp();
  return callee && callee->hasAttr(LoomDialect::getHostAttrName());
}

} // namespace offload
} // namespace loom
} // namespace mlir
