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

#include "OffloadGradients.h"
#include "OffloadHostOps.h"
#include "Replicas.h"

#include "loom/Dialect/LoomDialect.h"
#include "loom/abi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
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
using namespace mlir::loom::offload;

namespace {
/// The host function's name is its step's with this suffix
/// (`@train_step_host`, a pipeline rank's `@train_step_stage<r>_host`).
constexpr llvm::StringLiteral kHostFunctionSuffix = "_host";
/// Its sums over the gradients that a collective of the device adds up
/// (`@train_step_host_sums`), called before the collective.
constexpr llvm::StringLiteral kHostSumsSuffix = "_sums";

/// The gradient function's result that `sent` carries to the host as it
/// is, or this rank's layers of (ZeRO-2's reduce-scatter along the layers),
/// when nothing else reads it: what can cross layer by layer.
OpResult getSentCallResult(TransferOp sent) {
  Value source = sent.getSource();
  if (auto rows = source.getDefiningOp<tensor::CollapseShapeOp>())
    if (auto layers = rows.getSrc().getDefiningOp<shard::ReduceScatterOp>();
        layers && rows->hasOneUse() && layers->hasOneUse())
      source = layers.getInput();
  auto grad = dyn_cast<OpResult>(source);
  if (!grad || !grad.hasOneUse() || !isa<func::CallOp>(grad.getOwner()))
    return {};
  return grad;
}

/// The element type the device keeps parameter `param` in: the type every
/// function it is passed to converts it to at once (bf16, f16), or its own.
Type getCopyElementType(BlockArgument param) {
  Type own = cast<RankedTensorType>(param.getType()).getElementType();
  Type narrow;
  for (OpOperand &use : param.getUses()) {
    Operation *user = use.getOwner();
    if (isReadByUpdatesOnly(use))
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
Operation *callRuntime(OpBuilder &b, ModuleOp module, Location loc,
                       StringRef name) {
  auto callee = module.lookupSymbol<func::FuncOp>(name);
  if (!callee) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    callee = func::FuncOp::create(b, loc, name, b.getFunctionType({}, {}));
    callee.setPrivate();
  }
  return func::CallOp::create(b, loc, callee, ValueRange());
}

/// The parameter argument an update's parameter operand is (ZeRO-0/3) or
/// views through a slice of its flattened form (ZeRO-1/2), and that view's
/// ops, outermost last.
struct UpdatedParam {
  BlockArgument arg;
  SmallVector<Operation *> views;
};

std::optional<UpdatedParam> getUpdatedParam(OptimizerUpdateOpInterface update) {
  UpdatedParam param;
  Value v = update.getUpdatedParam();
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<tensor::ExtractSliceOp, tensor::CollapseShapeOp,
             tensor::ExpandShapeOp>(def))
      return std::nullopt;
    param.views.push_back(def);
    v = def->getOperand(0);
  }
  param.arg = dyn_cast<BlockArgument>(v);
  if (!param.arg)
    return std::nullopt;
  return param;
}

/// Whether an update reads `param` through a slice of it (ZeRO-1/2: the
/// rank's part of the flattened parameter).
bool isUpdatedAsSlice(BlockArgument param) {
  Block *body = param.getOwner();
  return llvm::any_of(
      body->getOps<OptimizerUpdateOpInterface>(),
      [&](OptimizerUpdateOpInterface update) {
        std::optional<UpdatedParam> updated = getUpdatedParam(update);
        return updated && updated->arg == param &&
               llvm::any_of(updated->views,
                            llvm::IsaPred<tensor::ExtractSliceOp>);
      });
}

/// What crosses into the host function, in the order of its arguments.
struct HostInputs {
  /// The master weights and optimizer state the host function updates,
  /// and the gradients the device sent.
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
      (isHostValue(step, v) ? inputs.held : inputs.fromDevice).insert(v);
    }
  return inputs;
}

