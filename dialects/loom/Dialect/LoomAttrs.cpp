//===- LoomAttrs.cpp - Attributes of the loom dialect ---------------------===//

#include "loom/Dialect/LoomDialect.h"
#include "loom/Dialect/LoomHardware.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::loom;

#include "loom/Dialect/LoomEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "loom/Dialect/LoomAttrs.cpp.inc"

void LoomDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "loom/Dialect/LoomAttrs.cpp.inc"
      >();
}

namespace {
/// Emits "<what> must be positive, got <value>" for non-positive sizes.
LogicalResult checkPositive(function_ref<InFlightDiagnostic()> emitError,
                            StringRef what, int64_t value) {
  if (value > 0)
    return success();
  return emitError() << "'" << what << "' must be positive, got " << value;
}
} // namespace

LogicalResult ModelAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, StringRef name,
    int64_t layers, int64_t width, int64_t heads, int64_t hidden, int64_t vocab,
    int64_t paddedVocab, int64_t positions, bool tied,
    llvm::APFloat epsilonValue, NormKind, PositionKind position,
    llvm::APFloat ropeThetaValue, MlpKind, BiasKind, int64_t kvHeads,
    llvm::APFloat ropeFactor, llvm::APFloat ropeLowFreqFactor,
    llvm::APFloat ropeHighFreqFactor, int64_t ropeOriginalContext) {
  double epsilon = epsilonValue.convertToDouble();
  double ropeTheta = ropeThetaValue.convertToDouble();
  for (auto [what, value] : {std::pair<StringRef, int64_t>{"layers", layers},
                             {"width", width},
                             {"heads", heads},
                             {"hidden", hidden},
                             {"vocab", vocab},
                             {"padded_vocab", paddedVocab},
                             {"positions", positions}})
    if (failed(checkPositive(emitError, what, value)))
      return failure();
  if (width % heads != 0)
    return emitError() << "'width' (" << width
                       << ") must be divisible by 'heads' (" << heads << ")";
  if (kvHeads < 0 || (kvHeads && heads % kvHeads != 0))
    return emitError() << "'kv_heads' (" << kvHeads << ") must divide 'heads' ("
                       << heads << ")";
  if (paddedVocab < vocab)
    return emitError() << "'padded_vocab' (" << paddedVocab
                       << ") must be at least 'vocab' (" << vocab << ")";
  if (!(epsilon > 0) || !std::isfinite(epsilon))
    return emitError() << "'epsilon' must be finite and positive, got "
                       << formatF64(epsilon);
  // A base of 1 or less gives every channel pair the same angle, or angles
  // that grow with the channel: not a rotary encoding.
  if (position == PositionKind::rope &&
      (!(ropeTheta > 1) || !std::isfinite(ropeTheta)))
    return emitError() << "'rope_theta' must be finite and above 1, got "
                       << formatF64(ropeTheta);
  ArchitectureConfig::RopeScaling scaling = {
      ropeFactor.convertToDouble(), ropeLowFreqFactor.convertToDouble(),
      ropeHighFreqFactor.convertToDouble(), ropeOriginalContext};
  if (scaling.factor != 0 && !checkRopeScaling(scaling))
    return emitError() << "Llama 3's rotary scaling needs rope_factor >= 1, "
                          "0 < rope_low_freq_factor < rope_high_freq_factor "
                          "and rope_original_context > 0";
  if (position == PositionKind::rope && (width / heads) % 2 != 0)
    return emitError() << "rotary positions need an even head width, got "
                       << width / heads;
  return success();
}

