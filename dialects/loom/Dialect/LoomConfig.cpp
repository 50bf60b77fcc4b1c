//===- LoomConfig.cpp - Model, training, plan and cluster values ----------===//

#include "loom/Dialect/LoomConfig.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The sizes tensor parallelism over `tp` ranks divides: heads, key/value
/// groups, the MLP and the token table.
void checkTensorParallel(
    const ArchitectureConfig &arch, int64_t tp,
    llvm::function_ref<void(llvm::StringRef, std::string)> violate) {
  if (arch.heads % tp)
    violate("plan.tp", llvm::formatv("tensor parallelism {0} does not "
                                     "divide the {1} heads (model.n_head)",
                                     tp, arch.heads));
  // More ranks than key/value heads: teams of ranks share one, each
  // holding its copy (Megatron-LM's replication).
  if (arch.isGrouped() && arch.getKvHeads() % tp && tp % arch.getKvHeads())
    violate("plan.tp",
            llvm::formatv("tensor parallelism {0} neither divides the {1} "
                          "key/value heads (model.num_key_value_heads) nor is "
                          "a multiple of them, so that each rank's query heads "
                          "share one key/value head",
                          tp, arch.getKvHeads()));
  if (arch.hidden % tp)
    violate("plan.tp", llvm::formatv("tensor parallelism {0} does not "
                                     "divide the MLP width {1} "
                                     "(model.n_inner)",
                                     tp, arch.hidden));
  // Vocabulary-parallel embedding and loss give each rank V / tp rows.
  if (arch.paddedVocab % tp)
    violate("plan.tp",
            llvm::formatv("tensor parallelism {0} does not divide the token "
                          "table's {1} rows (model.padded_vocab_size; pad "
                          "the vocabulary, e.g. with loomc --pad-vocab)",
                          tp, arch.paddedVocab));
}
} // namespace

SmallVector<PlanViolation> mlir::loom::checkPlan(const PlanConfig &plan,
                                                 const ArchitectureConfig *arch,
                                                 const TrainingConfig *training,
                                                 const ClusterConfig *cluster) {
  SmallVector<PlanViolation> violations;
  auto violate = [&](llvm::StringRef field, std::string message) {
    violations.push_back({field.str(), std::move(message)});
  };
  for (auto [key, value] : {std::pair<llvm::StringRef, int64_t>{"dp", plan.dp},
                            {"tp", plan.tp},
                            {"pp", plan.pp},
                            {"mb", plan.microBatches},
                            {"v", plan.virtualStages}})
    if (value < 1)
      violate(("plan." + key).str(),
              llvm::formatv("must be at least 1, got {0}", value).str());
  if (plan.zero < 0 || plan.zero > 3)
    violate("plan.zero",
            llvm::formatv("ZeRO stage {0} does not exist (0 to 3)", plan.zero)
                .str());
  // The products below must fit in 64 bits.
  for (auto [key, value] : {std::pair<llvm::StringRef, int64_t>{"dp", plan.dp},
                            {"tp", plan.tp},
                            {"pp", plan.pp}})
    if (value > kMaxWorldSize)
      violate(("plan." + key).str(),
              llvm::formatv("{0} exceeds Loom's limit of {1} ranks", value,
                            kMaxWorldSize)
                  .str());
  for (auto [key, value] :
       {std::pair<llvm::StringRef, int64_t>{"mb", plan.microBatches},
        {"v", plan.virtualStages}})
    if (value > kMaxSize)
      violate(("plan." + key).str(),
              llvm::formatv("{0} exceeds Loom's limit of 2^32", value).str());
  // The divisions below need positive sizes.
  if (!violations.empty())
    return violations;
  if (plan.pp > 1 &&
      plan.microBatches > kMaxPipelinePasses / plan.virtualStages)
    violate(plan.virtualStages > 1 ? "plan.v" : "plan.mb",
            llvm::formatv("a pipeline rank's step is unrolled per micro-batch "
                          "and model chunk: {0} micro-batches x {1} chunks "
                          "exceed Loom's limit of {2} passes",
                          plan.microBatches, plan.virtualStages,
                          kMaxPipelinePasses)
                .str());

  int64_t tp = plan.tp;
  if (plan.sequenceParallel && tp == 1)
    violate("plan.sp",
            "sequence parallelism needs tensor parallelism (tp > 1)");
  if (arch) {
    checkTensorParallel(*arch, tp, violate);
    // ZeRO-2 and 3 shard each gradient before the global norm sums its
    // squares, which then cannot tell the elements a team of ranks shares
    // (counted once) from the rest.
    if (arch->isGrouped() && tp > arch->getKvHeads() && plan.zero >= 2)
      violate("plan.zero",
              llvm::formatv("ZeRO-{0} with tensor parallelism {1} over {2} "
                            "key/value heads (model.num_key_value_heads), "
                            "which teams of ranks share, is not supported; "
                            "use zero=1 or at most {2} tensor-parallel ranks",
                            plan.zero, tp, arch->getKvHeads()));
    if (plan.pp > arch->layers)
      violate("plan.pp", llvm::formatv("{0} pipeline stages exceed the {1} "
                                       "layers (model.n_layer)",
                                       plan.pp, arch->layers));
    else if (plan.pp * plan.virtualStages > arch->layers)
      violate("plan.v",
              llvm::formatv("pp * v = {0} * {1} model chunks exceed the {2} "
                            "layers (model.n_layer): some would be empty",
                            plan.pp, plan.virtualStages, arch->layers));
    if (!plan.stageLayers.empty()) {
      int64_t sum = 0;
      for (int64_t layers : plan.stageLayers)
        sum += layers;
      if (sum != arch->layers)
        violate("plan.stage_layers",
                llvm::formatv("the stages' layers add up to {0}, the model "
                              "has {1} (model.n_layer)",
                              sum, arch->layers));
    }
  }
  if (!plan.stageLayers.empty()) {
    int64_t stages = plan.pp * plan.virtualStages;
    if (static_cast<int64_t>(plan.stageLayers.size()) != stages)
      violate("plan.stage_layers",
              llvm::formatv("gives {0} stages' layers, the plan has pp * v = "
                            "{1} stages",
                            plan.stageLayers.size(), stages));
    if (llvm::any_of(plan.stageLayers, [](int64_t n) { return n < 1; }))
      violate("plan.stage_layers", "every stage needs at least one layer");
  }
  if (plan.recompute == Recompute::stage && plan.pp == 1)
    violate("plan.recompute",
            "recompute=stage reruns each pipeline stage's forward pass and "
            "needs pipeline stages (pp > 1); on one stage, recompute=full "
            "keeps each layer's input");
  if (plan.schedule == Schedule::interleaved) {
    if (plan.pp == 1)
      violate("plan.schedule",
              "the interleaved schedule needs pipeline stages (pp > 1)");
    if (plan.virtualStages < 2)
      violate("plan.v", llvm::formatv("the interleaved schedule needs at "
                                      "least 2 model chunks per rank, got "
                                      "v = {0}",
                                      plan.virtualStages));
    if (plan.microBatches % plan.pp)
      violate("plan.mb",
              llvm::formatv("the interleaved schedule runs micro-batches in "
                            "groups of pp = {0}: {1} micro-batches are not a "
                            "multiple of it",
                            plan.pp, plan.microBatches));
  } else if (plan.virtualStages != 1) {
    violate("plan.v",
            llvm::formatv("v = {0} model chunks per rank need "
                          "schedule=interleaved (the schedule is "
                          "{1})",
                          plan.virtualStages, getScheduleName(plan.schedule)));
  }
  if (training) {
    if (plan.sequenceParallel && tp > 1 && training->sequenceLength % tp)
      violate("plan.sp", llvm::formatv("tensor parallelism {0} does not "
                                       "divide the sequence length {1} "
                                       "(training.sequence_length)",
                                       tp, training->sequenceLength));
    if (training->batchSize % (plan.dp * plan.microBatches))
      violate("plan.mb",
              llvm::formatv("dp * micro_batches = {0} * {1} does not divide "
                            "the batch of {2} sequences (training.batch_size)",
                            plan.dp, plan.microBatches, training->batchSize));
  }
  if (cluster && plan.getWorldSize() != cluster->getWorldSize())
    violate("plan",
            llvm::formatv("dp * tp * pp = {0} * {1} * {2} = {3} ranks, but the "
                          "cluster has {4} GPUs (cluster.nodes * "
                          "cluster.gpus_per_node)",
                          plan.dp, plan.tp, plan.pp, plan.getWorldSize(),
                          cluster->getWorldSize()));
  return violations;
}

