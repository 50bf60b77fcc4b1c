//===- PlaceOffload.cpp - The loom-place-offload pass ---------------------===//
//
// ZeRO-Offload as a placement of the training step: the optimizer's state,
// the f32 master weights and the updates live on the host, the device
// keeps a copy of the parameters in the step's precision. The host's part
// of the step becomes a function of its own, so that every later pass sees
// the boundary: its buffers are a static arena of its own (host memory),
// and each value that crosses it is an explicit loom.transfer.
//
//===----------------------------------------------------------------------===//

#include "Replicas.h"

#include "loom/Dialect/LoomDialect.h"
#include "loom/abi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMPLACEOFFLOAD
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
constexpr llvm::StringLiteral kHostFunctionName = "train_step_host";

bool isHostArgument(func::FuncOp step, Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg || arg.getOwner() != &step.getBody().front())
    return false;
  unsigned i = arg.getArgNumber();
  return step.getArgAttr(i, LoomDialect::getParamAttrName()) ||
         step.getArgAttr(i, LoomDialect::getStateAttrName());
}

/// The ops of the step's block that move to the host: the optimizer
/// updates, and the pure ops between the host's arguments (parameters,
/// state, constants) and the updates or the step's results (the views of
/// the parameters an update reads, the reshapes of what it returns).
FailureOr<llvm::SetVector<Operation *>> collectHostOps(func::FuncOp step) {
  Block &body = step.getBody().front();
  llvm::DenseSet<Value> host;
  for (BlockArgument arg : body.getArguments())
    if (isHostArgument(step, arg))
      host.insert(arg);
  SmallVector<Operation *> candidates;
  bool anyUpdate = false;
  for (Operation &op : body.without_terminator()) {
    bool update = isa<OptimizerUpdateOpInterface>(op);
    anyUpdate |= update;
    bool derived = isPure(&op) && op.getNumRegions() == 0 &&
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
    if (update || (hostUsers && !op->use_empty()))
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

/// The element type the device keeps parameter `param` in: the type every
/// function it is passed to converts it to at once (bf16, f16), or its own.
Type getCopyElementType(func::FuncOp step, BlockArgument param,
                        const llvm::SetVector<Operation *> &hostOps) {
  Type own = cast<RankedTensorType>(param.getType()).getElementType();
  Type narrow;
  for (OpOperand &use : param.getUses()) {
    Operation *user = use.getOwner();
    if (hostOps.contains(user))
      continue;
    auto call = dyn_cast<func::CallOp>(user);
    auto callee = call ? SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
                             call, call.getCalleeAttr())
                       : func::FuncOp();
    if (!callee || callee.isExternal())
      return own;
    BlockArgument arg = callee.getArgument(use.getOperandNumber());
    for (Operation *reader : arg.getUsers()) {
      auto convert = dyn_cast<ConvertOp>(reader);
      if (!convert || convert.getScale())
        return own;
      Type to = getElementTypeOrSelf(convert.getResult().getType());
      if (narrow && narrow != to)
        return own;
      narrow = to;
    }
  }
  return narrow ? narrow : own;
}

/// Calls the runtime's `name()`, declared on first use: the brackets that
/// tell it the host function's buffers are host memory.
void callRuntime(OpBuilder &b, ModuleOp module, Location loc, StringRef name) {
  auto callee = module.lookupSymbol<func::FuncOp>(name);
  if (!callee) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    callee = func::FuncOp::create(b, loc, name, b.getFunctionType({}, {}));
    callee.setPrivate();
  }
  func::CallOp::create(b, loc, callee, ValueRange());
}

struct PlaceOffloadPass
    : public loom::impl::LoomPlaceOffloadBase<PlaceOffloadPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan))
      return signalPassFailure();
    if (plan->offload == Offload::none)
      return;
    if (plan->offload != Offload::optimizer || plan->pp > 1 || plan->tp > 1 ||
        plan->zero == 1 || plan->zero == 2) {
      module.emitError() << "loom-place-offload places offload=optimizer "
                            "under data parallelism with ZeRO-0 or ZeRO-3 "
                            "only (docs/offload.md), not offload="
                         << stringifyOffload(plan->offload)
                         << " with pp = " << plan->pp << ", tp = " << plan->tp
                         << ", ZeRO-" << plan->zero;
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> step = getTrainStep(module);
    if (failed(step) || failed(place(module, *step)))
      return signalPassFailure();
  }

  LogicalResult place(ModuleOp module, func::FuncOp step);
};