LogicalResult TrainingAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, int64_t batch,
    int64_t sequence, OptimizerKind optimizer, llvm::APFloat lrValue,
    llvm::APFloat beta1Value, llvm::APFloat beta2Value, llvm::APFloat epsValue,
    llvm::APFloat weightDecayValue, llvm::APFloat momentumValue,
    llvm::APFloat gradClipValue, Precision precision) {
  double lr = lrValue.convertToDouble(), beta1 = beta1Value.convertToDouble(),
         beta2 = beta2Value.convertToDouble(), eps = epsValue.convertToDouble(),
         weightDecay = weightDecayValue.convertToDouble(),
         momentum = momentumValue.convertToDouble(),
         gradClip = gradClipValue.convertToDouble();
  if (failed(checkPositive(emitError, "batch", batch)) ||
      failed(checkPositive(emitError, "sequence", sequence)))
    return failure();
  // A NaN fails every comparison below; infinities are tested apart.
  for (auto [what, value] : {std::pair<StringRef, double>{"lr", lr},
                             {"beta1", beta1},
                             {"beta2", beta2},
                             {"eps", eps},
                             {"weight_decay", weightDecay},
                             {"momentum", momentum},
                             {"grad_clip", gradClip}})
    if (std::isinf(value))
      return emitError() << "'" << what << "' must be finite, got "
                         << formatF64(value);
  if (!(lr > 0))
    return emitError() << "'lr' must be positive, got " << formatF64(lr);
  if (optimizer == OptimizerKind::adamw) {
    if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
      return emitError() << "AdamW betas must lie in [0, 1), got beta1 = "
                         << formatF64(beta1)
                         << ", beta2 = " << formatF64(beta2);
    if (!(eps > 0))
      return emitError() << "'eps' must be positive for AdamW, got "
                         << formatF64(eps);
  }
  if (!(momentum >= 0 && momentum < 1))
    return emitError() << "'momentum' must lie in [0, 1), got "
                       << formatF64(momentum);
  if (!(weightDecay >= 0))
    return emitError() << "'weight_decay' must not be negative, got "
                       << formatF64(weightDecay);
  if (!(gradClip >= 0))
    return emitError() << "'grad_clip' must not be negative, got "
                       << formatF64(gradClip);
  return success();
}

LogicalResult PlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t dp, int64_t tp, int64_t pp, int64_t zero,
                               int64_t microBatches, Schedule schedule,
                               Recompute recompute, bool sequenceParallel,
                               int64_t virtualStages,
                               DenseI64ArrayAttr stageLayers, Offload) {
  for (auto [what, value] : {std::pair<StringRef, int64_t>{"dp", dp},
                             {"tp", tp},
                             {"pp", pp},
                             {"micro_batches", microBatches},
                             {"virtual_stages", virtualStages}})
    if (failed(checkPositive(emitError, what, value)))
      return failure();
  if (zero < 0 || zero > 3)
    return emitError() << "'zero' must be a ZeRO stage from 0 to 3, got "
                       << zero;
  if (sequenceParallel && tp == 1)
    return emitError() << "'sequence_parallel' needs tensor parallelism "
                          "(tp > 1)";
  if (stageLayers) {
    if (static_cast<int64_t>(stageLayers.size()) != pp * virtualStages)
      return emitError() << "'stage_layers' must give the layers of pp * "
                            "virtual_stages = "
                         << pp * virtualStages << " stages, got "
                         << stageLayers.size();
    for (int64_t layers : stageLayers.asArrayRef())
      if (failed(checkPositive(emitError, "stage_layers", layers)))
        return failure();
  }
  return success();
}

LogicalResult ClusterAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  StringRef gpu, int64_t gpusPerNode,
                                  int64_t nodes,
                                  llvm::APFloat intraNodeBandwidth,
                                  llvm::APFloat interNodeBandwidth,
                                  llvm::APFloat memoryMargin) {
  if (!lookupGpu(gpu))
    return emitError() << "'gpu' must name a GPU kind of the catalogue ("
                       << getGpuNames() << "), got \"" << gpu << "\"";
  if (failed(checkPositive(emitError, "gpus_per_node", gpusPerNode)) ||
      failed(checkPositive(emitError, "nodes", nodes)))
    return failure();
  // The description reader's bound, for IR written by hand: planning time
  // and the grid's ranks grow with the world.
  if (gpusPerNode > kMaxWorldSize || nodes > kMaxWorldSize ||
      gpusPerNode * nodes > kMaxWorldSize)
    return emitError() << "a cluster has at most " << kMaxWorldSize
                       << " GPUs, got " << nodes << " nodes of " << gpusPerNode;
  if (intraNodeBandwidth.isNegative() || interNodeBandwidth.isNegative() ||
      !intraNodeBandwidth.isFinite() || !interNodeBandwidth.isFinite())
    return emitError() << "link bandwidths must not be negative";
  double margin = memoryMargin.convertToDouble();
  if (!(margin >= 0 && margin < 1))
    return emitError() << "'memory_margin' must be in [0, 1), got " << margin;
  return success();
}

//===----------------------------------------------------------------------===//
// Conversions to and from the plain values of loom/Dialect/LoomConfig.h
//===----------------------------------------------------------------------===//

