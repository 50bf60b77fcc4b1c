//===- Plan.cpp - The loom-plan pass --------------------------------------===//
//
// Resolves the module's parallel plan, so that every later pass can read one
// from `loom.plan`: the single-rank plan when none is given, the cost
// model's choice for "auto", the user's plan as it is otherwise.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"
#include "loom/Plan/Planner.h"
#include "loom/Plan/Schedule.h"
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

/// Tells the driver that the plan failed for memory, not for bad input: loomc
/// exits with a status of its own then.
void markDoesNotFit(ModuleOp module) {
  module->setAttr(LoomDialect::getDoesNotFitAttrName(),
                  UnitAttr::get(module.getContext()));
}

/// Plans a search hands to the compiler, fastest first, before it takes
/// the model's word that none of them fits.
constexpr size_t kCompiledCandidates = 8;

struct PlanPass : public loom::impl::LoomPlanBase<PlanPass> {
  using LoomPlanBase::LoomPlanBase;
  PlanPass(const LoomPlanOptions &options, MemoryCompiler compiler)
      : LoomPlanBase(options), compiler(std::move(compiler)) {}

  void getDependentDialects(DialectRegistry &registry) const override {
    LoomPlanBase::getDependentDialects(registry);
    if (compiler.getDependentDialects)
      compiler.getDependentDialects(registry);
  }

  /// Sets `estimate`'s compiled figures, or why the compiler has none for
  /// it (the model's stand then).
  void compile(ModuleOp module, PlanEstimate &estimate) {
    std::string why;
    FailureOr<SmallVector<CompiledRankMemory>> ranks =
        compiler.compile(module, estimate, why);
    if (failed(ranks) || ranks->empty()) {
      estimate.notCompiled = why.empty() ? "no figures" : why;
      return;
    }
    estimate.compiledRanks = std::move(*ranks);
    auto worst = llvm::max_element(
        estimate.compiledRanks,
        [](const CompiledRankMemory &a, const CompiledRankMemory &b) {
          return a.peak() < b.peak();
        });
    estimate.compiledRank = worst - estimate.compiledRanks.begin();
  }

  /// Compiles the fastest plans of `search` until one fits by the
  /// compiler's figures; those that do not join the plans out of memory.
  /// When none of the first kCompiledCandidates does, the next is kept on
  /// the model's word, and says so.
  void compileFastest(ModuleOp module, PlanSearch &search) {
    std::vector<PlanEstimate> kept, over;
    size_t compiled = 0;
    bool found = false;
    for (PlanEstimate &estimate : search.ranked) {
      if (found || compiled == kCompiledCandidates) {
        if (!found && kept.empty())
          estimate.notCompiled =
              llvm::formatv("the {0} faster plans compiled did not fit",
                            kCompiledCandidates)
                  .str();
        kept.push_back(std::move(estimate));
        continue;
      }
      ++compiled;
      compile(module, estimate);
      found = estimate.fits();
      (found ? kept : over).push_back(std::move(estimate));
    }
    search.fit -= over.size();
    search.doNotFit += over.size();
    search.ranked = std::move(kept);
    search.outOfMemory.insert(search.outOfMemory.begin(), over.begin(),
                              over.end());
    // The plan that needs least memory leads the plans out of memory.
    auto least = llvm::min_element(
        search.outOfMemory, [](const PlanEstimate &a, const PlanEstimate &b) {
          return a.memory() < b.memory();
        });
    if (least != search.outOfMemory.end())
      std::rotate(search.outOfMemory.begin(), least, least + 1);
  }

