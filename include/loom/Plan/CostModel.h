//===- CostModel.h - Step time and memory of a parallel plan ----*- C++ -*-===//
//
// Loom's analytical cost model (docs/cost-model.md). Ops price themselves
// through CostOpInterface; this file turns their rows into time with a
// roofline per op, prices collectives with an alpha-beta model on the
// cluster's topology, and adds up memory per rank and step time for a plan.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PLAN_COSTMODEL_H
#define LOOM_PLAN_COSTMODEL_H

#include "loom/Dialect/LoomDialect.h"
#include "loom/Dialect/LoomHardware.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/CommandLine.h"

#include <map>
#include <optional>
#include <string>
#include <tuple>

namespace mlir {
namespace loom {

//===----------------------------------------------------------------------===//
// Hardware and topology
//===----------------------------------------------------------------------===//

/// Fractions of the published peaks that real kernels reach, and collective
/// latencies. The defaults are stated in docs/cost-model.md.
struct EfficiencyAssumptions {
  double matrix = 0.70; ///< Large matrix products on tensor cores.
  /// Hockney's half-performance width of a matrix product: a product whose
  /// smallest dimension is n runs at n / (n + halfWidth) of `matrix`.
  double matrixHalfWidth = 1000;
  double attention = 0.30; ///< Fused attention kernels.
  double vector = 0.80;    ///< Elementwise arithmetic.
  double memory = 0.80;    ///< HBM streaming.
  double link = 0.80;      ///< NVLink / network bus bandwidth.
  double intraNodeLatency = 8e-6;
  double interNodeLatency = 15e-6;
  /// Per kernel, forward or backward. With the roofline it makes small
  /// kernels slow: one moving V bytes streams at V / (V + launch * HBM
  /// bandwidth) of `memory`.
  double kernelLaunch = 4e-6;
};

/// Host time an eager PyTorch program takes to issue one kernel of one pass
/// (FrameworkAssumptions::kernelDispatch), fitted on seed 001.
constexpr double kEagerKernelDispatch = 46e-6;

/// Which training program runs the plan: what it keeps besides the tensors
/// of the step and what it adds to the step's time.
enum class Framework {
  /// A PyTorch trainer (DeepSpeed ZeRO, Megatron-LM, FSDP): caching
  /// allocator, fp32 gradient copies in mixed precision, bucketed
  /// collectives on a second stream.
  pytorch,
  /// Loom's compiled step: buffers in one arena, gradients in the compute
  /// precision.
  loom,
};

/// The values of Framework on a command line: pytorch, loom.
llvm::cl::ValuesClass getFrameworkValues();

/// The terms of a framework's memory and time beyond the step's tensors,
/// each stated with its source in docs/cost-model.md.
struct FrameworkAssumptions {
  /// The CUDA context with the kernels loaded, and library handles and
  /// workspaces (cuBLAS, cuDNN).
  double contextBytes = 0;
  /// NCCL's buffers for each communicator a rank belongs to (its data,
  /// tensor and pipeline groups larger than one rank).
  double communicatorBytes = 0;
  /// The allocator's reserve above the peak of live tensors.
  double allocatorReserve = 0;
  /// Mixed precision also keeps an fp32 copy of the gradients (the
  /// optimizer's input), partitioned by ZeRO from stage 1.
  bool fp32Gradients = false;
  /// Ops copy their input to fp32 in mixed precision, as the loss does its
  /// logits (CostRow::fp32InputCopy).
  bool fp32InputCopies = false;
  /// Elements of the data-parallel gradient bucket (reduced per collective)
  /// and, under ZeRO-3, of the parameters prefetched ahead of their layer.
  double reduceBucketElements = 0, prefetchElements = 0;
  /// Fixed cost of a step: the optimizer's launches, the gradient norm and
  /// overflow checks, synchronisation with the host.
  double stepOverhead = 0;
  /// Host time to issue one kernel of one pass (an eager framework's Python,
  /// dispatcher and autograd): a group's pass takes at least its kernels'
  /// issue time, as the device can run no further ahead of the host.
  double kernelDispatch = 0;
  /// Share of an overlapped data-parallel collective's time that still
  /// delays the compute it overlaps (streams contend for SMs and HBM).
  double overlapContention = 0;
  /// Selective recomputation changes nothing: the attention's gradient
  /// rebuilds the attention core from the log-sum-exp the forward keeps
  /// in any case (Loom's step), where Megatron-LM's selective drops the
  /// core's activations and reruns it.
  bool selectiveIsNone = false;
  /// The loss keeps its logits in the step's precision for its backward
  /// pass, which recomputes the softmax and writes the logits' gradient
  /// over them (Loom's step), where a PyTorch trainer keeps fp32
  /// probabilities and makes the gradient beside them
  /// (CostContext::lossKeepsLogits).
  bool lossKeepsLogits = false;
  /// Under offload=optimizer, the gradients leave the device bucket by
  /// bucket as the backward pass makes them (DeepSpeed's ZeRO-Offload).
  bool offloadsGradientBuckets = false;
  /// The same where the plan lets the step send a layer loop's gradients
  /// as the loop makes them, in a copy that runs during the next layer's
  /// backward pass: no data-parallel reduction after the backward pass
  /// (ZeRO-0 to 2 over replicas), or ZeRO-2's sum of each layer onto the
  /// replica that owns it, in the loop (one micro-batch, dp dividing each
  /// stage's layers); several micro-batches' gradients the host sums.
  /// Loom's step; its device then holds two layers' gradients and those
  /// outside the loop.
  bool offloadsLayerGradients = false;
  /// Under offload=parameters in f32, the device fetches the master weights
  /// the host keeps whole (not ZeRO-1/2's slices), with no second copy of
  /// them in the step's precision (Loom's step).
  bool fetchesF32Masters = false;
  /// Under offload=parameters, each layer's parameters are fetched from the
  /// host while the layer before computes (DeepSpeed's ZeRO-Infinity
  /// prefetch; Loom's step, double-buffered), rather than when the layer
  /// starts.
  bool prefetchesOffloadedParameters = false;
  /// Under ZeRO-1/2, the updated slices are gathered at the step's end, a
  /// tensor (or a bucket of small ones) at a time, each written into the
  /// parameters as it arrives (Loom's step): the rank's updated slices and
  /// the largest gathered tensor exist at once, where the activations are
  /// gone.
  bool gathersUpdatesByTensor = false;
  /// Under ZeRO-2 with one micro-batch, where a rank's slice of a layer
  /// stack is whole layers, the layer loop sums each layer's gradients
  /// onto the replica that updates it, in f32, as it makes them: the
  /// device holds the rank's layers, the layer being summed and the
  /// gradients outside the loop, not the stack whole (Loom's step).
  bool sumsLayersOntoOwners = false;
  /// Under ZeRO-1/2, gradients that do not leave the device as the
  /// backward pass makes them are made whole in the step's precision and
  /// reduced over the replicas whole in f32 after it, ZeRO-2's into the
  /// rank's slice (Loom's step), where a PyTorch trainer reduces each
  /// bucket into its slice as the backward pass fills it.
  bool reduceScattersWholeGradients = false;
  /// Mixed precision's f32 master weights are the parameters, whole on
  /// every replica: ZeRO-1/2 slice only the moments, each replica updates
  /// its slice of the masters and gathers the rest (Loom's step).
  bool keepsWholeMasters = false;
  /// Under ZeRO-0 to 2 with several micro-batches, their gradients are
  /// summed whole in f32 on the device before the replicas reduce them
  /// (Loom's step, where it does not stream them to the host).
  bool sumsMicroBatchesWhole = false;
  /// The framework's own kernels where they were measured, replacing the
  /// cluster's EfficiencyAssumptions: the half-performance width of its
  /// matrix products and the share of the peak its fused attention reaches.
  std::optional<double> matrixHalfWidth, attentionEfficiency;