ArchitectureConfig ModelAttr::getConfig() const {
  ArchitectureConfig config;
  config.layers = getLayers();
  config.width = getWidth();
  config.heads = getHeads();
  config.hidden = getHidden();
  config.vocab = getVocab();
  config.paddedVocab = getPaddedVocab();
  config.positions = getPositions();
  config.tiedEmbeddings = getTied();
  config.normEpsilon = getEpsilon().convertToDouble();
  config.norm = getNorm();
  config.position = getPosition();
  config.ropeTheta = getRopeTheta().convertToDouble();
  config.mlp = getMlp();
  config.biases = getBiases();
  config.kvHeads = getKvHeads();
  config.ropeScaling = {getRopeFactor().convertToDouble(),
                        getRopeLowFreqFactor().convertToDouble(),
                        getRopeHighFreqFactor().convertToDouble(),
                        getRopeOriginalContext()};
  return config;
}

ModelAttr ModelAttr::get(MLIRContext *context, StringRef name,
                         const ArchitectureConfig &config) {
  return get(context, name, config.layers, config.width, config.heads,
             config.hidden, config.vocab, config.paddedVocab, config.positions,
             config.tiedEmbeddings, APFloat(config.normEpsilon), config.norm,
             config.position, APFloat(config.ropeTheta), config.mlp,
             config.biases, config.isGrouped() ? config.kvHeads : 0,
             APFloat(config.ropeScaling.factor),
             APFloat(config.ropeScaling.lowFreqFactor),
             APFloat(config.ropeScaling.highFreqFactor),
             config.ropeScaling.originalContext);
}

TrainingConfig TrainingAttr::getConfig() const {
  TrainingConfig config;
  config.batchSize = getBatch();
  config.sequenceLength = getSequence();
  config.optimizer = getOptimizer();
  config.learningRate = getLr().convertToDouble();
  config.beta1 = getBeta1().convertToDouble();
  config.beta2 = getBeta2().convertToDouble();
  config.epsilon = getEps().convertToDouble();
  config.weightDecay = getWeightDecay().convertToDouble();
  config.momentum = getMomentum().convertToDouble();
  config.gradClip = getGradClip().convertToDouble();
  config.precision = getPrecision();
  return config;
}

TrainingAttr TrainingAttr::get(MLIRContext *context,
                               const TrainingConfig &config) {
  return get(context, config.batchSize, config.sequenceLength, config.optimizer,
             APFloat(config.learningRate), APFloat(config.beta1),
             APFloat(config.beta2), APFloat(config.epsilon),
             APFloat(config.weightDecay), APFloat(config.momentum),
             APFloat(config.gradClip), config.precision);
}

PlanConfig PlanAttr::getConfig() const {
  PlanConfig config;
  config.dp = getDp();
  config.tp = getTp();
  config.pp = getPp();
  config.zero = getZero();
  config.microBatches = getMicroBatches();
  config.schedule = getSchedule();
  config.recompute = getRecompute();
  config.sequenceParallel = getSequenceParallel();
  config.virtualStages = getVirtualStages();
  if (DenseI64ArrayAttr stages = getStageLayers())
    config.stageLayers.assign(stages.asArrayRef().begin(),
                              stages.asArrayRef().end());
  config.offload = getOffload();
  return config;
}

PlanAttr PlanAttr::get(MLIRContext *context, const PlanConfig &config) {
  return get(context, config.dp, config.tp, config.pp, config.zero,
             config.microBatches, config.schedule, config.recompute,
             config.sequenceParallel, config.virtualStages,
             config.stageLayers.empty()
                 ? DenseI64ArrayAttr()
                 : DenseI64ArrayAttr::get(context, config.stageLayers),
             config.offload);
}

ClusterConfig ClusterAttr::getConfig() const {
  ClusterConfig config;
  config.gpu = getGpu().str();
  config.gpusPerNode = getGpusPerNode();
  config.nodes = getNodes();
  config.intraNodeBandwidth = getIntraNodeBandwidth().convertToDouble();
  config.interNodeBandwidth = getInterNodeBandwidth().convertToDouble();
  config.memoryMargin = getMemoryMargin().convertToDouble();
  return config;
}

ClusterAttr ClusterAttr::get(MLIRContext *context,
                             const ClusterConfig &config) {
  return get(context, config.gpu, config.gpusPerNode, config.nodes,
             APFloat(config.intraNodeBandwidth),
             APFloat(config.interNodeBandwidth), APFloat(config.memoryMargin));
}