/// The host function's results: the step's results it computes (new
/// master weights and state), the copies it refreshes (ZeRO-0/3), then
/// what the device reads of its results (ZeRO-1/2's updated slices), each
/// of the last two transferred into a device buffer.
struct HostOutputs {
  SmallVector<unsigned> stepResults;
  SmallVector<std::pair<unsigned, BlockArgument>> copies;
  llvm::SetVector<Value> toDevice;
};

/// `value` copied into a new buffer of the memory `to` names.
Value transferToNewBuffer(OpBuilder &b, Value value, Placement to) {
  auto type = cast<RankedTensorType>(value.getType());
  Value buffer = tensor::EmptyOp::create(b, value.getLoc(), type.getShape(),
                                         type.getElementType());
  return TransferOp::create(b, value.getLoc(), value, buffer, to);
}

/// offload=parameters: the device's copies stay in host memory, and what
/// reads one fetches it into device memory first. A layer loop fetches
/// each layer's slice at the top of the iteration that reads it, in the
/// forward and in the backward pass (each its own loop); any other reader
/// fetches the whole tensor just before it. Conversions and calls pass the
/// copy on: the step's widening and the gradient function's narrowing fold
/// away once it is inlined, leaving the fetch reading the copy.
class ParameterFetches {
public:
  void fetchWhereRead(Value copy);

private:
  llvm::DenseSet<Value> visited;
};

void ParameterFetches::fetchWhereRead(Value copy) {
  if (!visited.insert(copy).second)
    return;
  for (OpOperand &use : llvm::make_early_inc_range(copy.getUses())) {
    Operation *user = use.getOwner();
    if (auto convert = dyn_cast<ConvertOp>(user);
        convert && !convert.getScale()) {
      fetchWhereRead(convert.getResult());
      continue;
    }
    if (auto call = dyn_cast<func::CallOp>(user)) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr());
      // The host's own function reads the copy where it lies.
      if (isHostCall(call))
        continue;
      if (callee && !callee.isExternal()) {
        fetchWhereRead(callee.getArgument(use.getOperandNumber()));
        continue;
      }
    }
    OpBuilder b(user);
    if (auto scan = dyn_cast<ScanOp>(user);
        scan && use.getOperandNumber() >= scan.getNumCarries()) {
      BlockArgument slice =
          scan.getBodyBlock().getArgument(use.getOperandNumber());
      if (!visited.insert(slice).second)
        continue;
      b.setInsertionPointToStart(&scan.getBodyBlock());
      Value fetched = transferToNewBuffer(b, slice, Placement::device);
      slice.replaceAllUsesExcept(fetched, fetched.getDefiningOp());
      continue;
    }
    use.set(transferToNewBuffer(b, copy, Placement::device));
  }
}

/// The rewriting of one training step for offload=optimizer, and with
/// `copiesOnHost` for offload=parameters.
class OffloadPlacement {
public:
  OffloadPlacement(ModuleOp module, func::FuncOp step, bool copiesOnHost)
      : module(module), step(step), body(step.getBody().front()),
        ret(cast<func::ReturnOp>(body.getTerminator())), b(step.getContext()),
        hostName((step.getSymName() + kHostFunctionSuffix).str()),
        copiesOnHost(copiesOnHost) {}

  LogicalResult run();

private:
  LogicalResult addCopies();
  LogicalResult shardMasters();
  LogicalResult sendGradients();
  LogicalResult outline(const llvm::SetVector<Operation *> &hostOps,
                        StringRef name);
  func::FuncOp buildHostFunction(StringRef name,
                                 const llvm::SetVector<Operation *> &hostOps,
                                 const HostInputs &inputs,
                                 const HostOutputs &outputs,
                                 ValueRange operands);
  std::optional<unsigned> resultUpdating(unsigned arg);
  void narrowGathers();

