//===- LoomConfig.cpp - Model, training, plan and cluster values ----------===//

#include "Loom/LoomConfig.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::loom;

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
                            {"mb", plan.microBatches}})
    if (value < 1)
      violate(("plan." + key).str(),
              llvm::formatv("must be at least 1, got {0}", value).str());
  if (plan.zero < 0 || plan.zero > 3)
    violate("plan.zero",
            llvm::formatv("ZeRO stage {0} does not exist (0 to 3)", plan.zero)
                .str());
  // The divisions below need positive sizes.
  if (!violations.empty())
    return violations;

  int64_t tp = plan.tp;
  if (plan.sequenceParallel && tp == 1)
    violate("plan.sp",
            "sequence parallelism needs tensor parallelism (tp > 1)");
  if (arch) {
    if (arch->heads % tp)
      violate("plan.tp", llvm::formatv("tensor parallelism {0} does not "
                                       "divide the {1} heads (model.n_head)",
                                       tp, arch->heads));
    if (arch->hidden % tp)
      violate("plan.tp", llvm::formatv("tensor parallelism {0} does not "
                                       "divide the MLP width {1} "
                                       "(model.n_inner)",
                                       tp, arch->hidden));
    // Vocabulary-parallel embedding and loss give each rank V / tp rows.
    if (arch->paddedVocab % tp)
      violate("plan.tp",
              llvm::formatv("tensor parallelism {0} does not divide the token "
                            "table's {1} rows (model.padded_vocab_size; pad "
                            "the vocabulary, e.g. with loomc --pad-vocab)",
                            tp, arch->paddedVocab));
    if (plan.pp > arch->layers)
      violate("plan.pp", llvm::formatv("{0} pipeline stages exceed the {1} "
                                       "layers (model.n_layer)",
                                       plan.pp, arch->layers));
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

std::optional<Schedule> mlir::loom::parseScheduleName(llvm::StringRef name) {
  if (name == "1f1b")
    return Schedule::one_f_one_b;
  if (name == "gpipe")
    return Schedule::gpipe;
  return std::nullopt;
}

llvm::StringRef mlir::loom::getScheduleName(Schedule schedule) {
  return schedule == Schedule::one_f_one_b ? "1f1b" : "gpipe";
}

std::string mlir::loom::formatPlan(const PlanConfig &plan,
                                   Precision precision) {
  return llvm::formatv(
             "dp={0},tp={1},pp={2},zero={3},mb={4},schedule={5},"
             "recompute={6},sp={7},precision={8}",
             plan.dp, plan.tp, plan.pp, plan.zero, plan.microBatches,
             getScheduleName(plan.schedule), stringifyRecompute(plan.recompute),
             plan.sequenceParallel ? 1 : 0, stringifyPrecision(precision))
      .str();
}
