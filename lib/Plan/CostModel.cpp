//===- CostModel.cpp - Step time and memory of a parallel plan ------------===//
//
// See docs/cost-model.md for the model and its assumptions.
//
//===----------------------------------------------------------------------===//

#include "loom/Plan/CostModel.h"

#include "loom/Plan/Schedule.h"
#include "loom/Plan/Utilization.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

using namespace mlir;
using namespace mlir::loom;

double mlir::loom::getElementBytes(Precision precision) {
  return precision == Precision::fp32 ? 4 : 2;
}

//===----------------------------------------------------------------------===//
// ClusterModel
//===----------------------------------------------------------------------===//

llvm::cl::ValuesClass mlir::loom::getFrameworkValues() {
  return llvm::cl::values(
      clEnumValN(Framework::pytorch, "pytorch",
                 "a PyTorch trainer (DeepSpeed, Megatron-LM, FSDP)"),
      clEnumValN(Framework::loom, "loom", "Loom's compiled step"));
}

FrameworkAssumptions FrameworkAssumptions::get(Framework framework) {
  constexpr double GiB = kBytesPerGiB;
  FrameworkAssumptions f;
  f.contextBytes = 1.0 * GiB;
  f.communicatorBytes = 0.25 * GiB;
  switch (framework) {
  case Framework::pytorch:
    // Fitted on seed 004 with the contention below (docs/cost-model.md).
    f.stepOverhead = 0.03;
    f.allocatorReserve = 0.10;
    f.fp32Gradients = true;
    f.fp32InputCopies = true;
    // DeepSpeed's defaults: reduce_bucket_size and
    // stage3_prefetch_bucket_size.
    f.reduceBucketElements = 5e8;
    f.prefetchElements = 5e7;
    f.overlapContention = 0.8;
    f.offloadsGradientBuckets = true;
    f.prefetchesOffloadedParameters = true;
    // Fitted on seed 001's micro-batch sweep (docs/cost-model.md).
    f.kernelDispatch = kEagerKernelDispatch;
    break;
  case Framework::loom:
    // Measured: the GPU idled 1.95 ms of an H100's 152.73 ms GPT-2 124M
    // step (docs/cost-model.md); the host queues the whole step ahead.
    f.stepOverhead = 0.002;
    // The collectives share the step's stream: none overlaps the compute.
    f.overlapContention = 1;
    f.selectiveIsNone = true;
    f.lossKeepsLogits = true;
    f.fetchesF32Masters = true;
    f.offloadsLayerGradients = true;
    f.prefetchesOffloadedParameters = true;
    f.gathersUpdatesByTensor = true;
    f.sumsMicroBatchesWhole = true;
    f.sumsLayersOntoOwners = true;
    f.reduceScattersWholeGradients = true;
    f.keepsWholeMasters = true;
    // Measured on the same step's trace, bf16 (docs/cost-model.md): its
    // GEMMs, all 768 wide, ran at 67.2% of the peak, which a 70%
    // efficiency of large products gives with this width; its fused
    // attention kernels at 11.6%.
    f.matrixHalfWidth = 32;
    f.attentionEfficiency = 0.116;
    break;
  }
  return f;
}

std::optional<ClusterModel> ClusterModel::get(const ClusterConfig &config) {
  const GpuSpec *gpu = lookupGpu(config.gpu);
  if (!gpu)
    return std::nullopt;
  ClusterModel model;
  model.gpu = gpu;
  model.gpusPerNode = config.gpusPerNode > 0 ? config.gpusPerNode : 8;
  model.nodes = config.nodes > 0 ? config.nodes : 1;
  model.intraNodeBandwidth = config.intraNodeBandwidth > 0
                                 ? config.intraNodeBandwidth * 1e9
                                 : gpu->nvlinkBandwidth;
  model.interNodeBandwidth = config.interNodeBandwidth > 0
                                 ? config.interNodeBandwidth * 1e9
                                 : gpu->networkBandwidth;
  model.memoryMargin = config.memoryMargin;
  return model;
}

double ClusterModel::collectiveTime(CollectiveKind kind, double bytes,
                                    int64_t groupSize, int64_t stride) const {
  if (groupSize <= 1 || bytes <= 0 || kind == CollectiveKind::none)
    return 0;
  // Ranks `stride` apart share a node while the group's span fits in one;
  // otherwise every ring step crosses the network somewhere, and the ring
  // runs at the speed of its slowest link.
  bool intraNode = stride * groupSize <= gpusPerNode;
  double bandwidth =
      (intraNode ? intraNodeBandwidth
                 : std::min(intraNodeBandwidth, interNodeBandwidth)) *
      efficiency.link;
  double alpha =
      intraNode ? efficiency.intraNodeLatency : efficiency.interNodeLatency;
  double n = groupSize;
  double step = alpha + bytes / (n * bandwidth);
  double steps = kind == CollectiveKind::allReduce ? 2 * (n - 1) : n - 1;
  return steps * step;
}

double ClusterModel::sendTime(double bytes, int64_t stride) const {
  if (bytes <= 0)
    return 0;
  bool intraNode = stride < gpusPerNode;
  double bandwidth =
      (intraNode ? intraNodeBandwidth : interNodeBandwidth) * efficiency.link;
  double alpha =
      intraNode ? efficiency.intraNodeLatency : efficiency.interNodeLatency;
  return alpha + bytes / bandwidth;
}

