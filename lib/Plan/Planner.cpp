//===- Planner.cpp - Choosing a parallel plan -----------------------------===//

#include "loom/Plan/Planner.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

using namespace mlir;
using namespace mlir::loom;

SmallVector<Precision> mlir::loom::getAllowedPrecisions(Precision requested,
                                                        const GpuSpec &gpu) {
  if (requested == Precision::bf16 && !gpu.supports(Precision::bf16))
    return {Precision::fp16};
  return {requested};
}

/// In increasing order, by trial division up to the square root: a batch of
/// 2^32 sequences takes 2^16 divisions, not 2^32.
static SmallVector<int64_t> getDivisors(int64_t n) {
  SmallVector<int64_t> small, large;
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d)
      continue;
    small.push_back(d);
    if (d != n / d)
      large.push_back(n / d);
  }
  small.append(large.rbegin(), large.rend());
  return small;
}

/// `value` in buckets a millionth of `scale` wide, or of itself on a log
/// scale where `scale` is 0: values that close rank as equal, and the
/// buckets order them. A tolerance between two values would not order
/// them (a and b within it, b and c too, a and c not), which sorting needs.
static int64_t getBucket(double value, double scale) {
  constexpr double kMillionth = 1e-6;
  double position = scale > 0   ? value / (kMillionth * scale)
                    : value > 0 ? std::log(value) / std::log1p(kMillionth)
                                : -std::numeric_limits<double>::infinity();
  if (std::isnan(position))
    return std::numeric_limits<int64_t>::max();
  constexpr double kLimit = 0x1p62;
  return static_cast<int64_t>(
      std::floor(std::clamp(position, -kLimit, kLimit)));
}

bool mlir::loom::isBetterPlan(const PlanEstimate &a, const PlanEstimate &b) {
  auto rank = [](const PlanEstimate &e) {
    // Less time, then more headroom (in millionths of what may be used),
    // then the lower ZeRO stage.
    return std::make_tuple(getBucket(e.stepTime, 0),
                           -getBucket(e.headroom(), std::max(e.usable, 1.0)),
                           e.plan.zero);
  };
  return rank(a) < rank(b);
}

namespace {
/// The best `limit` of the estimates it is given under `better`, pruned as
/// it goes: a search of a million plans keeps a few dozen.
class BestPlans {
public:
  using Order = bool (*)(const PlanEstimate &, const PlanEstimate &);
  BestPlans(std::vector<PlanEstimate> &plans, size_t limit, Order better)
      : plans(plans), limit(limit), better(better) {}
  void add(PlanEstimate est) {
    plans.push_back(std::move(est));
    if (plans.size() >= 2 * limit)
      prune();
  }
  void prune() {
    llvm::stable_sort(plans, better);
    if (plans.size() > limit)
      plans.erase(plans.begin() + limit, plans.end());
  }

private:
  std::vector<PlanEstimate> &plans;
  size_t limit;
  Order better;
};

bool isFaster(const PlanEstimate &a, const PlanEstimate &b) {
  return a.stepTime < b.stepTime;
}
} // namespace