  static FrameworkAssumptions get(Framework framework);
};

/// A cluster ready for pricing: the GPU kind, how many per node, and the
/// link bandwidths per GPU and direction.
struct ClusterModel {
  const GpuSpec *gpu = nullptr;
  int64_t gpusPerNode = 1;
  int64_t nodes = 1;
  double intraNodeBandwidth = 0;
  double interNodeBandwidth = 0;
  /// Share of each GPU's memory a plan leaves free (ClusterConfig).
  double memoryMargin = kDefaultMemoryMargin;
  EfficiencyAssumptions efficiency;

  int64_t getWorldSize() const { return gpusPerNode * nodes; }

  /// Builds the model of `config`, whose GPU kind must be the catalogue's
  /// (ClusterAttr's verifier checks it); null for an unknown kind.
  static std::optional<ClusterModel> get(const ClusterConfig &config);

  /// Time of a collective over `groupSize` ranks spaced `stride` apart in
  /// rank order, on a buffer of `bytes` (the whole, unsharded buffer):
  /// ring algorithms, alpha-beta, at the bandwidth of the slowest link the
  /// ring crosses.
  double collectiveTime(CollectiveKind kind, double bytes, int64_t groupSize,
                        int64_t stride) const;
  /// Time to send `bytes` between ranks `stride` apart.
  double sendTime(double bytes, int64_t stride) const;
};

//===----------------------------------------------------------------------===//
// Rows priced on a GPU
//===----------------------------------------------------------------------===//

/// A row of the per-op table with its times (seconds).
struct TimedRow {
  CostRow row;
  double tCompFwd = 0, tMemFwd = 0, tCompBwd = 0, tMemBwd = 0;
  double tCommFwd = 0, tCommBwd = 0;
  double tFwd() const { return std::max(tCompFwd, tMemFwd); }
  double tBwd() const { return std::max(tCompBwd, tMemBwd); }
  double tTotalFwd() const { return tFwd() + tCommFwd; }
  double tTotalBwd() const { return tBwd() + tCommBwd; }
};

/// The peaks a row is priced against: FLOP/s for matrix products and for
/// the rest, and memory bandwidth (bytes/s).
struct Roofline {
  double matrixFlops;
  double attentionFlops;
  double vectorFlops;
  double memoryBandwidth;
  /// See EfficiencyAssumptions::matrixHalfWidth; 0 prices every product at
  /// `matrixFlops`.
  double matrixHalfWidth = 0;
};

/// Prices `row`: roofline time of each pass, and `commTime` for its
/// collectives.
TimedRow priceRow(const CostRow &row, const Roofline &roofline,
                  llvm::function_ref<double(CollectiveKind, double)> commTime);

//===----------------------------------------------------------------------===//
// The model's ops, grouped
//===----------------------------------------------------------------------===//

/// A group of consecutive ops: the embedding, one transformer layer, or the
/// head and loss.
struct OpGroup {
  std::string name;
  llvm::SmallVector<CostOpInterface> ops;
};

/// Sums over a group of rows for one micro-batch on one rank.
struct GroupCost {
  double flopsFwd = 0, flopsBwd = 0;
  double tFwd = 0, tBwd = 0;         ///< Roofline time plus kernel launches.
  double tCommFwd = 0, tCommBwd = 0; ///< Tensor-parallel collectives.
  double tAttentionCoreFwd = 0;      ///< Selective recomputation reruns this.
  double activations = 0;            ///< Kept for the backward pass.
  double activationStatistics = 0;   ///< Of which softmax statistics.
  double activationsSelective = 0;   ///< Kept when the attention core is not.
  double inputBytes = 0;             ///< The group's input activation.
  double parameters = 0;             ///< Elements of weights on this rank.
  double largestWeights = 0;         ///< Of one op's weights, the most.
  double largestGradient = 0;        ///< Biggest transient gradient buffer.
  /// Biggest input with its fp32 copy (CostRow::fp32InputCopy).
  double largestFp32Copy = 0;
};

/// How a plan executes each group, for pricing.
struct PricingKey {
  int64_t microBatch;
  int64_t tp;
  bool sequenceParallel;
  Precision precision;
  bool operator<(const PricingKey &other) const {
    return std::tie(microBatch, tp, sequenceParallel, precision) <
           std::tie(other.microBatch, other.tp, other.sequenceParallel,
                    other.precision);
  }
};

/// Memory (bytes) of one rank of a pipeline stage (of every rank, without a
/// pipeline).
struct RankMemory {
  double weights = 0, gradients = 0, optimizerState = 0;
  /// What one micro-batch's forward passes on the rank keep for their
  /// backward passes, and how many micro-batches' worth the schedule holds
  /// at most (chunk passes over chunks when interleaved).
  double keptPerMicroBatch = 0, inFlight = 0;
  /// Buffers that exist during one pass: the largest gradient, a layer or
  /// stage being recomputed, ZeRO-3's gathered layers.
  double temporary = 0;
  /// The allocator's reserve above `live()`.
  double reserve = 0;
  /// The CUDA context and the communicators' buffers.
  double runtime = 0;
  /// Under offload=optimizer, host memory, apart from the rest: the master
  /// weights, the optimizer state and the gradients' copies, and under
  /// offload=parameters the parameters in the step's precision.
  double host = 0;
  /// What the rank holds between steps.
  double state() const { return weights + gradients + optimizerState; }
  /// Everything the rank's tensors need at once.
  double live() const {
    return state() + keptPerMicroBatch * inFlight + temporary;
  }
  double total() const { return live() + reserve + runtime; }
};

/// One rank's memory as the compiler counts it for a compiled plan
/// (docs/memory.md): the parameters and optimizer state the runtime holds
/// between steps and the arena of the rank's training step, which holds
/// every buffer of the step, its gradients and activations included.
struct CompiledRankMemory {
  int64_t parameters = 0, optimizer = 0, arena = 0;
  /// What the host keeps under offload (the master weights and optimizer
  /// state, counted in none of the above).
  int64_t host = 0;
  int64_t peak() const { return parameters + optimizer + arena; }
};

/// Step time and memory of a plan.
struct PlanEstimate {
  PlanConfig plan;
  Precision precision = Precision::fp32;
  int64_t microBatchSize = 0;
  /// Why the plan cannot run at all (empty when legal).
  std::string illegal;

