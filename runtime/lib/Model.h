//===- Model.h - An opened artifact: the runtime's model -------*- C++ -*-===//
//
// What the runtime keeps of an artifact (loom_model, runtime.h's opaque
// handle) and the types its parts share: the entry points and their
// arguments as the manifest lists them (ModelManifest.cpp), the parameters'
// and optimizer state's places in the whole and in this rank's buffers
// (ParameterStore.cpp), the calls of the step (Step.cpp), and the files a
// model reads and writes (Checkpoint.cpp, Safetensors.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_MODEL_H
#define LOOM_RUNTIME_MODEL_H

#include "Device.h"
#include "Error.h"
#include "loom/abi.h"
#include "loom/runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <dlfcn.h>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace loom {
using EntryFn = void (*)(void **);

/// Storage from the step's heap (loom_rt's, which is managed memory under
/// the CUDA backend), for the buffers generated code reads and writes.
template <typename T> struct StepAllocator {
  using value_type = T;
  StepAllocator() = default;
  template <typename U> StepAllocator(const StepAllocator<U> &) {}
  T *allocate(size_t n) {
    void *p = heapAllocate(64, n * sizeof(T));
    if (!p)
      throw std::bad_alloc();
    return static_cast<T *>(p);
  }
  void deallocate(T *p, size_t) { heapFree(p); }
  template <typename U> bool operator==(const StepAllocator<U> &) const {
    return true;
  }
  template <typename U> bool operator!=(const StepAllocator<U> &) const {
    return false;
  }
};
template <typename T> using StepVector = std::vector<T, StepAllocator<T>>;

/// The entry points' scalar arguments, where generated code reads and
/// writes them.
struct Scalars {
  float lr, step, loss, gradNorm, lossScale;
};

/// fp16's dynamic loss scaling, between steps (the step scales and skips).
struct LossScaler {
  bool enabled = false;
  float initial = 65536.0f, scale = 65536.0f;
  int64_t growthInterval = 2000, cleanSteps = 0, skippedSteps = 0;
  bool lastSkipped = false;

  void reset() {
    scale = initial;
    cleanSteps = skippedSteps = 0;
    lastSkipped = false;
  }
  /// After a step with gradient norm `norm`: whether it was skipped.
  bool update(float norm) {
    lastSkipped = !std::isfinite(norm);
    if (lastSkipped) {
      scale *= 0.5f;
      cleanSteps = 0;
      ++skippedSteps;
    } else if (++cleanSteps >= growthInterval) {
      scale *= 2.0f;
      cleanSteps = 0;
    }
    return lastSkipped;
  }
};

/// How tensor parallelism divides a parameter (manifest.h's `tp_dim`,
/// `tp_blocks` and `tp_shared`): dimension `dim` of the whole is `blocks`
/// equal blocks. Without `shared`, each block is divided among the tp ranks
/// and a rank holds its part of every block. With `shared` > 0 there are
/// fewer blocks than ranks: teams of tp / blocks consecutive ranks each
/// hold one block, dividing its leading elements and each holding its last
/// `shared` (a key/value head the team's query heads share).
struct TpSplit {
  int64_t dim = -1, blocks = 1, shared = 0;

  bool operator==(const TpSplit &other) const {
    return dim == other.dim && blocks == other.blocks && shared == other.shared;
  }
  /// The whole's extent along `dim` of a part `extent` long; 0 where `tp`
  /// ranks cannot hold such parts.
  int64_t wholeExtent(int64_t extent, int64_t tp) const {
    if (!shared)
      return extent * tp;
    if (tp % blocks || tp / blocks < 2 || extent <= shared)
      return 0;
    return blocks * ((extent - shared) * (tp / blocks) + shared);
  }
  /// Where element `row` (along `dim`) of rank `tpRank`'s part, `rows`
  /// long, lies in the whole; whether this rank is the one that gives it to
  /// a gathered whole (the first of a team, for the shared elements).
  std::pair<int64_t, bool> wholeRow(int64_t row, int64_t rows, int64_t tp,
                                    int64_t tpRank) const {
    if (!shared) {
      int64_t perBlock = rows / blocks;
      return {(row / perBlock * tp + tpRank) * perBlock + row % perBlock, true};
    }
    int64_t team = tp / blocks, own = rows - shared;
    int64_t first = tpRank / team * (own * team + shared);
    if (row < own)
      return {first + tpRank % team * own + row, true};
    return {first + own * team + (row - own), tpRank % team == 0};
  }
};

