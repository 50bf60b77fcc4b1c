//===- LoomConfig.h - Model, training, plan and cluster values --*- C++ -*-===//
//
// The plain values behind the module attributes #loom.model, #loom.training,
// #loom.plan and #loom.cluster. The JSON reader fills them before any IR
// exists, the attributes convert to and from them, and the cost model prices
// them; the legality of a plan is decided here, once, for all three.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOMCONFIG_H
#define LOOM_DIALECT_LOOMCONFIG_H

#include "loom/Dialect/LoomEnums.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir {
namespace loom {

struct ArchitectureConfig {
  int64_t layers = 0;
  int64_t width = 0;
  int64_t heads = 0;
  /// Key/value heads (grouped-query attention); 0: as many as heads.
  int64_t kvHeads = 0;
  int64_t hidden = 0; ///< MLP inner width; 4 * width unless given.
  int64_t vocab = 0;
  int64_t paddedVocab = 0; ///< Rows of the token table; >= vocab.
  int64_t positions = 0;
  bool tiedEmbeddings = true;
  double normEpsilon = 1e-5;
  NormKind norm = NormKind::layernorm;
  PositionKind position = PositionKind::learned;
  double ropeTheta = 10000.0; ///< Rotary base; position == rope only.
  /// Llama 3's frequency scaling of the rotary angles (Hugging Face's
  /// rope_type "llama3"): `factor` 0 for none; else the frequencies of
  /// wavelengths past `originalContext / lowFreqFactor` divided by
  /// `factor`, those below `originalContext / highFreqFactor` kept, and
  /// those between blended.
  struct RopeScaling {
    double factor = 0, lowFreqFactor = 1, highFreqFactor = 4;
    int64_t originalContext = 0;
  } ropeScaling;
  MlpKind mlp = MlpKind::gelu;
  BiasKind biases = BiasKind::all;

  int64_t getKvHeads() const { return kvHeads ? kvHeads : heads; }
  /// The four numbers of Llama 3's scaling, for the rotary op.
  llvm::SmallVector<double, 4> getRopeScalingArray() const {
    return {ropeScaling.factor, ropeScaling.lowFreqFactor,
            ropeScaling.highFreqFactor,
            static_cast<double>(ropeScaling.originalContext)};
  }
  /// Whether queries share keys and values in groups.
  bool isGrouped() const { return getKvHeads() != heads; }
  /// Which of the block's linears have biases.
  bool hasQkvBias() const {
    return biases == BiasKind::all || biases == BiasKind::qkv ||
           biases == BiasKind::attention;
  }
  bool hasOutputBias() const {
    return biases == BiasKind::all || biases == BiasKind::attention;
  }
  bool hasMlpBias() const {
    return biases == BiasKind::all || biases == BiasKind::mlp;
  }
};

struct TrainingConfig {
  int64_t batchSize = 0; ///< The global batch, in sequences.
  int64_t sequenceLength = 0;
  OptimizerKind optimizer = OptimizerKind::adamw;
  double learningRate = 3e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double epsilon = 1e-8;
  double weightDecay = 0.0;
  double momentum = 0.0;
  double gradClip = 0.0; ///< 0: no clipping.
  Precision precision = Precision::fp32;
};

struct PlanConfig {
  int64_t dp = 1;
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t zero = 0;
  int64_t microBatches = 1;
  Schedule schedule = Schedule::gpipe;
  Recompute recompute = Recompute::none;
  bool sequenceParallel = false;
  /// Model chunks per pipeline rank (interleaved 1F1B); 1 otherwise.
  int64_t virtualStages = 1;
  /// Layers of each of the pp * virtualStages pipeline stages, in model
  /// order; empty until loom-plan balances them (or for pp = 1).
  llvm::SmallVector<int64_t> stageLayers;
  /// What the host keeps (ZeRO-Offload): nothing, or the optimizer's state
  /// and update.
  Offload offload = Offload::none;

