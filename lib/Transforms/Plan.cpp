//===- Plan.cpp - The loom-plan pass --------------------------------------===//
//
// Resolves the module's parallel plan, so that every later pass can read one
// from `loom.plan`: the single-rank plan when none is given, the cost
// model's choice for "auto", the user's plan as it is otherwise.
//
//===----------------------------------------------------------------------===//

#include "Loom/LoomDialect.h"
#include "loom/Plan/Planner.h"
#include "loom/Transforms/Passes.h"

#include "llvm/Support/FormatVariadic.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMPLAN
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {

struct PlanPass : public loom::impl::LoomPlanBase<PlanPass> {
  using LoomPlanBase::LoomPlanBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!report.empty() && report != "plan" && report != "cost") {
      module.emitError() << "loom-plan: report must be 'plan' or 'cost', got '"
                         << report << "'";
      return signalPassFailure();
    }
    Attribute planAttr = module->getAttr(LoomDialect::getPlanAttrName());
    bool isAuto = planAttr && isa<StringAttr>(planAttr);
    if (!isAuto && report.empty()) {
      // Nothing to choose: keep the user's plan or take the single-rank one.
      if (!planAttr)
        module->setAttr(LoomDialect::getPlanAttrName(),
                        PlanAttr::get(&getContext(), PlanConfig()));
      markAllAnalysesPreserved();
      return;
    }
    if (failed(planWithCostModel(module, dyn_cast_or_null<PlanAttr>(planAttr))))
      signalPassFailure();
  }

  /// Prices the module's plan, or searches one when `given` is null, and
  /// records it; prints the report that was asked for.
  LogicalResult planWithCostModel(ModuleOp module, PlanAttr given) {
    auto clusterAttr =
        module->getAttrOfType<ClusterAttr>(LoomDialect::getClusterAttrName());
    if (!clusterAttr)
      return module.emitError()
             << "planning needs a '" << LoomDialect::getClusterAttrName()
             << "' attribute (a 'cluster' section in the model description: "
                "GPU kind, GPUs per node, nodes)";
    std::optional<ClusterModel> cluster =
        ClusterModel::get(clusterAttr.getConfig());
    if (!cluster)
      return module.emitError()
             << "unknown GPU kind '" << clusterAttr.getGpu() << "'";
    CostModelOptions options;
    options.fusedAttention = !materializedAttention;
    FailureOr<CostModel> model = CostModel::build(module, *cluster, options);
    if (failed(model))
      return failure();

    PlanSearch search;
    PlanEstimate chosen;
    if (given) {
      chosen =
          model->estimate(given.getConfig(), model->getTraining().precision);
      if (!chosen.illegal.empty())
        return module.emitError()
               << "plan " << formatPlan(chosen.plan, chosen.precision)
               << " cannot run: " << chosen.illegal;
    } else {
      search = searchPlans(*model);
      if (search.ranked.empty()) {
        if (search.outOfMemory.empty())
          return module.emitError()
                 << llvm::formatv("no legal plan for {0} GPUs ({1} tried)",
                                  cluster->getWorldSize(), search.evaluated);
        const PlanEstimate &least = search.outOfMemory.front();
        return module.emitError() << llvm::formatv(
                   "no plan fits: the model needs at least {0:F2} GiB per GPU "
                   "({1}), and a {2} has {3:F2} GiB",
                   least.memory() / kBytesPerGiB,
                   formatPlan(least.plan, least.precision), cluster->gpu->name,
                   cluster->gpu->memoryBytes / kBytesPerGiB);
      }
      chosen = search.ranked.front();
    }
    recordPlan(module, chosen);
    if (report == "plan")
      printPlanReport(llvm::outs(), *model, search, given ? &chosen : nullptr);
    else if (report == "cost")
      printCostReport(llvm::outs(), *model, chosen);
    if (report != "cost" && !chosen.fits())
      return module.emitError()
             << "plan " << formatPlan(chosen.plan, chosen.precision)
             << " does not fit in memory";
    return success();
  }
};
} // namespace