/// One argument of an entry point, as the manifest describes it.
struct Arg {
  std::string kind, name, dtype;
  std::vector<int64_t> shape;
  /// The dimension of the whole tensor this argument holds 1/dp of (this
  /// replica's slice of it, ZeRO-3), or -1 for the whole tensor.
  int64_t shard = -1;
  /// A parameter tensor parallelism divides: how (`dim` -1: it does not).
  TpSplit tpSplit;
  /// A pipeline stage's stacked parameter: the runs of the whole's layers
  /// it holds, (first, count) each, in its order; empty for all of them.
  std::vector<std::pair<int64_t, int64_t>> layerRuns;
  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

struct Entry {
  EntryFn fn = nullptr;
  std::string symbolName;
  std::vector<Arg> args;
  /// The entry's own memory line (a pipeline rank's), if it has one:
  /// parameters, gradients, optimizer state and activations, in bytes.
  std::vector<int64_t> memory;
  /// The arguments its entry line announces.
  int64_t declaredArgs = 0;
  /// The bytes of its static arena (its arena line), or -1 without one.
  int64_t arena = -1;
  /// The argument array the entry receives, bound once at load: every
  /// buffer is the model's but the tokens and targets of each call.
  std::vector<void *> buffers;
  int64_t tokensSlot = -1, targetsSlot = -1;
  /// It returns gradients (forward_grad) into the runtime's own, which do
  /// not exist yet: allocateGradients binds them.
  bool unboundGradients = false;
  /// Parameters it reads whole whose masters the rank keeps a ZeRO-1/2
  /// slice of (offload): each a slot and the device copy it is widened
  /// from before each call, into the buffer beside it.
  struct WholePart {
    int64_t slot;
    size_t copy;
    std::vector<float> values;
  };
  std::vector<WholePart> wholeParts;
  /// Why the entry cannot be called on this rank's buffers; empty if it
  /// can.
  std::string unbindable;
  /// Where the GPU reads the tokens and targets from, under the CUDA
  /// backend: the caller's arrays are host memory.
  StepVector<int32_t> tokens, targets;

  /// How parameter `param` of this entry lies in the whole: its own
  /// argument, or for a master weight kept as a ZeRO-1/2 slice of its
  /// flattened part (offload) the device copy of that part, which keeps
  /// the part's shape, tensor-parallel dimension and layers.
  const Arg &partLayout(const Arg &param) const {
    if (param.shard < 0)
      return param;
    for (const Arg &arg : args)
      if (arg.kind == LOOM_ARG_PARAM_COPY && arg.name == param.name &&
          arg.shape != param.shape)
        return arg;
    return param;
  }
};

inline int64_t product(const std::vector<int64_t> &shape, size_t begin,
                       size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end && d < shape.size(); ++d)
    n *= shape[d];
  return n;
}

/// A parameter, or a tensor of optimizer state: its place in the whole
/// (the model in llm.c's order, as checkpoints hold it; the state in the
/// step's order) and in this rank's buffer. Two levels divide it. Tensor
/// parallelism gives the rank its `part` (`tpSplit`). ZeRO then keeps the
/// replica's 1/dp of the part along dimension `shard` of `dpShape` (the
/// part's shape, or the part flattened for ZeRO-1/2's optimizer state).
/// How a parameter starts and where Hugging Face's checkpoints keep it: its
/// manifest `tensor` line (manifest.h), which the compiler derived from the
/// model's description.
struct TensorSpec {
  /// The whole tensor's.
  std::vector<int64_t> shape;
  enum class Init { Normal, Zeros, Ones };
  Init init = Init::Zeros;
  double std = 0;
  /// The real rows of the first dimension; 0: all of them.
  int64_t rows = 0;
  /// The name in Hugging Face's checkpoints, `*` for a stacked tensor's
  /// layer; empty: none.
  std::string hfName;
  bool hfTranspose = false;
  /// The rows of each hf part in each of hfGroups groups; empty: even
  /// parts (manifest.h's tensor line).
  std::vector<int64_t> hfRows;
  int64_t hfGroups = 1;
};