  int64_t getWorldSize() const { return dp * tp * pp; }
  /// The first layer of each stage, and the layer count after the last.
  llvm::SmallVector<int64_t> getStageStarts() const;
};

/// The largest size of a model, a batch or a plan's micro-batch count
/// (2^32): bounded so that the sums and products of sizes fit in 64 bits.
constexpr int64_t kMaxSize = int64_t(1) << 32;

/// The most GPUs a cluster description may have (2^20): ten times the
/// largest machines built, small enough that planning stays quick and that
/// products of plan sizes fit in 64 bits.
constexpr int64_t kMaxWorldSize = int64_t(1) << 20;

/// A pipeline step is unrolled per micro-batch pass: past this many passes
/// per rank (micro-batches times model chunks) its IR no longer fits a
/// compile.
constexpr int64_t kMaxPipelinePasses = 4096;

/// The default of ClusterConfig::memoryMargin: 8%.
constexpr double kDefaultMemoryMargin = 0.08;

struct ClusterConfig {
  std::string gpu;
  int64_t gpusPerNode = 0;
  int64_t nodes = 1;
  double intraNodeBandwidth = 0; ///< GB/s; 0: the catalogue's figure.
  double interNodeBandwidth = 0; ///< GB/s; 0: the catalogue's figure.
  /// Share of each GPU's memory a plan must leave free to fit: the caching
  /// allocator's retries and run-to-run variation need room
  /// (docs/cost-model.md).
  double memoryMargin = kDefaultMemoryMargin;

  int64_t getWorldSize() const { return gpusPerNode * nodes; }
};

/// Why a plan cannot run: the plan field at fault ("plan.tp") and what it
/// contradicts, naming the model, training or cluster field involved.
struct PlanViolation {
  std::string field;
  std::string message;
};

/// Whether Llama 3's rotary scaling is one: factor >= 1, 0 < low < high
/// frequency factors, a positive original context, all finite.
bool checkRopeScaling(const ArchitectureConfig::RopeScaling &scaling);

/// Every reason `plan` cannot run the model `arch` on a batch of `training`
/// on `cluster`; empty when the plan is legal. Each of the three may be null
/// (hand-written IR need not carry them all), and then nothing is checked
/// against it. The IR verifier, the description reader and the planner all
/// decide legality with this function.
llvm::SmallVector<PlanViolation> checkPlan(const PlanConfig &plan,
                                           const ArchitectureConfig *arch,
                                           const TrainingConfig *training,
                                           const ClusterConfig *cluster);

/// How a parameter starts: drawn from a normal distribution, or constant.
enum class TensorInit { Normal, Zeros, Ones };
llvm::StringRef stringifyTensorInit(TensorInit init);
std::optional<TensorInit> parseTensorInit(llvm::StringRef name);

/// A parameter of the whole model as its description defines it, beyond
/// its shape: how it starts and where Hugging Face's checkpoints keep it.
/// The importer derives one per parameter (the module's `loom.tensors`),
/// the manifest carries them to the runtime (`tensor` lines).
struct TensorSpec {
  std::string name;
  /// The whole tensor's (a stacked one's leading with the layers).
  std::vector<int64_t> shape;
  TensorInit init = TensorInit::Zeros;
  double std = 0; ///< Of TensorInit::Normal.
  /// The real rows of the first dimension (the vocabulary's, of a padded
  /// token table); 0: all of them.
  int64_t rows = 0;
  /// The name in Hugging Face's checkpoints, `*` standing for the layer of
  /// a stacked tensor; empty: none.
  std::string hfName;
  /// Hugging Face stores its transpose ((in, out): GPT-2's Conv1D).
  bool hfTranspose = false;
  /// Several comma-separated hfName parts: the rows each holds of each of
  /// `hfGroups` groups of the first dimension (of a layer's, for a stacked
  /// tensor), in order. Empty: the parts split it evenly, in one group.
  /// Grouped-query attention's fused projection interleaves Hugging Face's
  /// q, k and v per key/value group.
  std::vector<int64_t> hfRows;
  int64_t hfGroups = 1;
};

/// Schedule names as users write them: "gpipe", "1f1b", "interleaved".
std::optional<Schedule> parseScheduleName(llvm::StringRef name);
llvm::StringRef getScheduleName(Schedule schedule);

/// "dp=8,tp=1,pp=1,zero=3,mb=16,schedule=gpipe,recompute=full,sp=0,
/// precision=bf16", the form --plan reads (with ",v=N" after the schedule
/// for an interleaved one).
std::string formatPlan(const PlanConfig &plan, Precision precision);

} // namespace loom
} // namespace mlir

#endif // LOOM_DIALECT_LOOMCONFIG_H
