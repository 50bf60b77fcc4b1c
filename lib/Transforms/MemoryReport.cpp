//===- MemoryReport.cpp - The loom-memory-report pass ---------------------===//
//
// What one rank keeps, read off the compiled step rather than predicted:
// between steps, the types of its parameter and optimizer state arguments
// and of the gradients its updates read slices of; within a micro-batch,
// the activations its forward pass keeps for the backward pass.
//
//===----------------------------------------------------------------------===//

#include "Replicas.h"

#include "loom/Plan/Planner.h"
#include "loom/Plan/Schedule.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMMEMORYREPORT
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
int64_t bytesOf(Type type) { return getStaticBytes(cast<ShapedType>(type)); }

/// Bytes one micro-batch's forward pass keeps for its backward pass.
struct KeptActivations {
  int64_t perLayer = 0, layers = 0, outside = 0;
  int64_t total() const { return perLayer * layers + outside; }
};

/// The bytes of `value`, a kept activation, and the layer loop that stacks
/// it (null for one outside the layers).
FailureOr<std::pair<int64_t, ScanOp>> keptBytes(Value value) {
  auto type = dyn_cast<ShapedType>(value.getType());
  if (!type || !type.hasStaticShape())
    return emitError(value.getLoc())
           << "the backward pass reads an activation of unknown size";
  auto scan = value.getDefiningOp<ScanOp>();
  if (scan && llvm::is_contained(scan.getCarryResults(), value))
    scan = ScanOp();
  return std::make_pair(bytesOf(type), scan);
}

/// The activations @forward_grad keeps: the data it reads and the values
/// computed from them that the loss's computation produces and an op
/// outside it (the backward pass) reads. A layer loop's stacked results are
/// per layer; everything else is outside the layers. Values computed from
/// parameters alone (a gathered ZeRO-3 part, say) are not activations.
FailureOr<KeptActivations> measureKeptActivations(func::FuncOp grad) {
  Region &region = grad.getBody();
  Block &body = region.front();
  Operation *terminator = body.getTerminator();
  // Values of the function's own block an op reads, its regions included.
  auto forEachTopLevelOperand = [&](Operation *op,
                                    function_ref<void(Value)> fn) {
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (operand.getParentRegion() == &region)
          fn(operand);
    });
  };

  llvm::SmallPtrSet<Operation *, 32> forward;
  SmallVector<Value> worklist;
  for (unsigned i = 0, e = grad.getNumResults(); i < e; ++i)
    if (grad.getResultAttr(i, LoomDialect::getOutputAttrName()))
      worklist.push_back(terminator->getOperand(i));
  if (worklist.empty())
    return emitError(grad.getLoc())
           << "@" << grad.getName() << " returns no loom.output (the loss)";
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (def && forward.insert(def).second)
      forEachTopLevelOperand(def, [&](Value v) { worklist.push_back(v); });
  }

  llvm::SetVector<Value> data;
  for (BlockArgument arg : grad.getArguments())
    if (grad.getArgAttr(arg.getArgNumber(), LoomDialect::getInputAttrName()))
      data.insert(arg);
  for (Operation &op : body.without_terminator()) {
    bool fromData = false;
    forEachTopLevelOperand(&op, [&](Value v) { fromData |= data.contains(v); });
    if (fromData && forward.contains(&op))
      data.insert(op.result_begin(), op.result_end());
  }

  KeptActivations kept;
  for (Value value : data) {
    bool readByBackward = llvm::any_of(value.getUsers(), [&](Operation *user) {
      Operation *op = body.findAncestorOpInBlock(*user);
      return op != terminator && !forward.contains(op);
    });
    if (!readByBackward)
      continue;
    FailureOr<std::pair<int64_t, ScanOp>> bytes = keptBytes(value);
    if (failed(bytes))
      return failure();
    auto [size, scan] = *bytes;
    if (!scan) {
      kept.outside += size;
      continue;
    }
    int64_t length = scan.getLength();
    if (kept.layers != 0 && kept.layers != length)
      return emitError(scan.getLoc()) << "layer loops of " << kept.layers
                                      << " and " << length << " layers";
    kept.layers = length;
    kept.perLayer += size / length;
  }
  return kept;
}

/// A rank's step, measured: its parameter and optimizer state arguments
/// and the gradients its updates read slices of.
/// Under offload (loom-place-offload), the parameters are the device's
/// copies and the optimizer state none; `host` is the master weights,
/// state and gradients the host keeps.
struct StepMemory {
  int64_t parameters = 0, gradients = 0, optimizer = 0;
  std::optional<int64_t> host;
  /// Of `host`, the copies of the parameters the device fetches
  /// (offload=parameters).
  int64_t hostCopies = 0;
};

/// The step's function, and the host function it calls with its updates
/// (offload).
SmallVector<func::FuncOp> getUpdatingFunctions(func::FuncOp step) {
  SmallVector<func::FuncOp> functions = {step};
  step.walk([&](func::CallOp call) {
    auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
        call, call.getCalleeAttr());
    if (callee && callee->hasAttr(LoomDialect::getHostAttrName()))
      functions.push_back(callee);
  });
  return functions;
}