struct Param {
  std::string name;
  /// A parameter's (an optimizer state tensor's is its parameter's).
  TensorSpec spec;
  std::vector<int64_t> shape; ///< The whole tensor's.
  int64_t offset = 0, size = 0;
  TpSplit tpSplit;
  std::vector<int64_t> part, dpShape;
  int64_t shard = -1;
  int64_t localOffset = 0, localSize = 0;
  /// Pipelines: whether this rank holds the tensor, the first stage's rank
  /// that does (which alone gives it to a gathered whole), and the layers a
  /// stacked one holds (Arg::layerRuns).
  bool held = true;
  int64_t firstHolder = 0;
  std::vector<std::pair<int64_t, int64_t>> layerRuns;

  /// forEachRun, with the elements a pipeline stage holds placed among the
  /// whole's layers.
  template <typename Fn>
  void forEachWholeRun(int64_t dp, int64_t dpRank, int64_t tp, int64_t tpRank,
                       Fn copy, bool ownedOnly = false) const {
    if (layerRuns.empty())
      return forEachRun(dp, dpRank, tp, tpRank, copy, ownedOnly);
    int64_t layerSize = size / shape[0];
    forEachRun(
        dp, dpRank, tp, tpRank,
        [&](int64_t local, int64_t at, int64_t count) {
          while (count > 0) {
            int64_t layer = at / layerSize, within = at % layerSize;
            for (const auto &[first, held] : layerRuns) {
              if (layer < held) {
                layer += first;
                break;
              }
              layer -= held;
            }
            int64_t n = std::min(count, layerSize - within);
            copy(local, layer * layerSize + within, n);
            local += n;
            at += n;
            count -= n;
          }
        },
        ownedOnly);
  }

  /// Calls `copy(local, whole, count)` for each run of elements contiguous
  /// in both this rank's buffer and the whole, local offsets ascending;
  /// with `ownedOnly`, not for elements that another rank of its
  /// tensor-parallel team gives to a gathered whole.
  template <typename Fn>
  void forEachRun(int64_t dp, int64_t dpRank, int64_t tp, int64_t tpRank,
                  Fn copy, bool ownedOnly = false) const {
    // ZeRO: the rank's chunk of each outer slice of dpShape.
    int64_t chunk = shard < 0 ? localSize
                              : product(dpShape, shard + 1, dpShape.size()) *
                                    (dpShape[shard] / dp);
    // Tensor parallelism: rows of `part` along its dimension, each `inner`
    // long.
    int64_t dim = tpSplit.dim;
    int64_t inner = dim < 0 ? product(part, 0, part.size())
                            : product(part, dim + 1, part.size());
    int64_t rows = dim < 0 ? 1 : part[dim];
    int64_t wholeRows = dim < 0 ? 1 : tpSplit.wholeExtent(rows, tp);
    for (int64_t i = 0; i < localSize;) {
      int64_t o = i / chunk, r = i % chunk;
      int64_t j = shard < 0 ? i : (o * dp + dpRank) * chunk + r;
      int64_t a = j / (rows * inner), row = j / inner % rows, col = j % inner;
      auto [wholeRow, owned] = dim < 0
                                   ? std::pair<int64_t, bool>{row, true}
                                   : tpSplit.wholeRow(row, rows, tp, tpRank);
      int64_t k = (a * wholeRows + wholeRow) * inner + col;
      int64_t count = std::min(chunk - r, inner - col);
      if (owned || !ownedOnly)
        copy(i, k, count);
      i += count;
    }
  }
};

/// The entry point pipeline rank `r` runs.
inline std::string stageEntry(int64_t r) {
  return LOOM_STAGE_STEP_PREFIX + std::to_string(r);
}
/// The forward pass alone (validation) pipeline rank `r` runs.
inline std::string stageEvalEntry(int64_t r) {
  return LOOM_STAGE_EVAL_PREFIX + std::to_string(r);
}
/// The scores to sample from that pipeline rank `r` computes.
inline std::string stageLogitsEntry(int64_t r) {
  return LOOM_STAGE_LOGITS_PREFIX + std::to_string(r);
}

} // namespace loom