  MemoryCompiler compiler;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!report.empty() && report != "plan" && report != "cost" &&
        report != "memory" && report != "schedule") {
      module.emitError() << "loom-plan: report must be 'plan', 'cost', "
                            "'memory' or 'schedule', got '"
                         << report << "'";
      return signalPassFailure();
    }
    Attribute planAttr = module->getAttr(LoomDialect::getPlanAttrName());
    bool isAuto = planAttr && isa<StringAttr>(planAttr);
    // Nothing to choose: keep the user's plan or take the single-rank one.
    if (!planAttr && report != "plan" && report != "cost") {
      planAttr = PlanAttr::get(&getContext(), PlanConfig());
      module->setAttr(LoomDialect::getPlanAttrName(), planAttr);
    }
    // The schedule's diagram needs the plan only, not its price. A pipeline
    // plan's stages are balanced by the cost model when not given.
    auto given = dyn_cast_or_null<PlanAttr>(planAttr);
    if (given && given.getZero() > 0 && given.getDp() == 1)
      module.emitWarning() << "plan asks for ZeRO stage " << given.getZero()
                           << " with dp=1: there is nothing to partition, "
                              "and it runs as ZeRO-0";
    bool balanceStages = given && given.getPp() > 1 && !given.getStageLayers();
    bool price =
        isAuto || (!report.empty() && report != "schedule") || balanceStages;
    if (price &&
        failed(planWithCostModel(module, dyn_cast_or_null<PlanAttr>(planAttr))))
      return signalPassFailure();
    if (report == "schedule") {
      auto plan =
          module->getAttrOfType<PlanAttr>(LoomDialect::getPlanAttrName());
      printScheduleDiagram(llvm::outs(),
                           buildPipelineSchedule(plan.getConfig()));
    }
    if (!price)
      markAllAnalysesPreserved();
  }

  /// Prices the module's plan, or searches one when `given` is null, and
  /// records it; prints the report that was asked for.
  LogicalResult planWithCostModel(ModuleOp module, PlanAttr given) {
    auto clusterAttr =
        module->getAttrOfType<ClusterAttr>(LoomDialect::getClusterAttrName());
    ClusterConfig clusterConfig;
    if (clusterAttr) {
      clusterConfig = clusterAttr.getConfig();
    } else if (given && report != "plan" && report != "cost") {
      // The state's bytes per rank do not depend on the device: any
      // cluster on which the plan is legal prices them. Neither does the
      // balance of a model's identical layers, much: the stages are split
      // by their time on such a cluster.
      const PlanConfig &plan = given.getConfig();
      clusterConfig.gpu = "A100-80GB";
      clusterConfig.gpusPerNode = plan.pp * plan.dp * plan.tp;
    } else {
      return module.emitError()
             << "planning needs a '" << LoomDialect::getClusterAttrName()
             << "' attribute (a 'cluster' section in the model description: "
                "GPU kind, GPUs per node, nodes)";
    }
    std::optional<ClusterModel> cluster = ClusterModel::get(clusterConfig);
    if (!cluster)
      return module.emitError()
             << "unknown GPU kind '" << clusterConfig.gpu << "'";
    CostModelOptions options;
    options.fusedAttention = !materializedAttention;
    // The memory report sits next to the compiled step's figures.
    options.framework = report == "memory" ? Framework::loom : framework;
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
      if (compiler.compile && options.framework == Framework::loom &&
          report != "memory")
        compile(module, chosen);
    } else {
      search = searchPlans(*model);
      if (compiler.compile && options.framework == Framework::loom &&
          report != "memory")
        compileFastest(module, search);
      if (search.ranked.empty()) {
        if (search.outOfMemory.empty())
          return module.emitError()
                 << llvm::formatv("no legal plan for {0} GPUs ({1} tried)",
                                  cluster->getWorldSize(), search.evaluated);
        const PlanEstimate &least = search.outOfMemory.front();
        markDoesNotFit(module);
        return module.emitError() << llvm::formatv(
                   "no plan fits: the model needs at least {0:F2} GiB per GPU "
                   "({1}), and a {2} has {3:F2} GiB ({4:F2} GiB less the "
                   "cluster's memory_margin of {5:F1}%)",
                   least.memory() / kBytesPerGiB,
                   formatPlan(least.plan, least.precision), cluster->gpu->name,
                   least.usable / kBytesPerGiB,
                   cluster->gpu->memoryBytes / kBytesPerGiB,
                   cluster->memoryMargin * 100);
      }
      chosen = search.ranked.front();
    }
    recordPlan(module, chosen);
    if (report == "plan")
      printPlanReport(llvm::outs(), *model, search, given ? &chosen : nullptr);
    else if (report == "cost")
      printCostReport(llvm::outs(), *model, chosen);
    else if (report == "memory") {
      printStateMemory(llvm::outs(), "cost model", chosen.weights,
                       chosen.gradients, chosen.optimizerState);
      printActivationMemory(llvm::outs(), "cost model", chosen.keptPerLayer,
                            chosen.keptStatisticsPerLayer, chosen.stageLayers,
                            chosen.keptOutsideLayers);
      if (chosen.plan.offload != Offload::none)
        llvm::outs() << llvm::formatv(
            "cost model  offload: the host keeps {0:F0} B of master weights, "
            "optimizer state and the gradients' copies{1}\n",
            chosen.hostMemory,
            chosen.plan.offload == Offload::parameters
                ? ", and the parameters the device fetches"
                : "");
      if (chosen.plan.pp > 1)
        for (auto [r, rank] : llvm::enumerate(chosen.stageMemory))
          printPipelineRankMemory(llvm::outs(), "cost model", r, rank.state(),
                                  rank.keptPerMicroBatch, rank.inFlight,
                                  rank.temporary);
    }
    if (report != "cost" && report != "memory" && clusterAttr &&
        !chosen.fits()) {
      markDoesNotFit(module);
      return module.emitError()
             << "plan " << formatPlan(chosen.plan, chosen.precision)
             << " does not fit in memory: " << describeOutOfMemory(chosen);
    }
    return success();
  }
};
} // namespace

std::unique_ptr<Pass> mlir::loom::createLoomPlan(const LoomPlanOptions &options,
                                                 MemoryCompiler compiler) {
  return std::make_unique<PlanPass>(options, std::move(compiler));
}