  ModuleOp module;
  func::FuncOp step;
  Block &body;
  func::ReturnOp ret;
  Builder b;
  std::string hostName;
  /// offload=parameters: the copies are host memory too.
  bool copiesOnHost;
  /// Where the copies are kept between steps.
  Placement copyPlacement() const {
    return copiesOnHost ? Placement::host : Placement::device;
  }
  /// Each parameter's argument number and its device copy.
  llvm::MapVector<unsigned, BlockArgument> copies;
  /// offload=parameters: the masters the device fetches itself, which no
  /// copy duplicates (the step's precision is theirs).
  SmallVector<BlockArgument> fetchedMasters;
  /// ZeRO-1/2: each copy's new value is the whole parameter the device
  /// gathers from the ranks' updated parts, converted.
  SmallVector<std::pair<BlockArgument, Value>> gatheredCopies;
};

std::optional<unsigned> OffloadPlacement::resultUpdating(unsigned arg) {
  for (unsigned r = 0, e = step.getNumResults(); r < e; ++r)
    if (auto updates = step.getResultAttrOfType<IntegerAttr>(
            r, LoomDialect::getUpdatesAttrName());
        updates && updates.getInt() == arg)
      return r;
  return std::nullopt;
}

LogicalResult OffloadPlacement::addCopies() {
  // The device's copy of each parameter, appended to the step's arguments;
  // what the device computes reads it, widened where the gradient function
  // narrows it again (the conversions fold away).
  unsigned numArgs = step.getNumArguments();
  for (unsigned i = 0; i < numArgs; ++i) {
    if (step.getArgAttr(i, LoomDialect::getParamAttrName()) ||
        step.getArgAttr(i, LoomDialect::getStateAttrName()))
      step.setArgAttr(i, LoomDialect::getHostAttrName(), b.getUnitAttr());
    auto name =
        step.getArgAttrOfType<StringAttr>(i, LoomDialect::getParamAttrName());
    if (!name)
      continue;
    BlockArgument param = step.getArgument(i);
    auto type = cast<RankedTensorType>(param.getType());
    Type element = getCopyElementType(param);
    // offload=parameters in the masters' own precision: a copy in host
    // memory would hold the master's values twice, so the device fetches
    // the master itself. Not a master ZeRO-1/2 slice, whose copy is the
    // whole the device gathers.
    if (copiesOnHost && element == type.getElementType() &&
        !isUpdatedAsSlice(param)) {
      fetchedMasters.push_back(param);
      continue;
    }
    unsigned index = step.getNumArguments();
    if (failed(step.insertArgument(
            index, RankedTensorType::get(type.getShape(), element),
            b.getDictionaryAttr(
                b.getNamedAttr(LoomDialect::getParamCopyAttrName(), name)),
            param.getLoc())))
      return failure();
    BlockArgument copy = step.getArgument(index);
    copies[i] = copy;
    OpBuilder atStart = OpBuilder::atBlockBegin(&body);
    Value read = copy;
    if (element != type.getElementType())
      read = ConvertOp::create(atStart, param.getLoc(), type, copy, Value());
    param.replaceUsesWithIf(read, [&](OpOperand &use) {
      return !isReadByUpdatesOnly(use) && use.getOwner() != ret &&
             use.getOwner() != read.getDefiningOp();
    });
  }
  return success();
}

