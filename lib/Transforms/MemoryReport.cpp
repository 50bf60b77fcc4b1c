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
int64_t bytesOf(Type type) {
  auto shaped = cast<ShapedType>(type);
  return shaped.getNumElements() * shaped.getElementTypeBitWidth() / 8;
}

/// Bytes one micro-batch's forward pass keeps for its backward pass.
struct KeptActivations {
  int64_t perLayer = 0, layers = 0, outside = 0;
  int64_t total() const { return perLayer * layers + outside; }
};

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
    auto type = dyn_cast<ShapedType>(value.getType());
    if (!type || !type.hasStaticShape())
      return emitError(value.getLoc())
             << "the backward pass reads an activation of unknown size";
    auto scan = value.getDefiningOp<ScanOp>();
    if (!scan || llvm::is_contained(scan.getCarryResults(), value)) {
      kept.outside += bytesOf(type);
      continue;
    }
    int64_t length = scan.getLength();
    if (kept.layers != 0 && kept.layers != length)
      return emitError(scan.getLoc()) << "layer loops of " << kept.layers
                                      << " and " << length << " layers";
    kept.layers = length;
    kept.perLayer += bytesOf(type) / length;
  }
  return kept;
}

struct MemoryReportPass
    : public loom::impl::LoomMemoryReportBase<MemoryReportPass> {
  using LoomMemoryReportBase::LoomMemoryReportBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> trainStep = getTrainStep(module);
    if (failed(trainStep))
      return signalPassFailure();
    func::FuncOp step = *trainStep;
    auto grad = module.lookupSymbol<func::FuncOp>(
        LoomDialect::getForwardGradFunctionName());
    if (!grad || grad.isExternal()) {
      module.emitError() << "expected @"
                         << LoomDialect::getForwardGradFunctionName()
                         << " (run loom-differentiate first)";
      return signalPassFailure();
    }
    FailureOr<KeptActivations> kept = measureKeptActivations(grad);
    if (failed(kept))
      return signalPassFailure();
    int64_t parameters = 0, gradients = 0, optimizer = 0;
    for (BlockArgument arg : step.getArguments()) {
      auto shaped = dyn_cast<ShapedType>(arg.getType());
      if (!shaped || !shaped.hasStaticShape())
        continue;
      unsigned i = arg.getArgNumber();
      if (step.getArgAttr(i, LoomDialect::getParamAttrName()))
        parameters += bytesOf(shaped);
      else if (step.getArgAttr(i, LoomDialect::getStateAttrName()))
        optimizer += bytesOf(shaped);
    }
    // The tensors the updates' gradients are views of: the whole reduced
    // gradients (or their buckets) when each rank updates a slice of them
    // (ZeRO-1), the reduce-scattered shards from ZeRO-2 on.
    llvm::SetVector<Value> held;
    step.walk([&](OptimizerUpdateOpInterface update) {
      Value grad = update.getUpdateGrad();
      while (Operation *def = grad.getDefiningOp()) {
        if (!isa<tensor::ExtractSliceOp, tensor::CollapseShapeOp,
                 tensor::ExpandShapeOp>(def))
          break;
        grad = def->getOperand(0);
      }
      held.insert(grad);
    });
    for (Value grad : held) {
      auto type = dyn_cast<ShapedType>(grad.getType());
      if (!type || !type.hasStaticShape()) {
        emitError(grad.getLoc(), "an optimizer update reads a gradient of "
                                 "unknown size");
        return signalPassFailure();
      }
      gradients += bytesOf(type);
    }

    Builder b(&getContext());
    SmallVector<NamedAttribute> figures;
    for (auto [key, bytes] :
         llvm::zip(LoomDialect::getMemoryKeys(),
                   std::array<int64_t, 4>{parameters, gradients, optimizer,
                                          kept->total()}))
      figures.push_back(b.getNamedAttr(key, b.getI64IntegerAttr(bytes)));
    module->setAttr(LoomDialect::getMemoryAttrName(),
                    b.getDictionaryAttr(figures));
    if (print) {
      printStateMemory(llvm::outs(), "compiled", parameters, gradients,
                       optimizer);
      printActivationMemory(llvm::outs(), "compiled", kept->perLayer,
                            std::nullopt, kept->layers, kept->outside);
    }
    markAllAnalysesPreserved();
  }
};
} // namespace