/// An opened artifact: its code, its manifest's entry points, and this
/// rank's parameters, gradients, optimizer state and scalars.
struct loom_model {
  std::string path;
  void *handle = nullptr;
  loom_model_info info{};
  std::string name, optimizer;
  std::map<std::string, loom::Entry> entries;
  std::vector<loom::Param> params;
  std::map<std::string, size_t> paramIndex;
  /// This rank's parameters and gradients (Param::localOffset), and its
  /// optimizer state, each tensor as the step's argument has it (a shard
  /// under ZeRO).
  loom::StepVector<float> values, grads, state;
  /// Under offload=optimizer: the device's copy of each parameter in the
  /// step's precision (`param_copy` arguments), at `offset` bytes of
  /// `copyBytes`, as the parameter's `values` in `dtype`; stale once the
  /// master weights are set other than by the step, refilled before it.
  struct ParamCopy {
    size_t param;
    int32_t dtype;
    int64_t offset, count;
    /// The whole parameter, of which the rank's master is a slice
    /// (ZeRO-1/2): filled from the gathered whole.
    bool whole;
  };
  std::vector<ParamCopy> copies;
  std::map<std::string, size_t> copyIndex;
  loom::StepVector<char> copyBytes;
  mutable bool copiesStale = true;
  /// Whether the host touched the parameters, gradients or optimizer state
  /// since the last step moved them to the GPU (moveStoreToDevice): set
  /// by every reader and writer of them but the step.
  mutable bool storeOnHost = true;
  /// Moves the parameters, gradients, optimizer state and copies to the
  /// GPU before a step, where the host touched them since the last.
  void moveStoreToDevice();
  /// Whether the plan offloads: the master weights and optimizer state are
  /// host memory (an f32 offload=parameters step may have no copies: the
  /// device fetches the masters).
  bool offloaded() const { return offload != "none"; }
  /// Lays out the param_copy arguments of the step (false, with the error
  /// set, on one that matches no parameter this rank holds).
  bool layoutParamCopies();
  /// Whether the host has the memory an offload plan needs: its own and
  /// `device` bytes more (the device's part, on a CPU). False, with the
  /// error set, when not.
  bool checkHostMemory(int64_t device);
  /// The copies from the master weights, where stale (false, with the
  /// error set, when gathering the masters fails).
  bool refreshParamCopies();
  /// The scores the logits entry writes (loomc --logits).
  loom::StepVector<float> logits;
  /// The optimizer state's tensors, as the step lists them.
  std::vector<loom::Param> states;
  std::map<std::string, size_t> stateIndex;
  float lr = 0, step = 0, loss = 0, gradNorm = 0;
  loom::LossScaler lossScaler;
  /// lr, step and the loss scale on their way in, loss and gradNorm on
  /// their way out.
  loom::StepVector<loom::Scalars> scalars;
  /// The manifest's tensor lines, in its order, and whether they are
  /// llm.c's GPT-2 checkpoint's (`checkpoint llmc`).
  std::map<std::string, loom::TensorSpec> tensorSpecs;
  std::vector<std::string> tensorOrder;
  bool llmcLayout = false;
  int64_t planMicroBatches = 0, stackedLayers = 0;
  std::string schedule;
  /// What the backward pass recomputes (the plan line's), "none" without a
  /// plan line.
  std::string recompute = "none";
  /// What the host keeps (the plan line's offload): "none", "optimizer" or
  /// "parameters" (the copies in `copyBytes` are host memory too).
  std::string offload = "none";
  /// The entry point train steps run: "train_step", or the pipeline rank's
  /// own program.
  std::string stepEntry = "train_step";
  /// The forward pass alone a pipeline rank runs (loom_model_eval).
  std::string evalEntry;
  /// The scores to sample from (loom_model_logits): "logits", or the
  /// pipeline rank's own.
  std::string logitsEntry = LOOM_OUTPUT_LOGITS;
  /// Micro-batches in the whole batch: forward and forward_grad run on
  /// every one of them, on every rank, without communicating.
  int64_t forwardChunks = 1;

  ~loom_model() {
    if (handle)
      dlclose(handle);
  }