  // Time (seconds) of one optimizer step.
  double stepTime = 0;
  double computeTime = 0; ///< Critical-path stage's compute, all micro-batches.
  double recomputeTime = 0; ///< Part of computeTime.
  double tpCommTime = 0; ///< Tensor-parallel collectives on the critical path.
  double ppCommTime = 0; ///< Activations sent between stages.
  double bubbleTime = 0; ///< Pipeline fill and drain.
  double dpCommTime = 0; ///< Exposed gradient sync and ZeRO gathers.
  /// The update; under offload the host's, with the exposed transfers.
  double optimizerTime = 0;
  /// Under offload: the gradients to the host and the parameters back, all
  /// of it, and what of it the backward pass does not hide.
  double hostTransferTime = 0, exposedTransferTime = 0;
  double fixedTime = 0; ///< The framework's fixed cost of a step.
  double tokensPerSecond = 0;
  double mfu = 0, hfu = 0;

  // Memory (bytes) of the rank that needs most.
  int64_t worstStage = 0;
  double weights = 0, gradients = 0, optimizerState = 0;
  double activations = 0, temporary = 0, reserve = 0, runtime = 0;
  /// Host memory under offload (RankMemory::host).
  double hostMemory = 0;
  /// What that rank keeps for the backward pass of one micro-batch: each of
  /// its layers (they are alike), and the embedding and head when it holds
  /// them. `activations` is this times the micro-batches in flight.
  /// `keptStatisticsPerLayer` is the part of `keptPerLayer` that is a
  /// fused attention's softmax statistics.
  double keptPerLayer = 0, keptStatisticsPerLayer = 0, keptOutsideLayers = 0;
  int64_t stageLayers = 0;
  /// The compiler's figures for a rank of each pipeline stage (one without
  /// a pipeline), where the plan was compiled (loom-plan's
  /// MemoryCompiler): the tensors of the rank that needs most are then
  /// the compiled peak, not the model's.
  llvm::SmallVector<CompiledRankMemory> compiledRanks;
  int64_t compiledRank = 0;
  /// Why the compiler has no figures for a plan it was asked to compile.
  std::string notCompiled;
  /// The bytes of tensors the rank that needs most holds at once: the
  /// compiled peak where the plan was compiled, else the model's terms.
  double tensorMemory() const {
    if (!compiledRanks.empty())
      return static_cast<double>(compiledRanks[compiledRank].peak());
    return weights + gradients + optimizerState + activations + temporary;
  }
  double memory() const { return tensorMemory() + reserve + runtime; }
  double capacity = 0; ///< The GPU's memory.
  double usable = 0;   ///< What a plan may use: capacity less the margin.
  /// A GPU's share of its node's host memory, less the margin: what an
  /// offload plan's host may keep for each GPU.
  double hostUsable = 0;
  bool hostFits() const { return hostMemory <= hostUsable; }
  bool fits() const {
    return illegal.empty() && memory() <= usable && hostFits();
  }
  /// What the plan leaves free of what it may use (negative: lacks).
  double headroom() const { return usable - memory(); }

