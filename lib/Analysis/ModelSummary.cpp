//===- ModelSummary.cpp - What a model module holds -----------------------===//

#include "loom/Analysis/ModelSummary.h"

#include "loom/Dialect/LoomDialect.h"
#include "loom/abi.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::loom;

std::string mlir::loom::formatWithCommas(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out.push_back(',');
    out.push_back(digits[i]);
  }
  return value < 0 ? "-" + out : out;
}

FailureOr<ModelSummary> mlir::loom::summarizeModel(ModuleOp module) {
  auto function =
      module.lookupSymbol<func::FuncOp>(LoomDialect::getForwardFunctionName());
  if (!function)
    return module.emitError() << "expected a model function @"
                              << LoomDialect::getForwardFunctionName();
  ModelSummary summary;
  summary.function = function;
  for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i) {
    auto name = function.getArgAttrOfType<StringAttr>(
        i, LoomDialect::getParamAttrName());
    if (!name) {
      if (function.getArgAttr(i, LoomDialect::getInputAttrName()))
        continue;
      return function.emitError()
             << "argument #" << i << " is neither a parameter ('"
             << LoomDialect::getParamAttrName() << "') nor an input ('"
             << LoomDialect::getInputAttrName() << "')";
    }
    auto type = cast<RankedTensorType>(function.getArgumentTypes()[i]);
    int64_t count = type.getNumElements();
    summary.parameters.push_back({name.getValue().str(), type, count});
    summary.totalParameters += count;
    // A block's parameters are stacked over the blocks as "h.*.<what>"
    // [blocks, ...]: slice l is GPT-2's "h.<l>.<what>".
    if (name.getValue().starts_with(LOOM_STACKED_PREFIX) &&
        type.getRank() > 0) {
      summary.blockParameters += count;
      summary.numBlocks = type.getDimSize(0);
    }
  }
  return summary;
}

/// "adamw (lr 0.0003, betas 0.9/0.95, eps 1e-08, weight decay 0.1)".
static void describeOptimizer(TrainingAttr t, raw_ostream &os) {
  auto d = [](const llvm::APFloat &value) {
    return formatF64(value.convertToDouble());
  };
  os << stringifyOptimizerKind(t.getOptimizer()) << " (lr " << d(t.getLr());
  if (t.getOptimizer() == OptimizerKind::adamw)
    os << ", betas " << d(t.getBeta1()) << "/" << d(t.getBeta2()) << ", eps "
       << d(t.getEps());
  else
    os << ", momentum " << d(t.getMomentum());
  os << ", weight decay " << d(t.getWeightDecay());
  if (!t.getGradClip().isZero())
    os << ", gradient clip " << d(t.getGradClip());
  os << ")";
}

void mlir::loom::printModelSummary(ModuleOp module, const ModelSummary &summary,
                                   raw_ostream &os) {
  auto model =
      module->getAttrOfType<ModelAttr>(LoomDialect::getModelAttrName());
  auto training =
      module->getAttrOfType<TrainingAttr>(LoomDialect::getTrainingAttrName());
  auto plan = module->getAttrOfType<PlanAttr>(LoomDialect::getPlanAttrName());
  auto cluster =
      module->getAttrOfType<ClusterAttr>(LoomDialect::getClusterAttrName());

  if (model) {
    os << "model: " << model.getName() << ": " << model.getLayers()
       << " layers, width " << model.getWidth() << ", " << model.getHeads()
       << " heads, MLP width " << model.getHidden() << ", vocabulary "
       << model.getVocab();
    if (model.getPaddedVocab() != model.getVocab())
      os << " (padded to " << model.getPaddedVocab() << ")";
    os << ", " << model.getPositions() << " positions, "
       << (model.getTied() ? "tied" : "untied") << " embeddings\n";
  }
  os << "parameters: " << formatWithCommas(summary.totalParameters) << " in "
     << summary.parameters.size() << " tensors";
  if (summary.numBlocks)
    os << " (" << formatWithCommas(summary.blockParameters / summary.numBlocks)
       << " per block x " << summary.numBlocks << ", "
       << formatWithCommas(summary.totalParameters - summary.blockParameters)
       << " outside the blocks)";
  os << "\n";
  if (training) {
    int64_t tokens = training.getBatch() * training.getSequence();
    os << "training: batch " << training.getBatch() << " x sequence "
       << training.getSequence() << " = " << formatWithCommas(tokens)
       << " tokens per step, ";
    describeOptimizer(training, os);
    os << ", " << stringifyPrecision(training.getPrecision()) << "\n";
  }
  if (plan)
    os << llvm::formatv(
        "plan: dp={0} tp={1} pp={2} zero={3} mb={4} "
        "schedule={5} recompute={6} sp={7}{8} ({9} ranks)\n",
        plan.getDp(), plan.getTp(), plan.getPp(), plan.getZero(),
        plan.getMicroBatches(), getScheduleName(plan.getSchedule()),
        stringifyRecompute(plan.getRecompute()),
        plan.getSequenceParallel() ? 1 : 0,
        plan.getOffload() == Offload::none
            ? std::string()
            : " offload=" + stringifyOffload(plan.getOffload()).str(),
        plan.getWorldSize());
  if (cluster)
    os << "cluster: " << cluster.getNodes() << " x " << cluster.getGpusPerNode()
       << " " << cluster.getGpu() << "\n";
}