/// What crosses into the host function, in the order of its arguments.
struct HostInputs {
  /// The master weights and optimizer state the host function updates.
  llvm::SetVector<Value> held;
  /// What the device computed (gradients, the clipping factor, the
  /// learning rate): each is transferred to host memory first.
  llvm::SetVector<Value> fromDevice;
};

HostInputs collectInputs(const llvm::SetVector<Operation *> &ops,
                         func::FuncOp step) {
  HostInputs inputs;
  // In the block's order: the set lists it from its end.
  for (Operation *op : llvm::reverse(ops))
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if ((def && ops.contains(def)) ||
          (def && def->hasTrait<OpTrait::ConstantLike>()))
        continue;
      (isHostArgument(step, v) ? inputs.held : inputs.fromDevice).insert(v);
    }
  return inputs;
}

LogicalResult PlaceOffloadPass::place(ModuleOp module, func::FuncOp step) {
  if (module.lookupSymbol(kHostFunctionName))
    return module.emitError()
           << "the module has a @" << kHostFunctionName << " already";
  FailureOr<llvm::SetVector<Operation *>> hostOps = collectHostOps(step);
  if (failed(hostOps))
    return failure();
  Block &body = step.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  MLIRContext *ctx = &getContext();
  Location loc = step.getLoc();
  Builder b(ctx);

  // The device's copy of each parameter, appended to the step's arguments;
  // what the device computes reads it, widened where the gradient function
  // narrows it again (the conversions fold away).
  llvm::MapVector<unsigned, BlockArgument> copies;
  unsigned numArgs = step.getNumArguments();
  for (unsigned i = 0; i < numArgs; ++i) {
    auto name =
        step.getArgAttrOfType<StringAttr>(i, LoomDialect::getParamAttrName());
    if (step.getArgAttr(i, LoomDialect::getParamAttrName()) ||
        step.getArgAttr(i, LoomDialect::getStateAttrName()))
      step.setArgAttr(i, LoomDialect::getHostAttrName(), b.getUnitAttr());
    if (!name)
      continue;
    BlockArgument param = step.getArgument(i);
    auto type = cast<RankedTensorType>(param.getType());
    Type element = getCopyElementType(step, param, *hostOps);
    auto copyType = RankedTensorType::get(type.getShape(), element);
    unsigned index = step.getNumArguments();
    if (failed(
            step.insertArgument(index, copyType,
                                b.getDictionaryAttr(b.getNamedAttr(
                                    LoomDialect::getParamCopyAttrName(), name)),
                                param.getLoc())))
      return failure();
    BlockArgument copy = step.getArgument(index);
    copies[i] = copy;
    OpBuilder atStart = OpBuilder::atBlockBegin(&body);
    Value read = copy;
    if (element != type.getElementType())
      read = ConvertOp::create(atStart, param.getLoc(), type, copy, Value());
    param.replaceUsesWithIf(read, [&](OpOperand &use) {
      return !hostOps->contains(use.getOwner()) && use.getOwner() != ret &&
             use.getOwner() != read.getDefiningOp();
    });
  }

  HostInputs inputs = collectInputs(*hostOps, step);
  // Which of the step's results the host computes: each updated parameter
  // and state tensor, by the argument it is the new value of.
  SmallVector<unsigned> hostResults;
  for (unsigned r = 0, e = ret.getNumOperands(); r < e; ++r) {
    Operation *def = ret.getOperand(r).getDefiningOp();
    if (def && hostOps->contains(def))
      hostResults.push_back(r);
  }

  // The host function: its arguments the held tensors, the device's values
  // and the copies it writes; its results the new held tensors, then the
  // new copies.
  SmallVector<Type> argTypes, resultTypes;
  for (Value v : inputs.held)
    argTypes.push_back(v.getType());
  for (Value v : inputs.fromDevice)
    argTypes.push_back(v.getType());
  SmallVector<std::pair<unsigned, BlockArgument>> copyResults;
  for (unsigned r : hostResults) {
    resultTypes.push_back(ret.getOperand(r).getType());
    auto updates = step.getResultAttrOfType<IntegerAttr>(
        r, LoomDialect::getUpdatesAttrName());
    if (!updates)
      return ret.emitOpError("returns a value the optimizer computes that "
                             "updates no argument (loom.updates)");
    auto copy = copies.find(updates.getInt());
    if (copy != copies.end())
      copyResults.push_back({r, copy->second});
  }
  for (auto [r, copy] : copyResults) {
    argTypes.push_back(copy.getType());
    resultTypes.push_back(copy.getType());
  }

  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  auto hostFn = func::FuncOp::create(mb, loc, kHostFunctionName,
                                     b.getFunctionType(argTypes, resultTypes));
  hostFn.setPrivate();
  hostFn.setNoInline(true);
  hostFn->setAttr(LoomDialect::getHostAttrName(), b.getUnitAttr());
  Block *entry = hostFn.addEntryBlock();
  OpBuilder hb = OpBuilder::atBlockBegin(entry);
  IRMapping mapping;
  unsigned a = 0;
  for (Value v : inputs.held)
    mapping.map(v, entry->getArgument(a++));
  for (Value v : inputs.fromDevice) {
    auto type = cast<RankedTensorType>(v.getType());
    Value buffer = tensor::EmptyOp::create(hb, v.getLoc(), type.getShape(),
                                           type.getElementType());
    mapping.map(v, TransferOp::create(hb, v.getLoc(), entry->getArgument(a++),
                                      buffer, Placement::host));
  }
  for (Operation &op : body.without_terminator()) {
    if (hostOps->contains(&op)) {
      for (Value v : op.getOperands())
        if (Operation *def = v.getDefiningOp();
            def && def->hasTrait<OpTrait::ConstantLike>() &&
            !mapping.contains(v))
          hb.clone(*def, mapping);
      hb.clone(op, mapping);
    }
  }
  SmallVector<Value> results;
  for (unsigned r : hostResults)
    results.push_back(mapping.lookup(ret.getOperand(r)));
  for (auto [r, copy] : copyResults) {
    Value master = mapping.lookup(ret.getOperand(r));
    auto copyType = cast<RankedTensorType>(copy.getType());
    if (copyType != master.getType())
      master = ConvertOp::create(hb, loc, copyType, master, Value());
    results.push_back(TransferOp::create(
        hb, loc, master, entry->getArgument(a++), Placement::device));
  }
  func::ReturnOp::create(hb, loc, results);

  // The step calls it last and returns what it computed; the copies' new
  // values as new results.
  OpBuilder sb(ret);
  SmallVector<Value> operands(inputs.held.begin(), inputs.held.end());
  operands.append(inputs.fromDevice.begin(), inputs.fromDevice.end());
  for (auto [r, copy] : copyResults)
    operands.push_back(copy);
  callRuntime(sb, module, loc, LOOM_RT_HOST_BEGIN);
  auto call = func::CallOp::create(sb, loc, hostFn, operands);
  call.setNoInline(true);
  callRuntime(sb, module, loc, LOOM_RT_HOST_END);
  for (auto [i, r] : llvm::enumerate(hostResults))
    ret->setOperand(r, call.getResult(i));
  SmallVector<Value> newResults(ret.getOperands());
  for (auto [i, entry] : llvm::enumerate(copyResults))
    newResults.push_back(call.getResult(hostResults.size() + i));
  // Readers first: the set lists the block's ops from its end.
  for (Operation *op : *hostOps)
    op->erase();
  unsigned firstNew = step.getNumResults();
  ret->setOperands(newResults);
  SmallVector<Type> stepResults(step.getResultTypes());
  for (auto [r, copy] : copyResults)
    stepResults.push_back(copy.getType());
  step.setType(b.getFunctionType(step.getArgumentTypes(), stepResults));
  for (auto [i, entry] : llvm::enumerate(copyResults))
    step.setResultAttr(firstNew + i, LoomDialect::getUpdatesAttrName(),
                       b.getI64IntegerAttr(entry.second.getArgNumber()));
  return success();
}
} // namespace
