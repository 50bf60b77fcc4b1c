//===- MemoryReport.cpp - The loom-memory-report pass ---------------------===//
//
// What one rank keeps between steps, read off the compiled step rather than
// predicted: the types of its parameter and optimizer state arguments, and
// of the gradients its updates read slices of.
//
//===----------------------------------------------------------------------===//

#include "Replicas.h"

#include "loom/Plan/Planner.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/SetVector.h"

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

struct MemoryReportPass
    : public loom::impl::LoomMemoryReportBase<MemoryReportPass> {
  using LoomMemoryReportBase::LoomMemoryReportBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> trainStep = getTrainStep(module);
    if (failed(trainStep))
      return signalPassFailure();
    func::FuncOp step = *trainStep;
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
                   std::array<int64_t, 3>{parameters, gradients, optimizer}))
      figures.push_back(b.getNamedAttr(key, b.getI64IntegerAttr(bytes)));
    module->setAttr(LoomDialect::getMemoryAttrName(),
                    b.getDictionaryAttr(figures));
    if (print)
      printStateMemory(llvm::outs(), "compiled", parameters, gradients,
                       optimizer);
    markAllAnalysesPreserved();
  }
};
} // namespace