  llvm::SmallVector<int64_t> layersPerStage;
  /// Memory of a rank of each stage.
  llvm::SmallVector<RankMemory> stageMemory;
};

struct CostModelOptions {
  /// Price attention as one fused kernel (what Loom generates for GPUs) or
  /// as separate score, softmax and weighted-sum kernels that keep the
  /// score matrix.
  bool fusedAttention = true;
  /// Whose memory and overheads to price (a PyTorch trainer's by default).
  Framework framework = Framework::pytorch;
};

/// The model's cost structure, read once from its forward function and
/// priced for any plan on one cluster.
class CostModel {
public:
  /// Reads @forward and the #loom.model and #loom.training attributes of
  /// `module`; fails with a diagnostic on the module when one is missing or
  /// @forward holds an op the model cannot price.
  static FailureOr<CostModel> build(ModuleOp module,
                                    const ClusterModel &cluster,
                                    const CostModelOptions &options = {});

  /// Checks that `plan` can run the model on the cluster (checkPlan of
  /// loom/Dialect/LoomConfig.h); returns why not, or an empty string.
  std::string checkPlan(const PlanConfig &plan) const;

  /// Prices `plan` in `precision` (bf16/fp16 mean mixed precision: fp32
  /// master weights and moments).
  PlanEstimate estimate(const PlanConfig &plan, Precision precision);