SmallVector<int64_t> PlanConfig::getStageStarts() const {
  SmallVector<int64_t> starts = {0};
  for (int64_t layers : stageLayers)
    starts.push_back(starts.back() + layers);
  return starts;
}

std::optional<Schedule> mlir::loom::parseScheduleName(llvm::StringRef name) {
  if (name == "1f1b")
    return Schedule::one_f_one_b;
  if (name == "gpipe")
    return Schedule::gpipe;
  if (name == "interleaved")
    return Schedule::interleaved;
  return std::nullopt;
}

llvm::StringRef mlir::loom::getScheduleName(Schedule schedule) {
  switch (schedule) {
  case Schedule::gpipe:
    return "gpipe";
  case Schedule::one_f_one_b:
    return "1f1b";
  case Schedule::interleaved:
    return "interleaved";
  }
  llvm_unreachable("unknown schedule");
}

std::string mlir::loom::formatPlan(const PlanConfig &plan,
                                   Precision precision) {
  std::string schedule = getScheduleName(plan.schedule).str();
  if (plan.virtualStages != 1)
    schedule += ",v=" + std::to_string(plan.virtualStages);
  std::string text =
      llvm::formatv("dp={0},tp={1},pp={2},zero={3},mb={4},schedule={5},"
                    "recompute={6},sp={7},precision={8}",
                    plan.dp, plan.tp, plan.pp, plan.zero, plan.microBatches,
                    schedule, stringifyRecompute(plan.recompute),
                    plan.sequenceParallel ? 1 : 0,
                    stringifyPrecision(precision))
          .str();
  if (plan.offload != Offload::none)
    text += ",offload=" + stringifyOffload(plan.offload).str();
  return text;
}

llvm::StringRef mlir::loom::stringifyTensorInit(TensorInit init) {
  switch (init) {
  case TensorInit::Normal:
    return "normal";
  case TensorInit::Zeros:
    return "zeros";
  case TensorInit::Ones:
    return "ones";
  }
  llvm_unreachable("unknown TensorInit");
}

std::optional<TensorInit> mlir::loom::parseTensorInit(llvm::StringRef name) {
  for (TensorInit init :
       {TensorInit::Normal, TensorInit::Zeros, TensorInit::Ones})
    if (name == stringifyTensorInit(init))
      return init;
  return std::nullopt;
}

bool mlir::loom::checkRopeScaling(
    const ArchitectureConfig::RopeScaling &scaling) {
  return std::isfinite(scaling.factor) && scaling.factor >= 1 &&
         std::isfinite(scaling.highFreqFactor) && scaling.lowFreqFactor > 0 &&
         scaling.highFreqFactor > scaling.lowFreqFactor &&
         scaling.originalContext > 0;
}