//===----------------------------------------------------------------------===//
// Rows
//===----------------------------------------------------------------------===//

TimedRow mlir::loom::priceRow(
    const CostRow &row, const Roofline &roofline,
    llvm::function_ref<double(CollectiveKind, double)> commTime) {
  TimedRow timed;
  timed.row = row;
  double flops = !row.tensorCore     ? roofline.vectorFlops
                 : row.attentionCore ? roofline.attentionFlops
                                     : roofline.matrixFlops;
  if (row.tensorCore && row.matrixWidth > 0 && roofline.matrixHalfWidth > 0)
    flops *= row.matrixWidth / (row.matrixWidth + roofline.matrixHalfWidth);
  timed.tCompFwd = row.flopsFwd / flops;
  timed.tCompBwd = row.flopsBwd / flops;
  timed.tMemFwd = row.memFwd / roofline.memoryBandwidth;
  timed.tMemBwd = row.memBwd / roofline.memoryBandwidth;
  if (row.commFwdKind != CollectiveKind::none)
    timed.tCommFwd = commTime(row.commFwdKind, row.commFwd);
  if (row.commBwdKind != CollectiveKind::none)
    timed.tCommBwd = commTime(row.commBwdKind, row.commBwd);
  return timed;
}

//===----------------------------------------------------------------------===//
// CostModel
//===----------------------------------------------------------------------===//

FailureOr<CostModel> CostModel::build(ModuleOp module,
                                      const ClusterModel &cluster,
                                      const CostModelOptions &options) {
  auto forward =
      module.lookupSymbol<func::FuncOp>(LoomDialect::getForwardFunctionName());
  if (!forward || forward.isExternal())
    return module.emitError()
           << "the cost model needs @" << LoomDialect::getForwardFunctionName();
  auto modelAttr =
      module->getAttrOfType<ModelAttr>(LoomDialect::getModelAttrName());
  auto trainingAttr =
      module->getAttrOfType<TrainingAttr>(LoomDialect::getTrainingAttrName());
  if (!modelAttr || !trainingAttr)
    return module.emitError()
           << "the cost model needs the module's '"
           << LoomDialect::getModelAttrName() << "' and '"
           << LoomDialect::getTrainingAttrName() << "' attributes";
  CostModel model(cluster, options);
  model.name = modelAttr.getName().str();
  model.arch = modelAttr.getConfig();
  model.training = trainingAttr.getConfig();
  // The ops before the layer loop, one layer body, and the ops after it.
  model.groups.push_back({"embedding", {}});
  ScanOp layers;
  auto add = [&](Operation &op, OpGroup &group) -> LogicalResult {
    auto costed = dyn_cast<CostOpInterface>(op);
    if (!costed)
      return op.emitError()
             << "the cost model cannot price '" << op.getName() << "'";
    group.ops.push_back(costed);
    return success();
  };
  for (Operation &op : forward.getBody().front().without_terminator()) {
    if (auto scan = dyn_cast<ScanOp>(op)) {
      if (layers)
        return op.emitError() << "the cost model prices one layer loop, and "
                                 "@forward has a second";
      layers = scan;
      model.groups.push_back({"layer", {}});
      for (Operation &inner : scan.getBodyBlock().without_terminator())
        if (failed(add(inner, model.groups.back())))
          return failure();
      model.groups.push_back({"head", {}});
      continue;
    }
    if (failed(add(op, model.groups.back())))
      return failure();
  }
  if (!layers)
    return forward.emitError()
           << "the cost model found no layer loop (loom.scan) in @"
           << LoomDialect::getForwardFunctionName();
  model.numLayers = layers.getLength();

  // Parameters: each function argument with loom.param once. A parameter
  // used by both the embedding and the head (a tied table) is priced by
  // both groups' rows; remember how much, to count it once on one stage.
  auto usedBy = [&](Value value, const OpGroup &group) {
    return llvm::any_of(group.ops, [&](CostOpInterface op) {
      return llvm::is_contained(op->getOperands(), value);
    });
  };
  for (auto [index, arg] : llvm::enumerate(forward.getArguments())) {
    if (!forward.getArgAttr(index, LoomDialect::getParamAttrName()))
      continue;
    int64_t elements = cast<ShapedType>(arg.getType()).getNumElements();
    model.parameterCount += elements;
    if (usedBy(arg, model.groups.front()) && usedBy(arg, model.groups.back()))
      model.tiedParameters += elements;
  }
  return model;
}

CostContext CostModel::getContext(const PricingKey &key) const {
  CostContext context;
  context.batch = key.microBatch;
  context.tensorParallel = key.tp;
  context.sequenceParallel = key.sequenceParallel && key.tp > 1;
  context.elementBytes = getElementBytes(key.precision);
  context.fusedAttention = options.fusedAttention;
  context.lossKeepsLogits = framework.lossKeepsLogits;
  return context;
}