LogicalResult OffloadPlacement::shardMasters() {
  // ZeRO-1/2: each rank updates its slice of the flattened parameter, and
  // the step returns the whole gathered from the ranks' slices. The host
  // keeps only the slice of the master: the argument becomes it
  // (`loom.shard = 0` of the flattened tensor), the update's result is its
  // new value, and what the device gathers, converted, is the copy's.
  SmallVector<OptimizerUpdateOpInterface> updates(
      body.getOps<OptimizerUpdateOpInterface>());
  for (OptimizerUpdateOpInterface update : updates) {
    std::optional<UpdatedParam> param = getUpdatedParam(update);
    if (!param || param->arg.getOwner() != &body ||
        !copies.count(param->arg.getArgNumber()) ||
        llvm::none_of(param->views, [](Operation *view) {
          return isa<tensor::ExtractSliceOp>(view);
        }))
      continue;
    unsigned argNumber = param->arg.getArgNumber();
    std::optional<unsigned> r = resultUpdating(argNumber);
    if (!r)
      return update->emitOpError("updates a parameter the step returns no "
                                 "new value of (loom.updates)");
    gatheredCopies.push_back({copies[argNumber], ret.getOperand(*r)});
    ret->setOperand(*r, update.getNewParamValue());
    Value slice = update.getUpdatedParam();
    if (!llvm::all_of(param->arg.getUses(), isReadByUpdatesOnly))
      return update->emitOpError("updates a slice of a parameter the device "
                                 "reads besides");
    param->arg.setType(slice.getType());
    // The slice is of the flattened part that tensor parallelism or a
    // pipeline stage gave the rank: the device's copy, that part whole,
    // keeps its layout.
    for (StringRef attr : {LoomDialect::getTensorSplitAttrName(),
                           LoomDialect::getLayersAttrName()})
      if (Attribute layout = step.getArgAttr(argNumber, attr)) {
        step.setArgAttr(copies[argNumber].getArgNumber(), attr, layout);
        step.removeArgAttr(argNumber, attr);
      }
    slice.replaceAllUsesWith(param->arg);
    for (Operation *view : param->views)
      if (view->use_empty())
        view->erase();
    step.setArgAttr(argNumber, LoomDialect::getShardAttrName(),
                    b.getI64IntegerAttr(0));
  }
  step.setType(
      b.getFunctionType(body.getArgumentTypes(), ret.getOperandTypes()));
  narrowGathers();
  return success();
}

/// ZeRO-1/2 with copies narrower than the masters: the updated slices are
/// narrowed on the host, and cross to the device and are gathered (through
/// the reshapes and the buckets of the collective) in the copies'
/// precision: converting the gathered wholes gives the same elements, from
/// fewer bytes moved. Only where every copy the data movement reaches has
/// the same narrow type, and it moves nothing else.
void OffloadPlacement::narrowGathers() {
  if (gatheredCopies.empty())
    return;
  Type narrow = getElementTypeOrSelf(gatheredCopies.front().first.getType());
  for (auto [copy, whole] : gatheredCopies)
    if (getElementTypeOrSelf(copy.getType()) != narrow ||
        getElementTypeOrSelf(whole.getType()) == narrow)
      return;
  llvm::DenseSet<Value> slices;
  for (OptimizerUpdateOpInterface update :
       body.getOps<OptimizerUpdateOpInterface>())
    slices.insert(update.getNewParamValue());
  // The data movement from the slices to the wholes, in block order.
  llvm::SetVector<Operation *> moves;
  SmallVector<Value> work(slices.begin(), slices.end());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (user == ret || moves.contains(user))
        continue;
      if (!isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
               tensor::InsertSliceOp, tensor::ExtractSliceOp,
               shard::AllGatherOp>(user))
        return;
      moves.insert(user);
      work.append(user->result_begin(), user->result_end());
    }
  }
  for (Operation *op : moves) {
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (isa<RankedTensorType>(operand.getType()) &&
          !slices.contains(operand) && !moves.contains(def) &&
          !isa_and_nonnull<tensor::EmptyOp>(def))
        return;
    }
    for (Value result : op->getResults())
      for (Operation *user : result.getUsers())
        if (!moves.contains(user))
          return;
  }
  SmallVector<Operation *> ordered(moves.begin(), moves.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  auto narrowed = [&](Type type) {
    return cast<RankedTensorType>(type).clone(narrow);
  };
  IRMapping map;
  OpBuilder ob(step.getContext());
  for (Value slice : slices)
    if (llvm::any_of(slice.getUsers(),
                     [&](Operation *user) { return moves.contains(user); })) {
      ob.setInsertionPointAfterValue(slice);
      map.map(slice,
              ConvertOp::create(ob, slice.getLoc(), narrowed(slice.getType()),
                                slice, Value()));
    }
  for (Operation *op : ordered) {
    ob.setInsertionPoint(op);
    for (Value operand : op->getOperands())
      if (auto empty = operand.getDefiningOp<tensor::EmptyOp>();
          empty && !map.contains(operand))
        map.map(operand,
                tensor::EmptyOp::create(ob, empty.getLoc(),
                                        narrowed(empty.getType()).getShape(),
                                        narrow, empty.getDynamicSizes()));
    Operation *clone = ob.clone(*op, map);
    for (Value result : clone->getResults())
      if (isa<RankedTensorType>(result.getType()))
        result.setType(narrowed(result.getType()));
  }
  for (auto &[copy, whole] : gatheredCopies)
    whole = map.lookup(whole);
  for (Operation *op : llvm::reverse(ordered))
    op->erase();
}

