//===- Recompute.cpp - The loom-recompute pass ----------------------------===//
//
// Activation recomputation before differentiation. What the backward pass
// recomputes instead of the forward pass keeping it is decided by one mark,
// `loom.recompute`, which the scan's vector-Jacobian product honours; this
// pass only places the marks the plan asks for.
//
//===----------------------------------------------------------------------===//

#include "Replicas.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMRECOMPUTE
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
struct RecomputePass : public loom::impl::LoomRecomputeBase<RecomputePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan))
      return signalPassFailure();
    // Selective recomputation rebuilds the attention core (scores and
    // probabilities) from its input in the backward pass. Every attention
    // op's own vector-Jacobian product already does that, from the
    // forward's log-sum-exp, so there is nothing to mark. Stage recomputation
    // reruns whole stages, which loom-build-train-step does where it calls
    // them.
    if (plan->recompute != Recompute::full)
      return;
    FailureOr<func::FuncOp> forward =
        getForwardToDifferentiate(module, "recomputation marks the layers");
    if (failed(forward))
      return signalPassFailure();
    // Full recomputation keeps only each layer's input: every op of the
    // layer body, collectives included, runs again in the backward body.
    UnitAttr mark = UnitAttr::get(&getContext());
    bool found = false;
    forward->walk([&](ScanOp scan) {
      found = true;
      for (Operation &op : scan.getBodyBlock().without_terminator())
        op.setAttr(LoomDialect::getRecomputeAttrName(), mark);
    });
    if (!found) {
      forward->emitError("recompute=full recomputes the layers, and @")
          << forward->getName() << " has no layer loop (loom.scan)";
      return signalPassFailure();
    }
  }
};
} // namespace