SmallVector<TimedRow> CostModel::priceGroupRows(const OpGroup &group,
                                                const PricingKey &key) const {
  CostContext context = getContext(key);
  const GpuSpec &gpu = *cluster.gpu;
  const EfficiencyAssumptions &eff = cluster.efficiency;
  Roofline roofline;
  roofline.matrixFlops = gpu.matrixPeak(key.precision) * eff.matrix;
  roofline.attentionFlops =
      gpu.matrixPeak(key.precision) *
      (options.fusedAttention
           ? framework.attentionEfficiency.value_or(eff.attention)
           : eff.matrix);
  roofline.vectorFlops = gpu.vectorPeak(key.precision) * eff.vector;
  roofline.memoryBandwidth = gpu.hbmBandwidth * eff.memory;
  roofline.matrixHalfWidth =
      framework.matrixHalfWidth.value_or(eff.matrixHalfWidth);
  auto commTime = [&](CollectiveKind kind, double bytes) {
    return cluster.collectiveTime(kind, bytes, key.tp, 1);
  };
  SmallVector<CostRow> rows;
  SmallVector<TimedRow> timed;
  for (CostOpInterface op : group.ops) {
    rows.clear();
    op.estimateCost(context, rows);
    std::string prefix;
    if (auto name = dyn_cast<NameLoc>(op->getLoc()))
      prefix = name.getName().str();
    for (CostRow &row : rows) {
      // Named after the op's location ("h.*.attn.c_attn"), with the part
      // for ops priced as several kernels ("h.*.attn:softmax").
      if (!prefix.empty())
        row.name = rows.size() == 1 ? prefix : prefix + ":" + row.name;
      timed.push_back(priceRow(row, roofline, commTime));
    }
  }
  return timed;
}

ArrayRef<GroupCost> CostModel::priceGroups(const PricingKey &key) {
  auto [it, inserted] = cache.try_emplace(key);
  SmallVector<GroupCost> &costs = it->second;
  if (inserted) {
    costs.resize(groups.size());
    double launch = cluster.efficiency.kernelLaunch;
    double elementBytes = getElementBytes(key.precision);
    for (auto [group, cost] : llvm::zip(groups, costs)) {
      SmallVector<TimedRow> rows = priceGroupRows(group, key);
      for (auto [i, timed] : llvm::enumerate(rows)) {
        const CostRow &row = timed.row;
        cost.flopsFwd += row.flopsFwd;
        cost.flopsBwd += row.flopsBwd;
        cost.tFwd += timed.tFwd() + launch;
        cost.tBwd += timed.tBwd() + launch;
        cost.tCommFwd += timed.tCommFwd;
        cost.tCommBwd += timed.tCommBwd;
        cost.activations += row.activationBuffer + row.rowStatistics;
        cost.activationStatistics += row.statisticsBuffer;
        if (row.attentionCore) {
          cost.tAttentionCoreFwd += timed.tFwd() + launch;
          cost.activationsSelective += row.selectiveBuffer;
        } else {
          cost.activationsSelective += row.activationBuffer + row.rowStatistics;
        }
        cost.parameters += row.weights / elementBytes;
        cost.largestWeights =
            std::max(cost.largestWeights, row.weights / elementBytes);
        // The gradients a row's backward pass holds beyond the kept
        // activations: none where it writes over its input, and the one of
        // its output not where the next row (its output's reader) writes
        // that gradient over it.
        double gradients = row.gradientOverInput ? 0 : row.activationGrad;
        if (i + 1 < rows.size() && rows[i + 1].row.gradientOverInput)
          gradients -= std::min(gradients, row.activationOut);
        cost.largestGradient = std::max(cost.largestGradient, gradients);
        if (row.fp32InputCopy > 0)
          cost.largestFp32Copy = std::max(cost.largestFp32Copy,
                                          row.activationIn + row.fp32InputCopy);
      }
      if (!group.ops.empty()) {
        auto type =
            cast<RankedTensorType>(group.ops.front()->getOperand(0).getType());
        double elements = key.microBatch;
        for (int64_t dim : type.getShape().drop_front())
          elements *= dim;
        if (key.sequenceParallel && key.tp > 1)
          elements /= key.tp;
        cost.inputBytes = elements * elementBytes;
      }
      // A row is one kernel a pass: small ones wait for the host to issue
      // them.
      double issue = rows.size() * framework.kernelDispatch;
      cost.tFwd = std::max(cost.tFwd, issue);
      cost.tBwd = std::max(cost.tBwd, issue);
    }
    // Every layer runs the one body: [embedding, layer x L, head].
    costs.insert(costs.begin() + 2, numLayers - 1, costs[1]);
  }
  return costs;
}

std::string CostModel::checkPlan(const PlanConfig &plan) const {
  ClusterConfig world;
  world.gpusPerNode = cluster.gpusPerNode;
  world.nodes = cluster.nodes;
  SmallVector<PlanViolation> violations =
      loom::checkPlan(plan, &arch, &training, &world);
  return violations.empty() ? std::string() : violations.front().message;
}

