//===- DataParallel.cpp - The loom-data-parallel pass ---------------------===//
//
// Data parallelism as a rewrite of the training step: each replica computes
// the loss and gradients of its share of the batch, and a sum over the
// replicas, on the shard dialect's device grid, makes them the global
// batch's. The collectives stay upstream shard ops until Loom lowers them to
// runtime calls after bufferization.
//
//===----------------------------------------------------------------------===//

#include "loom/Transforms/Passes.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMDATAPARALLEL
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The grid's axes, as the plan lays the ranks out (tp fastest).
constexpr shard::GridAxis kDataAxis = 1;

struct DataParallelPass
    : public loom::impl::LoomDataParallelBase<DataParallelPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan))
      return signalPassFailure();
    if (plan->dp == 1)
      return;
    if (plan->zero > 0) {
      module.emitError() << "ZeRO-" << plan->zero
                         << " is not compiled yet: data parallelism runs "
                            "with zero=0";
      return signalPassFailure();
    }
    auto step = module.lookupSymbol<func::FuncOp>(
        LoomDialect::getTrainStepFunctionName());
    if (!step || step.isExternal()) {
      module.emitError() << "expected @"
                         << LoomDialect::getTrainStepFunctionName()
                         << " (run loom-build-train-step first)";
      return signalPassFailure();
    }
    Operation *producer = findGradientProducer(step);
    if (!producer)
      return signalPassFailure();

    StringRef gridName = getGridName();
    if (module.lookupSymbol(gridName)) {
      module.emitError() << "the module already has a symbol @" << gridName;
      return signalPassFailure();
    }
    OpBuilder b(module.getBodyRegion());
    auto grid =
        shard::GridOp::create(b, module.getLoc(), gridName,
                              ArrayRef<int64_t>{plan->pp, plan->dp, plan->tp});
    // Private: once the collectives are runtime calls, symbol-dce drops it.
    SymbolTable::setSymbolVisibility(grid, SymbolTable::Visibility::Private);

    b.setInsertionPointAfter(producer);
    for (Value sum : producer->getResults()) {
      auto reduced = shard::AllReduceOp::create(
          b, producer->getLoc(), sum, gridName,
          ArrayRef<shard::GridAxis>{kDataAxis}, shard::ReductionKind::Sum);
      sum.replaceAllUsesExcept(reduced.getResult(), reduced);
    }
  }

  static StringRef getGridName() { return "loom_grid"; }

  /// The op of the step's body whose results are the loss and the
  /// gradients: the call of @forward_grad, or the loop over micro-batches
  /// that holds it.
  Operation *findGradientProducer(func::FuncOp step) {
    Operation *producer = nullptr;
    WalkResult walk = step.walk([&](func::CallOp call) {
      if (call.getCallee() != LoomDialect::getForwardGradFunctionName())
        return WalkResult::advance();
      Operation *top = call;
      while (top->getParentOp() != step)
        top = top->getParentOp();
      if (producer && producer != top) {
        step.emitOpError("calls @")
            << LoomDialect::getForwardGradFunctionName()
            << " from more than one place; expected one call or one loop "
               "over micro-batches";
        return WalkResult::interrupt();
      }
      producer = top;
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return nullptr;
    if (!producer)
      step.emitOpError("does not call @")
          << LoomDialect::getForwardGradFunctionName();
    return producer;
  }
};
} // namespace