LogicalResult OffloadPlacement::sendGradients() {
  // Each gradient an update reads crosses to the host where the device
  // has it whole, into host memory of its own (a `grad.<name>` output the
  // runtime holds, as ZeRO-Offload's pinned gradient buffers): the device
  // keeps none of them until the host's update, and a layer loop's can
  // cross layer by layer (loom-stream-transfers). What reads a gradient
  // on the way to the updates alone (the clipping norm, where no
  // collective sums it) reads the host's.
  llvm::DenseMap<Operation *, bool> hostOnly;
  llvm::DenseMap<Operation *, Operation *> lastSent;
  llvm::MapVector<Value, TransferOp> sent;
  SmallVector<OptimizerUpdateOpInterface> updates(
      body.getOps<OptimizerUpdateOpInterface>());
  for (OptimizerUpdateOpInterface update : updates) {
    Value grad = update.getUpdateGrad();
    std::optional<UpdatedParam> param = getUpdatedParam(update);
    auto name =
        param ? step.getArgAttrOfType<StringAttr>(
                    param->arg.getArgNumber(), LoomDialect::getParamAttrName())
              : StringAttr();
    Operation *def = grad.getDefiningOp();
    if (!name || !def || def->getBlock() != &body || isHostValue(step, grad))
      continue;
    unsigned index = step.getNumArguments();
    SmallVector<NamedAttribute> attrs = {
        b.getNamedAttr(LoomDialect::getHostAttrName(), b.getUnitAttr()),
        b.getNamedAttr(
            LoomDialect::getOutputAttrName(),
            b.getStringAttr(LOOM_OUTPUT_GRAD_PREFIX + name.getValue()))};
    if (failed(step.insertArgument(index, grad.getType(),
                                   b.getDictionaryAttr(attrs), grad.getLoc())))
      return failure();
    Operation *&after = lastSent[def];
    OpBuilder ob(step.getContext());
    ob.setInsertionPointAfter(after ? after : def);
    after = TransferOp::create(ob, grad.getLoc(), grad, step.getArgument(index),
                               Placement::host);
    sent.insert({grad, cast<TransferOp>(after)});
  }
  // A sum over gradients alone that a collective then adds up over ranks
  // (the norm's sums of squares) reads the host's too: the host computes
  // it before the device's collective (collectHostSums).
  llvm::DenseSet<Value> arrived;
  for (auto [grad, transfer] : sent)
    arrived.insert(transfer.getResult());
  auto readsSentOnly = [&](Operation *op) {
    return isHostComputable(op) &&
           llvm::all_of(op->getOperands(), [&](Value v) {
             Operation *def = v.getDefiningOp();
             return sent.count(v) || arrived.contains(v) ||
                    (def && def->hasTrait<OpTrait::ConstantLike>());
           });
  };
  for (auto [grad, transfer] : sent)
    grad.replaceUsesWithIf(transfer.getResult(), [&](OpOperand &use) {
      Operation *user = use.getOwner();
      return user != transfer &&
             (feedsOnlyHost(user, hostOnly) || readsSentOnly(user));
    });
  return success();
}