namespace {
/// Splits `costs` into `parts` contiguous non-empty ranges minimizing the
/// largest sum (the pipeline's slowest stage), and among those the sum of
/// the ranges' squared sums, so that stages off the critical path are even
/// too (their memory); returns the size of each range.
SmallVector<int64_t> balance(ArrayRef<double> costs, int64_t parts) {
  int64_t n = costs.size();
  SmallVector<double> prefix = {0};
  for (double cost : costs)
    prefix.push_back(prefix.back() + cost);
  struct Best {
    double largest = std::numeric_limits<double>::infinity(), squares = 0;
    int64_t from = -1;
  };
  auto better = [&](double largest, double squares, const Best &than) {
    double tolerance = 1e-9 * prefix.back();
    if (largest < than.largest - tolerance)
      return true;
    return largest <= than.largest + tolerance && squares < than.squares;
  };
  // best[k][i]: the first i costs in k ranges, the last starting at `from`.
  std::vector<std::vector<Best>> best(parts + 1,
                                      std::vector<Best>(n + 1, Best()));
  best[0][0] = {0, 0, 0};
  for (int64_t k = 1; k <= parts; ++k)
    for (int64_t i = k; i <= n - (parts - k); ++i)
      for (int64_t j = k - 1; j < i; ++j) {
        const Best &before = best[k - 1][j];
        if (before.from < 0)
          continue;
        double sum = prefix[i] - prefix[j];
        double largest = std::max(before.largest, sum);
        double squares = before.squares + sum * sum;
        if (better(largest, squares, best[k][i]))
          best[k][i] = {largest, squares, j};
      }
  SmallVector<int64_t> sizes(parts);
  for (int64_t k = parts, i = n; k > 0; --k) {
    int64_t from = best[k][i].from;
    sizes[k - 1] = i - from;
    i = from;
  }
  return sizes;
}
} // namespace

namespace {
/// What one pipeline stage's groups (embedding, layers, head) add up to per
/// micro-batch: times, and the bytes its rank holds.
struct StageWork {
  double compute = 0, recompute = 0, comm = 0, forward = 0, backward = 0;
  /// ZeRO-3's gathers and reduce-scatters, one per group and pass.
  double zeroForward = 0, zeroBackward = 0;
  double params = 0, kept = 0, transient = 0, largestLayer = 0;
  /// The parameters outside the layer loop (embedding, head).
  double outsideParams = 0;
  /// The most elements of one parameter tensor: an op's weights outside
  /// the layer loop, or stacked over a loop's layers.
  double largestTensor = 0;
  double keptOutside = 0, keptStatistics = 0;
};

/// The pricing of one plan (CostModel::estimate): the stages' layers, then
/// each stage's work, memory and time; the plan's estimate is its slowest
/// stage's time and its fullest stage's memory.
class PlanPricer {
public:
  PlanPricer(const CostModel &model, const PlanConfig &plan,
             Precision precision, llvm::ArrayRef<GroupCost> groups,
             PlanEstimate &est);

  void priceStages(llvm::ArrayRef<int64_t> stageLayers);
  void finish();

private:
  StageWork sumStage(int64_t stage, llvm::ArrayRef<int64_t> stageLayers,
                     llvm::ArrayRef<int64_t> stageStarts) const;
  /// The micro-batches a stage's rank holds at once, by the schedule.
  double inFlight(int64_t stage) const;
  /// The micro-batches a stage's rank holds once the first backward pass
  /// is done, when the gradients' sums exist.
  double heldWhileSumming(int64_t stage) const;
  RankMemory rankMemory(const StageWork &w, double inFlight,
                        double heldSumming) const;
  /// Whether each replica updates a slice of the flattened parameters
  /// (ZeRO-1/2 over several), which the step then gathers whole.
  bool updatesSlices() const {
    return dp > 1 && (plan.zero == 1 || plan.zero == 2);
  }
  /// Whether an offload plan's gradients leave the device as the backward
  /// pass makes them: bucket by bucket (PyTorch), or a layer loop's layer
  /// by layer (Loom's step, which sums several micro-batches' on the host)
  /// where no reduction over replicas follows the backward pass or the
  /// loop sums each layer onto its owner.
  bool streamsGradients() const {
    return fw.offloadsGradientBuckets ||
           (fw.offloadsLayerGradients &&
            (!(dp > 1 && plan.zero <= 2) || reducesLayersToOwners()));
  }
  /// Whether Loom's layer loop sums each layer's gradients onto the replica
  /// that updates it, which keeps them or, offloaded, sends them to its host
  /// (ZeRO-2 with one micro-batch, each rank's slice of a stage's stack
  /// whole layers).
  bool reducesLayersToOwners() const {
    return dp > 1 && plan.zero == 2 && m == 1 && plan.virtualStages == 1 &&
           llvm::all_of(est.layersPerStage,
                        [&](int64_t layers) { return layers % dp == 0; });
  }
  /// The data-parallel traffic of a stage's parameters, on a stream of its
  /// own beside the compute.
  double dataParallelTime(const StageWork &w) const;