FailureOr<StepMemory> measureStep(func::FuncOp step) {
  StepMemory memory;
  for (BlockArgument arg : step.getArguments()) {
    auto shaped = dyn_cast<ShapedType>(arg.getType());
    if (!shaped || !shaped.hasStaticShape())
      continue;
    unsigned i = arg.getArgNumber();
    // Offload: the master weights and the state are the host's, apart.
    if (step.getArgAttr(i, LoomDialect::getHostAttrName())) {
      memory.host = memory.host.value_or(0) + bytesOf(shaped);
      if (step.getArgAttr(i, LoomDialect::getParamCopyAttrName()))
        memory.hostCopies += bytesOf(shaped);
    } else if (step.getArgAttr(i, LoomDialect::getParamAttrName()))
      memory.parameters += bytesOf(shaped);
    else if (step.getArgAttr(i, LoomDialect::getStateAttrName()))
      memory.optimizer += bytesOf(shaped);
    else if (step.getArgAttr(i, LoomDialect::getParamCopyAttrName()))
      memory.parameters += bytesOf(shaped);
  }
  // The tensors the updates' gradients are views of: the whole reduced
  // gradients (or their buckets) when each rank updates a slice of them
  // (ZeRO-1), the reduce-scattered shards from ZeRO-2 on. Under offload the
  // host function's updates read host memory, which `host` counts (the
  // gradients the device sent, step arguments of the host's).
  llvm::SetVector<Value> held;
  for (func::FuncOp function : getUpdatingFunctions(step)) {
    if (function->hasAttr(LoomDialect::getHostAttrName()))
      continue;
    function.walk([&](OptimizerUpdateOpInterface update) {
      Value grad = update.getUpdateGrad();
      while (Operation *def = grad.getDefiningOp()) {
        if (!isa<tensor::ExtractSliceOp, tensor::CollapseShapeOp,
                 tensor::ExpandShapeOp>(def))
          break;
        grad = def->getOperand(0);
      }
      held.insert(grad);
    });
  }
  for (Value grad : held) {
    auto type = dyn_cast<ShapedType>(grad.getType());
    if (!type || !type.hasStaticShape())
      return emitError(grad.getLoc(), "an optimizer update reads a gradient "
                                      "of unknown size");
    memory.gradients += bytesOf(type);
  }
  return memory;
}

/// What a pipeline rank's forward passes keep for their backward passes,
/// one micro-batch of each of its chunks: the values the forward halves of
/// its stages return after their output (loom-build-train-step split each
/// stage's gradient function so that they are exactly those), or, where
/// the backward pass reruns a forward half (a call marked
/// `loom.recompute`), the activations that call takes.
FailureOr<KeptActivations> measurePipelineActivations(func::FuncOp step) {
  KeptActivations kept;
  llvm::SetVector<func::FuncOp> forwards, reruns;
  step.walk([&](func::CallOp call) {
    auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
        call, call.getCalleeAttr());
    // The forward halves return the stage's output first; the backward
    // halves take its gradient last.
    if (callee && !callee.isExternal() && callee.getNumResults() > 0 &&
        callee.getResultAttr(0, LoomDialect::getOutputAttrName()) &&
        !takesOutputGradient(callee))
      (call->hasAttr(LoomDialect::getRecomputeAttrName()) ? reruns : forwards)
          .insert(callee);
  });
  for (func::FuncOp rerun : reruns) {
    for (BlockArgument arg : rerun.getArguments()) {
      auto input = rerun.getArgAttrOfType<StringAttr>(
          arg.getArgNumber(), LoomDialect::getInputAttrName());
      if (!input || input != LoomDialect::getActivationsName())
        continue;
      FailureOr<std::pair<int64_t, ScanOp>> bytes = keptBytes(arg);
      if (failed(bytes))
        return failure();
      kept.outside += bytes->first;
    }
    rerun.walk([&](ScanOp scan) { kept.layers += scan.getLength(); });
  }
  for (func::FuncOp forward : forwards) {
    // A stage's forward pass alone, whose backward pass reruns it.
    if (reruns.contains(forward) || forward.getNumResults() == 1)
      continue;
    Operation *ret = forward.getBody().front().getTerminator();
    for (Value value : ret->getOperands().drop_front()) {
      // A grid index (a tensor-parallel rank's) is a scalar, not an
      // activation.
      if (value.getType().isIndex())
        continue;
      FailureOr<std::pair<int64_t, ScanOp>> bytes = keptBytes(value);
      if (failed(bytes))
        return failure();
      // A rank's chunks differ in length: count layers, not loops.
      (bytes->second ? kept.perLayer : kept.outside) += bytes->first;
    }
    forward.walk([&](ScanOp scan) { kept.layers += scan.getLength(); });
  }
  // Per layer over all the rank's layers.
  if (kept.layers > 0)
    kept.perLayer /= kept.layers;
  return kept;
}