  /// The rows of a group priced for `key`, for reports.
  llvm::SmallVector<TimedRow> priceGroupRows(const OpGroup &group,
                                             const PricingKey &key) const;

  llvm::ArrayRef<OpGroup> getGroups() const { return groups; }
  llvm::StringRef getName() const { return name; }
  const ArchitectureConfig &getArchitecture() const { return arch; }
  const TrainingConfig &getTraining() const { return training; }
  const ClusterModel &getCluster() const { return cluster; }
  const FrameworkAssumptions &getFramework() const { return framework; }
  int64_t getNumLayers() const { return numLayers; }
  /// Parameters of the whole model, each counted once.
  int64_t getParameterCount() const { return parameterCount; }
  /// The parameters a tied head shares with the token table, which a step
  /// of one stage holds once.
  double getTiedParameters() const { return tiedParameters; }

  /// The op-level context of `key`.
  CostContext getContext(const PricingKey &key) const;

private:
  CostModel(const ClusterModel &cluster, const CostModelOptions &options)
      : cluster(cluster), options(options),
        framework(FrameworkAssumptions::get(options.framework)) {}

  /// The cost of the embedding, of each of the layers (all the layer
  /// body's) and of the head under `key`, computed once per key.
  llvm::ArrayRef<GroupCost> priceGroups(const PricingKey &key);
  /// The layers of each of the plan's pp x v stages: the plan's, or
  /// balanced by the groups' times (cached per key and stage count).
  llvm::SmallVector<int64_t>
  stageLayersOf(const PlanConfig &plan, const PricingKey &key,
                llvm::ArrayRef<GroupCost> groupCosts);

  std::string name;
  ArchitectureConfig arch;
  TrainingConfig training;
  ClusterModel cluster;
  CostModelOptions options;
  /// The terms of options.framework.
  FrameworkAssumptions framework;
  /// The embedding, the layer body (run numLayers times) and the head.
  llvm::SmallVector<OpGroup> groups;
  int64_t numLayers = 0;
  int64_t parameterCount = 0;
  /// Elements of parameters the head shares with the embedding (a tied
  /// table), priced by both groups' rows.
  double tiedParameters = 0;
  std::map<PricingKey, llvm::SmallVector<GroupCost>> cache;
  /// Layers of each of a pipeline's chunks, balanced by time, by the number
  /// of chunks.
  std::map<std::pair<PricingKey, int64_t>, llvm::SmallVector<int64_t>> balanced;
};

/// Bytes per element of activations and weights in `precision`.
double getElementBytes(Precision precision);

} // namespace loom
} // namespace mlir

#endif // LOOM_PLAN_COSTMODEL_H