  const CostModel &model;
  const PlanConfig &plan;
  const TrainingConfig &training;
  const ClusterModel &cluster;
  const FrameworkAssumptions &fw;
  Precision precision;
  llvm::ArrayRef<GroupCost> groups;
  PlanEstimate &est;
  Recompute recomputation;
  int64_t dp, tp, pp, m;
  double elementBytes, gradBytes, masterGradBytes, optimizerBytes;
  /// Under offload, a parameter's bytes on the host: the master weights
  /// (f32 training keeps them as the parameters), the optimizer state and
  /// the f32 gradient's copy.
  double hostBytes = 0;
  double sendBytes, sendTime;
  PipelineSchedule schedule;
};

PlanPricer::PlanPricer(const CostModel &model, const PlanConfig &plan,
                       Precision precision, llvm::ArrayRef<GroupCost> groups,
                       PlanEstimate &est)
    : model(model), plan(plan), training(model.getTraining()),
      cluster(model.getCluster()), fw(model.getFramework()),
      precision(precision), groups(groups), est(est), dp(plan.dp), tp(plan.tp),
      pp(plan.pp), m(plan.microBatches) {
  recomputation = plan.recompute == Recompute::selective && fw.selectiveIsNone
                      ? Recompute::none
                      : plan.recompute;
  elementBytes = getElementBytes(precision);
  bool mixed = precision != Precision::fp32;
  gradBytes = elementBytes;
  // The fp32 gradients mixed precision keeps next to those of the compute
  // precision, for the optimizer.
  masterGradBytes = mixed && fw.fp32Gradients ? 4 : 0;
  optimizerBytes = training.optimizer == OptimizerKind::adamw
                       ? (mixed ? 12 : 8)
                       : (training.momentum != 0 ? 4 : 0) + (mixed ? 4 : 0);
  if (plan.offload != Offload::none)
    hostBytes = optimizerBytes + (mixed ? 0 : 4) + 4;
  double activationBytesPerToken = elementBytes *
                                   model.getArchitecture().width /
                                   (plan.sequenceParallel ? tp : 1);
  sendBytes =
      est.microBatchSize * training.sequenceLength * activationBytesPerToken;
  sendTime = pp > 1 ? cluster.sendTime(sendBytes, tp * dp) : 0;
  // Interleaving's memory is read off its order; the others have formulas.
  if (pp > 1 && plan.schedule == Schedule::interleaved)
    schedule = buildPipelineSchedule(plan);
}

StageWork PlanPricer::sumStage(int64_t stage,
                               llvm::ArrayRef<int64_t> stageLayers,
                               llvm::ArrayRef<int64_t> stageStarts) const {
  int64_t layers = model.getNumLayers(), chunks = pp * plan.virtualStages;
  // The rank's groups (embedding, layers, head) and the chunk of each.
  SmallVector<std::pair<size_t, int64_t>> members;
  if (stage == 0)
    members.push_back({0, 0});
  for (int64_t c = stage, chunk = 0; c < chunks; c += pp, ++chunk)
    for (int64_t l = 0; l < stageLayers[c]; ++l)
      members.push_back({stageStarts[c] + l + 1, chunk});
  if (stage == pp - 1)
    members.push_back({layers + 1, plan.virtualStages - 1});

  StageWork w;
  // Stage recomputation keeps each chunk's input and reruns its forward
  // pass whole before its backward pass, when all of the chunk's
  // activations exist at once.
  bool wholeStage = recomputation == Recompute::stage;
  SmallVector<double> chunkActivations(plan.virtualStages, 0);
  double largestLayerWeights = 0;
  int64_t layerGroups = 0;
  for (auto [index, chunk] : members) {
    const GroupCost &g = groups[index];
    bool isLayer = index != 0 && index != static_cast<size_t>(layers) + 1;
    w.compute += g.tFwd + g.tBwd;
    w.forward += g.tFwd + g.tCommFwd;
    w.backward += g.tBwd + g.tCommBwd;
    if (plan.zero >= 3) {
      double gather = cluster.collectiveTime(
          CollectiveKind::allGather, g.parameters * elementBytes, dp, tp);
      w.zeroForward += gather;
      w.zeroBackward +=
          gather + cluster.collectiveTime(CollectiveKind::reduceScatter,
                                          g.parameters * gradBytes, dp, tp);
    }
    w.comm += g.tCommFwd + g.tCommBwd;
    w.params += g.parameters;
    w.transient = std::max(w.transient, g.largestGradient);
    if (fw.fp32InputCopies)
      w.transient = std::max(w.transient, g.largestFp32Copy);
    if (isLayer) {
      w.largestLayer = std::max(w.largestLayer, g.parameters);
      largestLayerWeights = std::max(largestLayerWeights, g.largestWeights);
      ++layerGroups;
    } else {
      w.outsideParams += g.parameters;
      w.largestTensor = std::max(w.largestTensor, g.largestWeights);
    }
    if (wholeStage) {
      chunkActivations[chunk] += g.activations;
      w.recompute += g.tFwd;
      w.comm += g.tCommFwd;
      continue;
    }
    if (!isLayer) {
      w.keptOutside += g.activations;
      continue;
    }
    switch (recomputation) {
    case Recompute::none:
      w.kept += g.activations;
      w.keptStatistics += g.activationStatistics;
      break;
    case Recompute::selective:
      w.kept += g.activationsSelective;
      w.recompute += g.tAttentionCoreFwd;
      break;
    case Recompute::full:
      w.kept += g.inputBytes;
      // The layer being recomputed holds all its activations at once.
      w.transient = std::max(w.transient, g.activations + g.largestGradient);
      w.recompute += g.tFwd;
      w.comm += g.tCommFwd;
      break;
    case Recompute::stage:
      llvm_unreachable("priced above");
    }
  }
  if (wholeStage) {
    // Every chunk but the model's first receives its input.
    int64_t inputs = stage == 0 ? plan.virtualStages - 1 : plan.virtualStages;
    w.keptOutside = inputs * sendBytes;
    w.transient += *llvm::max_element(chunkActivations);
  }
  // Each chunk's layer loop stacks a weight over its layers.
  w.largestTensor = std::max(
      w.largestTensor, largestLayerWeights * layerGroups / plan.virtualStages);
  // A stage shared with the embedding keeps its own copy of a tied table.
  if (pp == 1)
    w.params -= model.getTiedParameters() / tp;
  return w;
}

double PlanPricer::inFlight(int64_t stage) const {
  // Without a pipeline, micro-batches run one after the other (gradient
  // accumulation). GPipe runs every forward before the first backward;
  // 1F1B holds at most as many as there are stages ahead. Interleaved, a
  // rank holds forward passes of its chunks, each 1/v of its layers, as
  // the schedule's order says.
  if (pp > 1 && plan.schedule == Schedule::interleaved)
    return static_cast<double>(schedule.peakInFlight[stage]) /
           plan.virtualStages;
  return pp == 1                            ? 1
         : plan.schedule == Schedule::gpipe ? m
                                            : std::min<int64_t>(m, pp - stage);
}

double PlanPricer::heldWhileSumming(int64_t stage) const {
  // GPipe's forward passes are all done by then, and the first micro-batch's
  // activations gone; 1F1B runs another forward pass next while one is
  // left to run. An interleaved rank's order is left as the peak prices it.
  double held = inFlight(stage);
  if (pp == 1 || m == 1 || plan.schedule == Schedule::interleaved)
    return held;
  return std::min<double>(held, m - 1);
}

RankMemory PlanPricer::rankMemory(const StageWork &w, double inFlight,
                                  double heldSumming) const {
  double shard = static_cast<double>(dp);
  double params = w.params;
  bool mixed = precision != Precision::fp32;
  double weights = params * elementBytes / (plan.zero >= 3 ? shard : 1);
  double gradients = params * gradBytes / (plan.zero >= 2 ? shard : 1) +
                     params * masterGradBytes / (plan.zero >= 1 ? shard : 1);
  double optimizer = params * optimizerBytes / (plan.zero >= 1 ? shard : 1);
  // Mixed precision's f32 master weights whole on every replica, where
  // ZeRO-1/2 slice only the moments.
  if (fw.keepsWholeMasters && mixed && updatesSlices())
    optimizer += params * 4 * (1 - 1 / shard);
  // Offload: the host keeps the rank's part of the state, the device none.
  double host = params * hostBytes / (plan.zero >= 1 ? shard : 1);
  double temporary = w.transient;
  // Gradients a layer loop passes on as it makes them: two layers' (one in
  // flight) and those of the layers outside the loop.
  double layerByLayer = std::min(params, w.outsideParams + 2 * w.largestLayer);
  // Several micro-batches' gradients summed whole in f32 before the
  // replicas reduce them, beside each micro-batch's own, under ZeRO-0 to 2.
  // The first backward pass makes them, so they live beside the
  // activations the rank holds after it, not beside the most it holds.
  if (fw.sumsMicroBatchesWhole && m > 1 && plan.zero <= 2) {
    double kept = w.kept + w.keptOutside;
    temporary += std::max(0.0, params * 4 - (inFlight - heldSumming) * kept);
  }
  if (host > 0) {
    optimizer = 0;
    // Streamed to the host, the gradients hold a bucket of the device, or
    // the layer loop's two layers (one in flight) and what the layers
    // outside it make, ZeRO-3's reduce-scattered, ZeRO-2's summed whole.
    if (fw.offloadsGradientBuckets)
      gradients = std::min(params, fw.reduceBucketElements) * gradBytes;
    else if (streamsGradients())
      gradients = layerByLayer * gradBytes / (plan.zero >= 3 ? shard : 1);
  }
  // ZeRO-2's layer loop summing each layer onto its owner as it makes them:
  // the rank's slices in f32, beside two layers' (one being summed) and
  // those outside the loop, and no gradients whole.
  bool ownersSum =
      fw.sumsLayersOntoOwners && host == 0 && reducesLayersToOwners();
  double summing = 0;
  if (ownersSum) {
    summing = params * (4 - gradBytes) / shard + layerByLayer * 4;
    temporary += summing;
  }
  bool reducedWhole = fw.reduceScattersWholeGradients && updatesSlices() &&
                      !ownersSum && !(host > 0 && streamsGradients());
  // ZeRO-2's gradients whole in the step's precision, as ZeRO-1's.
  if (reducedWhole && plan.zero == 2)
    temporary += params * gradBytes * (1 - 1 / shard);
  if (plan.offload == Offload::parameters) {
    // The host keeps the parameters (the rank's shards under ZeRO-3); the
    // device the layer it computes and the next, fetched ahead.
    if (!(fw.fetchesF32Masters && elementBytes == 4 && !updatesSlices()))
      host += weights;
    weights = 0;
    temporary += 2 * std::min(params, w.largestLayer) * elementBytes /
                 (plan.zero >= 3 ? shard : 1);
  }
  // The gathered layer and what is prefetched after it, or the bucket
  // that gradients are reduced through.
  if (dp > 1 && plan.zero >= 3)
    temporary +=
        (w.largestLayer +
         std::min(params, std::max(w.largestLayer, fw.prefetchElements))) *
        elementBytes;
  else if (dp > 1)
    temporary += std::min(params, fw.reduceBucketElements) * gradBytes;
  // The step's end, once the activations, the gradients in the step's
  // precision and (without offload) its copies of the weights are gone:
  // the replicas reduce the gradients whole in f32, which are widened into
  // them a tensor at a time, then the step gathers the updated slices a
  // tensor (or a bucket of small ones) at a time, each written into the
  // parameters as it arrives, so that the rank's slices and the largest
  // tensor gathered exist at once.
  if (fw.gathersUpdatesByTensor && updatesSlices()) {
    double gathered =
        std::max(std::min(params, fw.reduceBucketElements), w.largestTensor);
    double end = (params / shard + gathered) * (host > 0 ? elementBytes : 4);
    if (reducedWhole)
      end = std::max(end, params * 4 + w.largestTensor * gradBytes);
    double gone = (w.kept + w.keptOutside) * inFlight;
    if (reducedWhole || ownersSum)
      gone += gradients + summing;
    if (mixed && host == 0)
      gone += weights;
    temporary = std::max(temporary, end - gone);
  }
  RankMemory rank{weights,  gradients, optimizer, w.kept + w.keptOutside,
                  inFlight, temporary};
  rank.host = host;
  rank.reserve = rank.live() * fw.allocatorReserve;
  int64_t communicators = (dp > 1) + (tp > 1) + (pp > 1);
  rank.runtime = fw.contextBytes + communicators * fw.communicatorBytes;
  return rank;
}

double PlanPricer::dataParallelTime(const StageWork &w) const {
  // A collective overlapping compute costs what the compute does not hide,
  // and the share of the rest that the streams' contention adds.
  auto overlapped = [&](double collective, double hiding) {
    return std::max(0.0, collective - hiding) +
           fw.overlapContention * std::min(collective, hiding);
  };
  double buckets = fw.reduceBucketElements > 0
                       ? std::ceil(w.params / fw.reduceBucketElements)
                       : 1;
  auto bucketed = [&](CollectiveKind kind, double bytes) {
    if (bytes <= 0)
      return 0.0;
    return buckets * cluster.collectiveTime(kind, bytes / buckets, dp, tp);
  };
  double gradientBytes = w.params * gradBytes;
  double weightBytes = w.params * elementBytes;
  switch (plan.zero) {
  case 0: // One all-reduce behind the last micro-batch's backward pass.
    return overlapped(bucketed(CollectiveKind::allReduce, gradientBytes),
                      w.backward);
  case 1: // Reduced to the shards' owners behind the last backward pass;
          // the updated parameters gathered after the optimizer.
    return overlapped(bucketed(CollectiveKind::reduceScatter, gradientBytes),
                      w.backward) +
           bucketed(CollectiveKind::allGather, weightBytes);
  case 2: // The gradients leave every micro-batch's backward pass.
    return m * overlapped(
                   bucketed(CollectiveKind::reduceScatter, gradientBytes),
                   w.backward) +
           bucketed(CollectiveKind::allGather, weightBytes);
  default: // Every layer gathered in both passes of every micro-batch.
    return m * (overlapped(w.zeroForward, w.forward) +
                overlapped(w.zeroBackward, w.backward));
  }
}

void PlanPricer::priceStages(llvm::ArrayRef<int64_t> stageLayers) {
  SmallVector<int64_t> stageStarts = est.plan.getStageStarts();
  double worstTime = -1, worstMemory = -1;
  for (int64_t stage = 0; stage < pp; ++stage) {
    StageWork w = sumStage(stage, stageLayers, stageStarts);
    double perMicroBatch =
        w.compute + w.recompute + w.comm + (pp > 1 ? 2 * sendTime : 0);
    double held = inFlight(stage);
    RankMemory rank = rankMemory(w, held, heldWhileSumming(stage));
    double memory = rank.total();
    est.stageMemory.push_back(rank);

    double dpComm = dataParallelTime(w);
    double optimizerParams = w.params / (plan.zero >= 1 ? dp : 1);
    double optimizerTraffic =
        training.optimizer == OptimizerKind::adamw ? 28 : 16;
    double optimizerTime =
        optimizerParams * (optimizerTraffic + gradBytes) /
        (cluster.gpu->hbmBandwidth * cluster.efficiency.memory);
    double transfer = 0, exposedTransfer = 0;
    if (plan.offload != Offload::none) {
      // The host updates at its share of the node's memory bandwidth; the
      // rank's f32 gradients go to it over the host link, and the updated
      // parameters come back in the step's precision. A framework that
      // streams the gradients out during the backward pass hides them
      // behind it (the copy engines do not contend with the kernels).
      const EfficiencyAssumptions &e = cluster.efficiency;
      double hostBandwidth =
          cluster.gpu->hostMemoryBandwidth / cluster.gpusPerNode * e.memory;
      optimizerTime = optimizerParams * (optimizerTraffic + 4) / hostBandwidth;
      double link = cluster.gpu->hostLinkBandwidth * e.link;
      // Loom's step sums the micro-batches' gradients on the host: each
      // micro-batch's cross behind its own backward pass, and the host
      // reads two f32 and writes one for each after the first.
      int64_t crossings =
          fw.offloadsLayerGradients && streamsGradients() ? m : 1;
      double down = crossings * optimizerParams * 4 / link +
                    (crossings - 1) * optimizerParams * 12 / hostBandwidth;
      double up = optimizerParams * elementBytes / link;
      double fetches = 0;
      if (plan.offload == Offload::parameters) {
        // The host writes its own copies, unless the device gathers them
        // whole from the ranks' slices (ZeRO-1/2); each micro-batch's
        // forward and backward passes fetch the rank's parameters (its
        // shards under ZeRO-3) layer by layer.
        up = updatesSlices()
                 ? (optimizerParams + w.params) * elementBytes / link
                 : 0;
        fetches =
            2 * m * w.params / (plan.zero >= 3 ? dp : 1) * elementBytes / link;
      }
      transfer = down + up + fetches;
      exposedTransfer =
          (streamsGradients() ? std::max(0.0, down - crossings * w.backward)
                              : down) +
          up +
          (fw.prefetchesOffloadedParameters
               ? std::max(0.0, fetches - m * (w.compute + w.recompute))
               : fetches);
    }
    // Fill and drain: pp - 1 micro-batches' time, of one chunk's when
    // interleaved (Narayanan et al. 2021).
    double bubble =
        (pp - 1) * perMicroBatch /
        (plan.schedule == Schedule::interleaved ? plan.virtualStages : 1);
    double stageTime = m * perMicroBatch + bubble + dpComm + optimizerTime +
                       exposedTransfer + fw.stepOverhead;
    if (stageTime > worstTime) {
      worstTime = stageTime;
      est.computeTime = m * (w.compute + w.recompute);
      est.recomputeTime = m * w.recompute;
      est.tpCommTime = m * w.comm;
      est.ppCommTime = pp > 1 ? m * 2 * sendTime : 0;
      est.bubbleTime = bubble;
      est.dpCommTime = dpComm;
      est.optimizerTime = optimizerTime;
      est.hostTransferTime = transfer;
      est.exposedTransferTime = exposedTransfer;
      est.fixedTime = fw.stepOverhead;
      est.stepTime = stageTime;
    }
    if (memory > worstMemory) {
      worstMemory = memory;
      est.worstStage = stage;
      est.weights = rank.weights;
      est.gradients = rank.gradients;
      est.optimizerState = rank.optimizerState;
      est.hostMemory = rank.host;
      est.activations = held * (w.kept + w.keptOutside);
      est.keptPerLayer = w.kept / est.layersPerStage[stage];
      est.keptStatisticsPerLayer = w.keptStatistics / est.layersPerStage[stage];
      est.keptOutsideLayers = w.keptOutside;
      est.stageLayers = est.layersPerStage[stage];
      est.temporary = rank.temporary;
      est.reserve = rank.reserve;
      est.runtime = rank.runtime;
    }
  }
}

void PlanPricer::finish() {
  double sequencesPerSecond = training.batchSize / est.stepTime;
  est.tokensPerSecond = sequencesPerSecond * training.sequenceLength;
  double peak = cluster.gpu->matrixPeak(precision);
  int64_t world = dp * tp * pp, layers = model.getNumLayers();
  int64_t width = model.getArchitecture().width;
  FlopsPerSequence flops = trainingFlopsPerSequence(
      model.getParameterCount(), layers, width, training.sequenceLength,
      /*recompute=*/false);
  est.mfu = flopsUtilization(flops, true, sequencesPerSecond, world, peak);
  FlopsPerSequence hardware = flops;
  if (recomputation == Recompute::full || recomputation == Recompute::stage)
    hardware = trainingFlopsPerSequence(model.getParameterCount(), layers,
                                        width, training.sequenceLength, true);
  else if (recomputation == Recompute::selective)
    hardware.attention *= 1.5;
  est.hfu = flopsUtilization(hardware, true, sequencesPerSecond, world, peak);
}
} // namespace