DictionaryAttr memoryAttr(Builder &b, const StepMemory &memory,
                          const KeptActivations &kept) {
  SmallVector<NamedAttribute> figures;
  for (auto [key, bytes] :
       llvm::zip(LoomDialect::getMemoryKeys(),
                 std::array<int64_t, 4>{memory.parameters, memory.gradients,
                                        memory.optimizer, kept.total()}))
    figures.push_back(b.getNamedAttr(key, b.getI64IntegerAttr(bytes)));
  if (memory.host)
    figures.push_back(b.getNamedAttr(LoomDialect::getMemoryHostKey(),
                                     b.getI64IntegerAttr(*memory.host)));
  return b.getDictionaryAttr(figures);
}

struct MemoryReportPass
    : public loom::impl::LoomMemoryReportBase<MemoryReportPass> {
  using LoomMemoryReportBase::LoomMemoryReportBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan))
      return signalPassFailure();
    if (plan->pp > 1)
      return reportPipeline(module, *plan);
    FailureOr<func::FuncOp> trainStep = getTrainStep(module);
    if (failed(trainStep))
      return signalPassFailure();
    auto grad = module.lookupSymbol<func::FuncOp>(
        LoomDialect::getForwardGradFunctionName());
    if (!grad || grad.isExternal()) {
      module.emitError() << "expected @"
                         << LoomDialect::getForwardGradFunctionName()
                         << " (run loom-differentiate first)";
      return signalPassFailure();
    }
    FailureOr<KeptActivations> kept = measureKeptActivations(grad);
    FailureOr<StepMemory> memory = measureStep(*trainStep);
    if (failed(kept) || failed(memory))
      return signalPassFailure();
    Builder b(&getContext());
    module->setAttr(LoomDialect::getMemoryAttrName(),
                    memoryAttr(b, *memory, *kept));
    if (print) {
      printStateMemory(llvm::outs(), "compiled", memory->parameters,
                       memory->gradients, memory->optimizer);
      printActivationMemory(llvm::outs(), "compiled", kept->perLayer,
                            std::nullopt, kept->layers, kept->outside);
      printHostMemory(*memory);
    }
    markAllAnalysesPreserved();
  }

  /// Offload: what the host keeps and the device computes with.
  static void printHostMemory(const StepMemory &memory) {
    if (!memory.host)
      return;
    if (memory.hostCopies)
      llvm::outs() << "compiled    offload: the host keeps "
                   << *memory.host - memory.hostCopies
                   << " B of master weights, optimizer state and "
                      "gradients and updates them, and "
                   << memory.hostCopies
                   << " B of parameters in the step's precision, which the "
                      "device fetches as it reads them\n";
    else if (memory.parameters == 0)
      llvm::outs() << "compiled    offload: the host keeps " << *memory.host
                   << " B of master weights, optimizer state and gradients "
                      "and updates them; the device fetches the master "
                      "weights, in the step's precision, as it reads them\n";
    else
      llvm::outs() << "compiled    offload: the host keeps " << *memory.host
                   << " B of master weights, optimizer state and gradients "
                      "and updates them; the device "
                   << memory.parameters
                   << " B of parameters in the step's precision\n";
  }

  /// Each pipeline rank's figures on its own step (`loom.memory` there):
  /// the ranks hold different layers, and the ends the embedding and head.
  void reportPipeline(ModuleOp module, const PlanConfig &plan) {
    Builder b(&getContext());
    FailureOr<SmallVector<func::FuncOp>> steps = getStageSteps(module, plan.pp);
    // How many micro-batches' activations each rank holds at most.
    PipelineSchedule schedule = buildPipelineSchedule(plan);
    if (failed(steps))
      return signalPassFailure();
    for (auto [r, step] : llvm::enumerate(*steps)) {
      FailureOr<StepMemory> memory = measureStep(step);
      FailureOr<KeptActivations> kept = measurePipelineActivations(step);
      if (failed(memory) || failed(kept))
        return signalPassFailure();
      step->setAttr(LoomDialect::getMemoryAttrName(),
                    memoryAttr(b, *memory, *kept));
      if (print) {
        llvm::outs() << "pipeline rank " << r << " (@" << step.getName()
                     << "):\n";
        printStateMemory(llvm::outs(), "compiled", memory->parameters,
                         memory->gradients, memory->optimizer);
        printActivationMemory(llvm::outs(), "compiled", kept->perLayer,
                              std::nullopt, kept->layers, kept->outside);
        printHostMemory(*memory);
        printPipelineRankMemory(
            llvm::outs(), "compiled", r,
            memory->parameters + memory->gradients + memory->optimizer,
            kept->total(),
            static_cast<double>(schedule.peakInFlight[r]) / plan.virtualStages,
            std::nullopt);
      }
    }
    markAllAnalysesPreserved();
  }
};
} // namespace