LogicalResult OffloadPlacement::run() {
  std::string sumsName = hostName + kHostSumsSuffix.str();
  for (StringRef name : {StringRef(hostName), StringRef(sumsName)})
    if (module.lookupSymbol(name))
      return module.emitError() << "the module has a @" << name << " already";
  if (failed(addCopies()) || failed(shardMasters()) || failed(sendGradients()))
    return failure();
  llvm::SetVector<Operation *> sums = collectHostSums(step);
  if (!sums.empty() && failed(outline(sums, sumsName)))
    return failure();
  FailureOr<llvm::SetVector<Operation *>> hostOps = collectHostOps(step);
  if (failed(hostOps))
    return failure();
  // A device op cannot read host memory: one that mixes a sent gradient
  // with the device's values (the norm under ZeRO-1, over the reduced
  // whole) reads the device's gradient, which then does not stream.
  for (TransferOp sent : body.getOps<TransferOp>())
    for (OpOperand &use :
         llvm::make_early_inc_range(sent.getResult().getUses()))
      if (!hostOps->contains(use.getOwner()) && !isHostCall(use.getOwner()))
        use.set(sent.getSource());
  // A gradient the device sends and reads no more may cross layer by layer,
  // in every micro-batch where the host sums them.
  SmallVector<TransferOp> sends;
  for (TransferOp sent :
       llvm::make_early_inc_range(body.getOps<TransferOp>())) {
    if (TransferOp summed = accumulateOnHost(sent)) {
      sends.push_back(summed);
      continue;
    }
    SmallVector<TransferOp> summed = accumulateCallsOnHost(sent);
    if (summed.empty())
      sends.push_back(sent);
    llvm::append_range(sends, summed);
  }
  for (TransferOp sent : sends)
    if (OpResult grad = getSentCallResult(sent))
      widenInLoop(cast<func::CallOp>(grad.getOwner()), grad.getResultNumber());
  if (failed(outline(*hostOps, hostName)))
    return failure();
  // The copies the device gathers: the whole parameter, converted.
  OpBuilder sb(ret);
  SmallVector<Value> results(ret.getOperands());
  SmallVector<Type> types(step.getResultTypes());
  SmallVector<unsigned> copyArgs;
  for (auto [copy, gathered] : gatheredCopies) {
    Value value = gathered;
    // Converted and sent as soon as it is gathered, so that the device
    // holds one gathered parameter at a time, not all of them at the end.
    sb.setInsertionPointAfterValue(gathered);
    if (value.getType() != copy.getType())
      value =
          ConvertOp::create(sb, ret.getLoc(), copy.getType(), value, Value());
    // The device gathered the whole; the host keeps it.
    if (copiesOnHost)
      value =
          TransferOp::create(sb, ret.getLoc(), value, copy, Placement::host);
    results.push_back(value);
    types.push_back(copy.getType());
    copyArgs.push_back(copy.getArgNumber());
  }
  unsigned first = step.getNumResults();
  ret->setOperands(results);
  step.setType(b.getFunctionType(step.getArgumentTypes(), types));
  for (auto [i, arg] : llvm::enumerate(copyArgs))
    step.setResultAttr(first + i, LoomDialect::getUpdatesAttrName(),
                       b.getI64IntegerAttr(arg));
  if (copiesOnHost) {
    ParameterFetches fetches;
    for (auto [i, copy] : copies) {
      step.setArgAttr(copy.getArgNumber(), LoomDialect::getHostAttrName(),
                      b.getUnitAttr());
      fetches.fetchWhereRead(copy);
    }
    for (BlockArgument master : fetchedMasters)
      fetches.fetchWhereRead(master);
  }
  return success();
}