PlanSearch mlir::loom::searchPlans(CostModel &model) {
  PlanSearch search;
  BestPlans ranked(search.ranked, PlanSearch::kKeptPlans, isBetterPlan);
  // The plan that needs least memory is kept aside: the error when nothing
  // fits names it.
  std::optional<PlanEstimate> leastMemory;
  std::vector<PlanEstimate> fasterOutOfMemory;
  BestPlans faster(fasterOutOfMemory, PlanSearch::kKeptPlans - 1, isFaster);
  int64_t world = model.getCluster().getWorldSize();
  int64_t batch = model.getTraining().batchSize;
  const ArchitectureConfig &arch = model.getArchitecture();
  SmallVector<Precision> precisions = getAllowedPrecisions(
      model.getTraining().precision, *model.getCluster().gpu);
  const Recompute recomputes[] = {Recompute::none, Recompute::selective,
                                  Recompute::full, Recompute::stage};
  auto searchWith = [&](Offload offload) {
    for (int64_t tp : getDivisors(world)) {
      for (int64_t pp : getDivisors(world / tp)) {
        int64_t dp = world / (tp * pp);
        PlanConfig base;
        base.dp = dp;
        base.tp = tp;
        base.pp = pp;
        // No micro-batch count splits a batch that dp does not divide; tensor
        // parallelism must divide the heads and a stage needs a layer. Pruned
        // here, such a pair costs nothing whatever the world's size.
        if (batch % dp || arch.heads % tp || pp > arch.layers) {
          ++search.evaluated;
          ++search.illegal;
          continue;
        }
        for (int64_t m : getDivisors(batch / dp)) {
          for (int64_t zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
            for (Schedule schedule : {Schedule::gpipe, Schedule::one_f_one_b}) {
              if (pp == 1 && schedule != Schedule::gpipe)
                continue;
              for (Recompute recompute : recomputes) {
                if (pp == 1 && recompute == Recompute::stage)
                  continue;
                // A framework whose selective step is its none step: the
                // same plan twice, which would take two of the plans kept
                // and compiled.
                if (recompute == Recompute::selective &&
                    model.getFramework().selectiveIsNone)
                  continue;
                for (bool sp : {false, true}) {
                  if (sp && tp == 1)
                    continue;
                  for (Precision precision : precisions) {
                    PlanConfig plan = base;
                    plan.microBatches = m;
                    plan.zero = zero;
                    plan.schedule = schedule;
                    plan.recompute = recompute;
                    plan.sequenceParallel = sp;
                    plan.offload = offload;
                    ++search.evaluated;
                    PlanEstimate est = model.estimate(plan, precision);
                    if (!est.illegal.empty()) {
                      ++search.illegal;
                    } else if (est.fits()) {
                      ++search.fit;
                      ranked.add(std::move(est));
                    } else {
                      ++search.doNotFit;
                      // The plan needing the least of the GPU's memory
                      // among those that lack some.
                      if (est.memory() > est.usable &&
                          (!leastMemory ||
                           est.memory() < leastMemory->memory()))
                        leastMemory = est;
                      faster.add(std::move(est));
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  };
  searchWith(Offload::none);
  // The optimizer's state on the host when nothing else fits: slower, but
  // a step that runs.
  if (search.fit == 0) {
    search.offloaded = true;
    searchWith(Offload::optimizer);
  }
  // And the parameters too, fetched as each layer runs, when even that
  // does not fit.
  if (search.fit == 0)
    searchWith(Offload::parameters);
  ranked.prune();
  faster.prune();
  // The least-memory plan may be among the fastest too; it is listed once.
  std::string least;
  if (leastMemory) {
    least = formatPlan(leastMemory->plan, leastMemory->precision);
    search.outOfMemory.push_back(std::move(*leastMemory));
  }
  for (PlanEstimate &est : fasterOutOfMemory)
    if (formatPlan(est.plan, est.precision) != least)
      search.outOfMemory.push_back(std::move(est));
  return search;
}

static void printTableHeader(llvm::raw_ostream &os) {
  os << llvm::formatv("  {0,-3} {1,-78} {2,+11} {3,+12} {4,+6} {5,+10}\n", "#",
                      "plan", "step (s)", "tokens/s", "MFU", "GiB/GPU");
}

static void printTableRow(llvm::raw_ostream &os, int64_t index,
                          const PlanEstimate &est) {
  os << llvm::formatv(
      "  {0,-3} {1,-78} {2,+11} {3,+12} {4,+6} {5,+10}\n", index,
      formatPlan(est.plan, est.precision),
      llvm::formatv("{0:F4}", est.stepTime).str(),
      llvm::formatv("{0:F0}", est.tokensPerSecond).str(),
      llvm::formatv("{0:F3}", est.mfu).str(),
      llvm::formatv("{0:F2}", est.memory() / kBytesPerGiB).str());
}

/// The memory lines of a plan the compiler counted: the stage whose ranks
/// need most against the GPU, then each stage's figures (one without a
/// pipeline: every rank runs the same step) next to the model's.
static void printCompiledMemory(llvm::raw_ostream &os,
                                const PlanEstimate &est) {
  // The model's own figures for the stage the compiled figures are of.
  double modelTensors = est.stageMemory[est.compiledRank].live();
  os << llvm::formatv(
      "  memory per GPU (stage {0}): {1:F2} GiB of {2:F2} usable ({3:F2} "
      "less a margin of {4:F1}%) = tensors {5:F2}, as compiled, + allocator "
      "reserve {6:F2} + runtime {7:F2}\n",
      est.compiledRank, est.memory() / kBytesPerGiB, est.usable / kBytesPerGiB,
      est.capacity / kBytesPerGiB, 100 * (1 - est.usable / est.capacity),
      est.tensorMemory() / kBytesPerGiB, est.reserve / kBytesPerGiB,
      est.runtime / kBytesPerGiB);
  for (auto [r, rank] : llvm::enumerate(est.compiledRanks)) {
    os << llvm::formatv("  compiled stage {0}: tensors {1} B = parameters {2} "
                        "B + optimizer state {3} B + the step's arena {4} B",
                        r, rank.peak(), rank.parameters, rank.optimizer,
                        rank.arena);
    if (rank.host)
      os << llvm::formatv("; the host keeps {0} B", rank.host);
    os << "\n";
  }
  double error = 100 * (modelTensors / est.tensorMemory() - 1);
  os << llvm::formatv("  the cost model's tensors for stage {0}: {1:F0} B, "
                      "{2:F1}% {3} than compiled\n",
                      est.compiledRank, modelTensors, std::abs(error),
                      error < 0 ? "less" : "more");
}

static void printEstimate(llvm::raw_ostream &os, const CostModel &model,
                          const PlanEstimate &est) {
  os << "plan: " << formatPlan(est.plan, est.precision) << "\n";
  os << llvm::formatv("  micro-batch: {0} sequences; layers per stage:",
                      est.microBatchSize);
  for (int64_t layers : est.layersPerStage)
    os << " " << layers;
  os << "\n";
  os << llvm::formatv(
      "  step time: {0:F4} s = pipeline {1:F4} (compute {2:F4}, of which "
      "recompute {3:F4}; tensor-parallel comm {4:F4}; stage sends {5:F4}; "
      "bubble {6:F4}) + exposed data-parallel comm {7:F4} + optimizer "
      "{8:F4} + fixed {9:F4}{10}\n",
      est.stepTime,
      est.computeTime + est.tpCommTime + est.ppCommTime + est.bubbleTime,
      est.computeTime, est.recomputeTime, est.tpCommTime, est.ppCommTime,
      est.bubbleTime, est.dpCommTime, est.optimizerTime, est.fixedTime,
      est.plan.offload == Offload::none
          ? std::string()
          : llvm::formatv(" + host transfers {0:F4}", est.exposedTransferTime)
                .str());
  if (est.plan.offload != Offload::none)
    os << llvm::formatv(
        "  offload: the host keeps {0:F2} GiB (master weights, optimizer "
        "state, the gradients' copies{1}) and updates in the optimizer's "
        "time above; the transfers take {2:F4} s over the host link, of "
        "which {3:F4} are not hidden behind the step's compute\n",
        est.hostMemory / kBytesPerGiB,
        est.plan.offload == Offload::parameters
            ? ", the parameters the device fetches"
            : "",
        est.hostTransferTime, est.exposedTransferTime);
  os << llvm::formatv("  throughput: {0:F0} tokens/s; MFU {1:F4}, HFU {2:F4} "
                      "(peak {3:F0} TFLOP/s per GPU)\n",
                      est.tokensPerSecond, est.mfu, est.hfu,
                      model.getCluster().gpu->matrixPeak(est.precision) / 1e12);
  if (!est.compiledRanks.empty()) {
    printCompiledMemory(os, est);
    return;
  }
  if (!est.notCompiled.empty())
    os << "  memory not compiled (" << est.notCompiled
       << "): the cost model's\n";
  os << llvm::formatv(
      "  memory per GPU (stage {0}): {1:F2} GiB of {2:F2} usable ({3:F2} "
      "less a margin of {4:F1}%) = weights {5:F2} + gradients {6:F2} + "
      "optimizer "
      "state {7:F2} + activations {8:F2} + temporary {9:F2} + allocator "
      "reserve {10:F2} + runtime {11:F2}\n",
      est.worstStage, est.memory() / kBytesPerGiB, est.usable / kBytesPerGiB,
      est.capacity / kBytesPerGiB, 100 * (1 - est.usable / est.capacity),
      est.weights / kBytesPerGiB, est.gradients / kBytesPerGiB,
      est.optimizerState / kBytesPerGiB, est.activations / kBytesPerGiB,
      est.temporary / kBytesPerGiB, est.reserve / kBytesPerGiB,
      est.runtime / kBytesPerGiB);
}

std::string mlir::loom::describeOutOfMemory(const PlanEstimate &est) {
  if (est.memory() <= est.usable && !est.hostFits())
    return llvm::formatv("out of host memory by {0:F2} GiB (its host keeps "
                         "{1:F2} GiB for each GPU, of the {2:F2} a plan may "
                         "use of a GPU's share of its node's)",
                         (est.hostMemory - est.hostUsable) / kBytesPerGiB,
                         est.hostMemory / kBytesPerGiB,
                         est.hostUsable / kBytesPerGiB)
        .str();
  return llvm::formatv("out of memory by {0:F2} GiB (needs {1:F2} GiB of the "
                       "{2:F2} a plan may use of {3:F2}; activations {4:F2})",
                       -est.headroom() / kBytesPerGiB,
                       est.memory() / kBytesPerGiB, est.usable / kBytesPerGiB,
                       est.capacity / kBytesPerGiB,
                       est.activations / kBytesPerGiB)
      .str();
}

/// What choosing offload costs: the fastest plan without it, which does
/// not fit, against the choice.
static void printOffloadCost(llvm::raw_ostream &os, const PlanSearch &search) {
  const PlanEstimate &chosen = search.ranked.front();
  const PlanEstimate *fastest = nullptr;
  for (const PlanEstimate &est : search.outOfMemory)
    if (est.plan.offload == Offload::none &&
        (!fastest || est.stepTime < fastest->stepTime))
      fastest = &est;
  os << "  no plan fits without offload";
  if (fastest)
    os << llvm::formatv(": the fastest, {0}, would take {1:F4} s/step "
                        "({2}); offload takes {3:F1}% longer",
                        formatPlan(fastest->plan, fastest->precision),
                        fastest->stepTime, describeOutOfMemory(*fastest),
                        100 * (chosen.stepTime / fastest->stepTime - 1));
  os << "\n";
}

void mlir::loom::printPlanReport(llvm::raw_ostream &os, const CostModel &model,
                                 const PlanSearch &search,
                                 const PlanEstimate *explicitPlan) {
  const TrainingConfig &training = model.getTraining();
  const ClusterModel &cluster = model.getCluster();
  os << llvm::formatv("model: {0}, {1} parameters, {2} layers; global batch "
                      "{3} x {4} tokens\n",
                      model.getName(), model.getParameterCount(),
                      model.getNumLayers(), training.batchSize,
                      training.sequenceLength);
  os << llvm::formatv("cluster: {0} x {1} GPUs per node x {2} nodes = {3} "
                      "GPUs\n",
                      cluster.gpu->name, cluster.gpusPerNode, cluster.nodes,
                      cluster.getWorldSize());
  if (explicitPlan) {
    printEstimate(os, model, *explicitPlan);
    if (!explicitPlan->fits())
      os << "  does not fit: " << describeOutOfMemory(*explicitPlan) << "\n";
    return;
  }
  os << llvm::formatv("searched {0} plans: {1} fit, {2} out of memory, {3} "
                      "illegal\n",
                      search.evaluated, search.fit, search.doNotFit,
                      search.illegal);
  if (search.ranked.empty())
    return;
  os << "chosen ";
  printEstimate(os, model, search.ranked.front());
  if (search.offloaded)
    printOffloadCost(os, search);
  os << "best plans:\n";
  printTableHeader(os);
  // A row that differs from one above only in a ZeRO stage that changes
  // neither time nor memory says nothing new.
  auto withoutZero = [](const PlanEstimate &est) {
    PlanConfig plan = est.plan;
    plan.zero = 0;
    return formatPlan(plan, est.precision);
  };
  auto same = [](double a, double b) {
    return std::fabs(a - b) <= 1e-3 * std::max(std::fabs(a), std::fabs(b));
  };
  SmallVector<const PlanEstimate *> shown;
  for (const PlanEstimate &est : search.ranked) {
    if (shown.size() == 8)
      break;
    if (llvm::any_of(shown, [&](const PlanEstimate *other) {
          return same(other->stepTime, est.stepTime) &&
                 same(other->memory(), est.memory()) &&
                 withoutZero(*other) == withoutZero(est);
        }))
      continue;
    shown.push_back(&est);
    printTableRow(os, shown.size(), est);
  }
  // The rejected plans that would have beaten the choice, best first as
  // the search ranks them: plans of equal time in an order of their own,
  // not the sort's.
  std::vector<const PlanEstimate *> faster;
  for (const PlanEstimate &est : search.outOfMemory)
    if (est.stepTime < search.ranked.front().stepTime)
      faster.push_back(&est);
  llvm::stable_sort(faster, [](const PlanEstimate *a, const PlanEstimate *b) {
    return isBetterPlan(*a, *b);
  });
  if (!faster.empty()) {
    os << "faster plans rejected:\n";
    for (const PlanEstimate *est : llvm::ArrayRef(faster).take_front(5))
      os << llvm::formatv("  {0}: {1:F4} s/step, {2}\n",
                          formatPlan(est->plan, est->precision), est->stepTime,
                          describeOutOfMemory(*est));
  }
}

void mlir::loom::printCostReport(llvm::raw_ostream &os, const CostModel &model,
                                 const PlanEstimate &est) {
  printEstimate(os, model, est);
  PricingKey key{est.microBatchSize, est.plan.tp, est.plan.sequenceParallel,
                 est.precision};
  ArrayRef<OpGroup> groups = model.getGroups();
  auto printGroup = [&](const OpGroup &group, int64_t repeat) {
    os << "\n" << group.name;
    if (repeat > 1)
      os << llvm::formatv(" (x {0} layers)", repeat);
    os << " per micro-batch and GPU: FLOPs in TFLOP, bytes in GB, times in "
          "ms\n";
    os << llvm::formatv("  {0,-22} {1,+10} {2,+10} {3,+9} {4,+9} {5,+9} "
                        "{6,+9} {7,+9} {8,+9} {9,+9} {10,+9} {11,+9} {12,+9}\n",
                        "op", "flops_fwd", "flops_bwd", "act_buf", "weights",
                        "mem_fwd", "mem_bwd", "t_fwd", "t_bwd", "comm_fwd",
                        "comm_bwd", "t_tot_fwd", "t_tot_bwd");
    TimedRow sum;
    double tFwd = 0, tBwd = 0;
    for (const TimedRow &t : model.priceGroupRows(group, key)) {
      const CostRow &r = t.row;
      os << llvm::formatv(
          "  {0,-22} {1,+10:F6} {2,+10:F6} {3,+9:F6} {4,+9:F6} {5,+9:F6} "
          "{6,+9:F6} {7,+9:F4} {8,+9:F4} {9,+9:F4} {10,+9:F4} {11,+9:F4} "
          "{12,+9:F4}\n",
          r.name, r.flopsFwd * 1e-12, r.flopsBwd * 1e-12,
          r.activationBuffer * 1e-9, r.weights * 1e-9, r.memFwd * 1e-9,
          r.memBwd * 1e-9, t.tFwd() * 1e3, t.tBwd() * 1e3, t.tCommFwd * 1e3,
          t.tCommBwd * 1e3, t.tTotalFwd() * 1e3, t.tTotalBwd() * 1e3);
      sum.row.flopsFwd += r.flopsFwd;
      sum.row.flopsBwd += r.flopsBwd;
      sum.row.activationBuffer += r.activationBuffer;
      sum.row.weights += r.weights;
      sum.tCommFwd += t.tCommFwd;
      sum.tCommBwd += t.tCommBwd;
      tFwd += t.tTotalFwd();
      tBwd += t.tTotalBwd();
    }
    os << llvm::formatv(
        "  {0,-22} {1,+10:F6} {2,+10:F6} {3,+9:F6} {4,+9:F6} "
        "{5,+9} {6,+9} {7,+9} {8,+9} {9,+9:F4} {10,+9:F4} "
        "{11,+9:F4} {12,+9:F4}\n",
        repeat > 1 ? "total (all layers)" : "total",
        sum.row.flopsFwd * 1e-12 * repeat, sum.row.flopsBwd * 1e-12 * repeat,
        sum.row.activationBuffer * 1e-9 * repeat,
        sum.row.weights * 1e-9 * repeat, "", "", "", "",
        sum.tCommFwd * 1e3 * repeat, sum.tCommBwd * 1e3 * repeat,
        tFwd * 1e3 * repeat, tBwd * 1e3 * repeat);
  };
  printGroup(groups.front(), 1);
  // One layer body, priced once and repeated over the layers.
  printGroup(groups[1], model.getNumLayers());
  printGroup(groups.back(), 1);
}

void mlir::loom::recordPlan(ModuleOp module, const PlanEstimate &est) {
  MLIRContext *context = module.getContext();
  module->setAttr(LoomDialect::getPlanAttrName(),
                  PlanAttr::get(context, est.plan));
  auto training =
      module->getAttrOfType<TrainingAttr>(LoomDialect::getTrainingAttrName());
  if (training && training.getPrecision() != est.precision) {
    TrainingConfig config = training.getConfig();
    config.precision = est.precision;
    module->setAttr(LoomDialect::getTrainingAttrName(),
                    TrainingAttr::get(context, config));
  }
}

void mlir::loom::printStateMemory(llvm::raw_ostream &os, StringRef source,
                                  double parameters, double gradients,
                                  double optimizer) {
  os << llvm::formatv("{0,-11} per rank: parameters {1:F0} B, gradients "
                      "{2:F0} B, optimizer state {3:F0} B ({4:F2} MiB)\n",
                      source, parameters, gradients, optimizer,
                      (parameters + gradients + optimizer) / (1 << 20));
}

void mlir::loom::printPipelineRankMemory(llvm::raw_ostream &os,
                                         StringRef source, int64_t rank,
                                         double state, double kept,
                                         double inFlight,
                                         std::optional<double> temporary) {
  double total = state + kept * inFlight + temporary.value_or(0);
  // Whole micro-batches but under interleaving, where chunk passes hold a
  // fraction of the rank's layers each.
  std::string held = inFlight == std::floor(inFlight)
                         ? llvm::formatv("{0:F0}", inFlight).str()
                         : llvm::formatv("{0:F2}", inFlight).str();
  os << llvm::formatv("{0,-11} pipeline rank {1}: state {2:F0} B + "
                      "activations {3:F0} B per micro-batch x {4} held",
                      source, rank, state, kept, held);
  if (temporary)
    os << llvm::formatv(" + temporaries {0:F0} B", *temporary);
  os << llvm::formatv(" = {0:F0} B ({1:F2} MiB){2}\n", total, total / (1 << 20),
                      temporary ? "" : ", temporaries aside");
}

void mlir::loom::printActivationMemory(llvm::raw_ostream &os, StringRef source,
                                       double perLayer,
                                       std::optional<double> statistics,
                                       int64_t layers, double outside) {
  double total = perLayer * layers + outside;
  std::string layer =
      llvm::formatv("{0:F0} B", perLayer - statistics.value_or(0));
  if (statistics)
    layer = llvm::formatv("({0} + {1:F0} B attention statistics)", layer,
                          *statistics);
  os << llvm::formatv("{0,-11} per rank: activations {1} per layer x {2} "
                      "+ {3:F0} B outside the layers = {4:F0} B per "
                      "micro-batch ({5:F2} MiB)\n",
                      source, layer, layers, outside, total, total / (1 << 20));
}