  /// Sets "<path>: bad manifest: <why>"; returns false.
  bool badManifest(const std::string &why) const {
    return loom::setError("%s: bad manifest: %s", path.c_str(), why.c_str());
  }
  bool parseManifest(const char *text);
  static bool parseLayerRuns(const std::string &text, loom::Arg &arg);
  void setMemory(const std::vector<int64_t> &bytes) {
    info.param_bytes = bytes[0];
    info.grad_bytes = bytes[1];
    info.state_bytes = bytes[2];
    info.activation_bytes = bytes[3];
    info.host_bytes = bytes[4];
  }
  /// Checks every parameter's whole shape against the model line, which
  /// checkpoints' headers are written from.
  bool checkModelShapes();
  /// With `checkpoint llmc`: whether the model line's sizes, which llm.c's
  /// header holds, are those of the tensors its data holds (Checkpoint.cpp).
  bool checkLlmcHeader() const;
  /// A pipeline artifact's entries: one step per pipeline rank, which
  /// together hold every layer once.
  bool checkPipelineEntries();
  /// The pipeline ranks' entry points that say what which is: each rank's
  /// step and, for all ranks or none, its forward pass alone and its scores.
  bool checkPipelineEntryNames();
  /// The logits entry point `name` (loomc --logits): its tokens and scores
  /// are of one micro-batch of `rows` sequences.
  bool checkLogitsEntry(const std::string &name, int64_t rows);
  /// Joins the job of a pipeline artifact, whose rank's stage decides what
  /// it holds, and keeps that rank's step only.
  bool joinPipeline();
  bool layoutParams();
  /// Gives each parameter and optimizer state tensor its manifest tensor
  /// line (checkModelShapes found every parameter's), and keeps llmcLayout
  /// only where the parameters are the tensor lines in their order.
  void attachTensorSpecs();
  /// Calls a per-micro-batch entry on each micro-batch of a whole batch.
  bool callMicroBatches(const char *entryName, const int32_t *tokens,
                        const int32_t *targets, float *lossOut,
                        float *gradsOut);
  /// Whether this rank holds parameter `name` as an entry reads it (or
  /// writes its gradient): `size` elements.
  bool holdsAsRead(const std::string &name, int64_t size) const {
    auto it = paramIndex.find(name);
    return it == paramIndex.end() || !params[it->second].held ||
           params[it->second].localSize == size;
  }
  float *paramFor(const std::string &name, float *base) {
    auto it = paramIndex.find(name);
    return it == paramIndex.end() || !params[it->second].held
               ? nullptr
               : base + params[it->second].localOffset;
  }
  /// Copies this rank's part of each of `tensors` from `whole` into
  /// `local`.
  void scatter(const std::vector<loom::Param> &tensors, const float *whole,
               float *local) const;
  /// The whole of `tensors` into `whole` from every replica's `local`
  /// part: a collective of the replicas when the plan shards them.
  bool gather(const std::vector<loom::Param> &tensors, const float *local,
              std::vector<float> &whole) const;
  void scatter(const float *whole) {
    scatter(params, whole, values.data());
    copiesStale = true;
  }
  bool gather(std::vector<float> &whole) const {
    return gather(params, values.data(), whole);
  }
  /// Resets the optimizer and the step count.
  void resetOptimizer() {
    storeOnHost = true;
    std::fill(state.begin(), state.end(), 0.0f);
    step = 0;
    lossScaler.reset();
  }
  /// This rank's replica (0 for an artifact of one); false, with the error
  /// set, when a data parallel artifact's process has not joined its grid.
  bool replica(int64_t &index) const;
  /// The model's buffer for argument `arg`; null for one it does not have.
  void *bufferFor(const loom::Arg &arg);
  bool bindEntries();
  /// Allocates the gradients an entry returns, and binds them.
  bool allocateGradients();
  /// Runs an entry point; false, with the error set, when the GPU failed.
  bool call(const char *entryName, const int32_t *tokens,
            const int32_t *targets);
  /// Under the CUDA backend: whether the GPU has room for the step.
  bool checkDeviceMemory();
};

namespace loom {
/// Whether `model` has llm.c's layout (its manifest's `checkpoint llmc`),
/// which llm.c's checkpoints need; sets the error naming `path` when not.
bool checkLlmcLayout(const loom_model *model, const char *path);
} // namespace loom

#endif // LOOM_RUNTIME_MODEL_H