SmallVector<int64_t>
CostModel::stageLayersOf(const PlanConfig &plan, const PricingKey &key,
                         llvm::ArrayRef<GroupCost> groupCosts) {
  // The model's pp * v stages (chunk c of rank r is stage c * pp + r), as
  // the plan gives them or balanced by time, with the embedding and the
  // head folded into the first and last layer.
  if (!plan.stageLayers.empty())
    return plan.stageLayers;
  int64_t chunks = plan.pp * plan.virtualStages;
  auto [it, inserted] = balanced.try_emplace({key, chunks});
  if (inserted) {
    auto layerTime = [&](const GroupCost &g) {
      return g.tFwd + g.tBwd + g.tCommFwd + g.tCommBwd;
    };
    SmallVector<double> costs;
    for (int64_t l = 0; l < numLayers; ++l)
      costs.push_back(layerTime(groupCosts[l + 1]));
    costs.front() += layerTime(groupCosts.front());
    costs.back() += layerTime(groupCosts.back());
    it->second = balance(costs, chunks);
  }
  return it->second;
}

PlanEstimate CostModel::estimate(const PlanConfig &plan, Precision precision) {
  PlanEstimate est;
  est.plan = plan;
  est.precision = precision;
  est.capacity = cluster.gpu->memoryBytes;
  est.usable = est.capacity * (1 - cluster.memoryMargin);
  est.hostUsable = cluster.gpu->hostMemoryBytes / cluster.gpusPerNode *
                   (1 - cluster.memoryMargin);
  est.illegal = checkPlan(plan);
  if (!est.illegal.empty())
    return est;
  est.microBatchSize = training.batchSize / (plan.dp * plan.microBatches);
  PricingKey key{est.microBatchSize, plan.tp, plan.sequenceParallel, precision};
  ArrayRef<GroupCost> groupCosts = priceGroups(key);
  SmallVector<int64_t> stageLayers = stageLayersOf(plan, key, groupCosts);
  if (plan.pp > 1)
    est.plan.stageLayers = stageLayers;
  est.layersPerStage.assign(plan.pp, 0);
  for (int64_t c = 0, chunks = plan.pp * plan.virtualStages; c < chunks; ++c)
    est.layersPerStage[c % plan.pp] += stageLayers[c];
  PlanPricer pricer(*this, plan, precision, groupCosts, est);
  pricer.priceStages(stageLayers);
  pricer.finish();
  return est;
}