LogicalResult
OffloadPlacement::outline(const llvm::SetVector<Operation *> &hostOps,
                          StringRef name) {
  HostInputs inputs = collectInputs(hostOps, step);
  HostOutputs outputs;
  llvm::DenseSet<unsigned> gathered;
  for (auto [copy, value] : gatheredCopies)
    gathered.insert(copy.getArgNumber());
  for (unsigned r = 0, e = ret.getNumOperands(); r < e; ++r) {
    Operation *def = ret.getOperand(r).getDefiningOp();
    if (!def || !hostOps.contains(def))
      continue;
    auto updates = step.getResultAttrOfType<IntegerAttr>(
        r, LoomDialect::getUpdatesAttrName());
    // An output the host computes (the gradient norm) goes where the
    // runtime receives the step's outputs, the device's memory.
    if (!updates && step.getResultAttr(r, LoomDialect::getOutputAttrName())) {
      if (!isa<RankedTensorType>(ret.getOperand(r).getType()))
        return ret.emitOpError("returns an output the host computes that is "
                               "no tensor; it cannot cross to the device");
      outputs.toDevice.insert(ret.getOperand(r));
      continue;
    }
    outputs.stepResults.push_back(r);
    if (!updates)
      return ret.emitOpError("returns a value the host computes that is "
                             "neither an output nor updates an argument "
                             "(loom.updates)");
    auto copy = copies.find(updates.getInt());
    if (copy != copies.end() && !gathered.contains(copy->second.getArgNumber()))
      outputs.copies.push_back({r, copy->second});
  }
  // The call goes where the device first reads what the host computed, or
  // last; everything the host reads must be made before that.
  Operation *at = ret;
  for (Operation &op : body.without_terminator())
    if (!hostOps.contains(&op) && llvm::any_of(op.getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return def && hostOps.contains(def);
        })) {
      at = &op;
      break;
    }
  for (Operation *op : hostOps)
    for (Value v : op->getResults())
      for (Operation *user : v.getUsers())
        if (user != ret && !hostOps.contains(user))
          outputs.toDevice.insert(v);
  for (Value v : llvm::concat<const Value>(inputs.held, inputs.fromDevice))
    if (Operation *def = v.getDefiningOp();
        def && def->getBlock() == &body && !def->isBeforeInBlock(at))
      return def->emitOpError("is made after the device reads the optimizer's "
                              "results; the host's update cannot be placed");

  Location loc = step.getLoc();
  OpBuilder sb(at);
  SmallVector<Value> operands(inputs.held.begin(), inputs.held.end());
  operands.append(inputs.fromDevice.begin(), inputs.fromDevice.end());
  for (auto [r, copy] : outputs.copies)
    operands.push_back(copy);
  for (Value v : outputs.toDevice) {
    auto type = cast<RankedTensorType>(v.getType());
    operands.push_back(tensor::EmptyOp::create(sb, v.getLoc(), type.getShape(),
                                               type.getElementType()));
  }
  func::FuncOp hostFn =
      buildHostFunction(name, hostOps, inputs, outputs, operands);
  Operation *begin = callRuntime(sb, module, loc, LOOM_RT_HOST_BEGIN);
  auto call = func::CallOp::create(sb, loc, hostFn, operands);
  call.setNoInline(true);
  Operation *end = callRuntime(sb, module, loc, LOOM_RT_HOST_END);
  // The timeline's optimizer span is the host's update now.
  for (auto trace : llvm::make_early_inc_range(body.getOps<TraceBeginOp>()))
    if (trace.getSpan() == TraceSpan::optimizer)
      trace->moveBefore(begin);
  for (auto trace : llvm::make_early_inc_range(body.getOps<TraceEndOp>()))
    if (trace.getSpan() == TraceSpan::optimizer)
      trace->moveAfter(end);

  unsigned next = 0;
  for (unsigned r : outputs.stepResults)
    ret->setOperand(r, call.getResult(next++));
  SmallVector<Value> copyResults;
  for (size_t i = 0; i < outputs.copies.size(); ++i)
    copyResults.push_back(call.getResult(next++));
  for (Value v : outputs.toDevice)
    v.replaceUsesWithIf(call.getResult(next++), [&](OpOperand &use) {
      return !hostOps.contains(use.getOwner());
    });
  // Readers first: the set lists the block's ops from its end.
  for (Operation *op : hostOps)
    op->erase();

  SmallVector<Value> results(ret.getOperands());
  results.append(copyResults);
  unsigned first = step.getNumResults();
  ret->setOperands(results);
  SmallVector<Type> types(step.getResultTypes());
  for (auto [r, copy] : outputs.copies)
    types.push_back(copy.getType());
  step.setType(b.getFunctionType(step.getArgumentTypes(), types));
  for (auto [i, entry] : llvm::enumerate(outputs.copies))
    step.setResultAttr(first + i, LoomDialect::getUpdatesAttrName(),
                       b.getI64IntegerAttr(entry.second.getArgNumber()));
  return success();
}

func::FuncOp OffloadPlacement::buildHostFunction(
    StringRef name, const llvm::SetVector<Operation *> &hostOps,
    const HostInputs &inputs, const HostOutputs &outputs, ValueRange operands) {
  SmallVector<Type> resultTypes;
  for (unsigned r : outputs.stepResults)
    resultTypes.push_back(ret.getOperand(r).getType());
  for (auto [r, copy] : outputs.copies)
    resultTypes.push_back(copy.getType());
  for (Value v : outputs.toDevice)
    resultTypes.push_back(v.getType());
  Location loc = step.getLoc();
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  auto hostFn = func::FuncOp::create(
      mb, loc, name, b.getFunctionType(TypeRange(operands), resultTypes));
  hostFn.setPrivate();
  hostFn.setNoInline(true);
  hostFn->setAttr(LoomDialect::getHostAttrName(), b.getUnitAttr());
  Block *entry = hostFn.addEntryBlock();
  OpBuilder hb = OpBuilder::atBlockBegin(entry);
  IRMapping mapping;
  unsigned a = 0;
  for (Value v : inputs.held)
    mapping.map(v, entry->getArgument(a++));
  for (Value v : inputs.fromDevice)
    mapping.map(
        v, transferToNewBuffer(hb, entry->getArgument(a++), Placement::host));
  for (Operation &op : body.without_terminator()) {
    if (!hostOps.contains(&op))
      continue;
    for (Value v : op.getOperands())
      if (Operation *def = v.getDefiningOp();
          def && def->hasTrait<OpTrait::ConstantLike>() && !mapping.contains(v))
        hb.clone(*def, mapping);
    hb.clone(op, mapping);
  }
  SmallVector<Value> results;
  for (unsigned r : outputs.stepResults)
    results.push_back(mapping.lookup(ret.getOperand(r)));
  for (auto [r, copy] : outputs.copies) {
    Value master = mapping.lookup(ret.getOperand(r));
    if (copy.getType() != master.getType())
      master = ConvertOp::create(hb, loc, copy.getType(), master, Value());
    results.push_back(TransferOp::create(
        hb, loc, master, entry->getArgument(a++), copyPlacement()));
  }
  for (Value v : outputs.toDevice)
    results.push_back(TransferOp::create(hb, v.getLoc(), mapping.lookup(v),
                                         entry->getArgument(a++),
                                         Placement::device));
  func::ReturnOp::create(hb, loc, results);
  return hostFn;
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
    // Each pipeline rank's step keeps its own parameters' masters and state.
    FailureOr<SmallVector<func::FuncOp>> steps = getSteps(module, *plan);
    if (failed(steps))
      return signalPassFailure();
    for (func::FuncOp step : *steps)
      if (failed(OffloadPlacement(module, step,
                                  plan->offload == Offload::parameters)
                     .run()))
        return signalPassFailure();
  }
};
} // namespace
