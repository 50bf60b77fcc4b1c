//===- Runtime.cpp - Artifacts, parameters and checkpoints ----------------===//

#include "loom/Version.h"
#include "loom/runtime.h"
#include "loom/abi.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "Device.h"
#include "Dist.h"
#include "Error.h"
#include "Manifest.h"
#include "Trace.h"

namespace loom {
namespace {
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

/// One argument of an entry point, as the manifest describes it.
struct Arg {
  std::string kind, name, dtype;
  std::vector<int64_t> shape;
  /// The dimension of the whole tensor this argument holds 1/dp of (this
  /// replica's slice of it, ZeRO-3), or -1 for the whole tensor.
  int64_t shard = -1;
  /// A parameter tensor parallelism divides: the dimension of the whole
  /// made of `tpBlocks` blocks that each tp rank holds its part of, or -1.
  int64_t tpDim = -1, tpBlocks = 1;
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
  /// Where the GPU reads the tokens and targets from, under the CUDA
  /// backend: the caller's arrays are host memory.
  StepVector<int32_t> tokens, targets;
};

int64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end && d < shape.size(); ++d)
    n *= shape[d];
  return n;
}

/// A parameter, or a tensor of optimizer state: its place in the whole
/// (the model in llm.c's order, as checkpoints hold it; the state in the
/// step's order) and in this rank's buffer. Two levels divide it. Tensor
/// parallelism gives the rank its `part`: dimension `tpDim` of the whole is
/// `tpBlocks` blocks, each divided among the tp ranks. ZeRO then keeps the
/// replica's 1/dp of the part along dimension `shard` of `dpShape` (the
/// part's shape, or the part flattened for ZeRO-1/2's optimizer state).
struct Param {
  std::string name;
  std::vector<int64_t> shape; ///< The whole tensor's.
  int64_t offset = 0, size = 0;
  int64_t tpDim = -1, tpBlocks = 1;
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
                       Fn copy) const {
    if (layerRuns.empty())
      return forEachRun(dp, dpRank, tp, tpRank, copy);
    int64_t layerSize = size / shape[0];
    forEachRun(dp, dpRank, tp, tpRank,
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
               });
  }

  /// Calls `copy(local, whole, count)` for each run of elements contiguous
  /// in both this rank's buffer and the whole, local offsets ascending.
  template <typename Fn>
  void forEachRun(int64_t dp, int64_t dpRank, int64_t tp, int64_t tpRank,
                  Fn copy) const {
    // ZeRO: the rank's chunk of each outer slice of dpShape.
    int64_t chunk = shard < 0 ? localSize
                              : product(dpShape, shard + 1, dpShape.size()) *
                                    (dpShape[shard] / dp);
    // Tensor parallelism: rows of `part` along tpDim, each `inner` long.
    int64_t inner = tpDim < 0 ? product(part, 0, part.size())
                              : product(part, tpDim + 1, part.size());
    int64_t rows = tpDim < 0 ? 1 : part[tpDim], perBlock = rows / tpBlocks;
    for (int64_t i = 0; i < localSize;) {
      int64_t o = i / chunk, r = i % chunk;
      int64_t j = shard < 0 ? i : (o * dp + dpRank) * chunk + r;
      int64_t a = j / (rows * inner), row = j / inner % rows, col = j % inner;
      int64_t wholeRow = tpDim < 0 ? row
                                   : (row / perBlock * tp + tpRank) * perBlock +
                                         row % perBlock;
      int64_t k = (a * rows * (tpDim < 0 ? 1 : tp) + wholeRow) * inner + col;
      int64_t count = std::min(chunk - r, inner - col);
      copy(i, k, count);
      i += count;
    }
  }
};

/// llm.c's checkpoint tensors, in its order; those of the blocks stacked
/// over the layers ("h.*.<name>", slice l being GPT-2's "h.<l>.<name>"),
/// which is how artifacts take them.
// clang-format off
const char *const kLlmcTensors[] = {
    "wte",
    "wpe",
#define LOOM_STACKED_TENSOR(id, name) LOOM_STACKED_PREFIX name,
    LOOM_LLMC_BLOCK_TENSORS(LOOM_STACKED_TENSOR)
#undef LOOM_STACKED_TENSOR
    "ln_f.weight",
    "ln_f.bias"};
// clang-format on
constexpr size_t kNumLlmcTensors = sizeof(kLlmcTensors) / sizeof(*kLlmcTensors);

} // namespace
} // namespace loom

using namespace loom;

struct loom_model {
  std::string path;
  void *handle = nullptr;
  loom_model_info info{};
  std::string name, optimizer;
  std::map<std::string, Entry> entries;
  std::vector<Param> params;
  std::map<std::string, size_t> paramIndex;
  /// This rank's parameters and gradients (Param::localOffset), and its
  /// optimizer state, each tensor as the step's argument has it (a shard
  /// under ZeRO).
  StepVector<float> values, grads, state;
  /// The optimizer state's tensors, as the step lists them.
  std::vector<Param> states;
  std::map<std::string, size_t> stateIndex;
  float lr = 0, step = 0, loss = 0, gradNorm = 0;
  LossScaler lossScaler;
  /// lr, step and the loss scale on their way in, loss and gradNorm on
  /// their way out.
  StepVector<Scalars> scalars;
  bool llmcLayout = false;
  int64_t planMicroBatches = 0, stackedLayers = 0;
  std::string schedule;
  /// The entry point train steps run: "train_step", or the pipeline rank's
  /// own program.
  std::string stepEntry = "train_step";
  /// The forward pass alone a pipeline rank runs (loom_model_eval).
  std::string evalEntry;
  /// Micro-batches in the whole batch: forward and forward_grad run on
  /// every one of them, on every rank, without communicating.
  int64_t forwardChunks = 1;

  ~loom_model() {
    if (handle)
      dlclose(handle);
  }

  /// Sets "<path>: bad manifest: <why>"; returns false.
  bool badManifest(const std::string &why) const {
    return setError("%s: bad manifest: %s", path.c_str(), why.c_str());
  }
  bool parseManifest(const char *text);
  static bool parseLayerRuns(const std::string &text, Arg &arg);
  void setMemory(const std::vector<int64_t> &bytes) {
    info.param_bytes = bytes[0];
    info.grad_bytes = bytes[1];
    info.state_bytes = bytes[2];
    info.activation_bytes = bytes[3];
  }
  /// Checks every parameter's whole shape against the model line, which
  /// checkpoints' headers are written from.
  bool checkModelShapes();
  /// A pipeline artifact's entries: one step per pipeline rank, which
  /// together hold every layer once.
  bool checkPipelineEntries();
  /// Joins the job of a pipeline artifact, whose rank's stage decides what
  /// it holds, and keeps that rank's step only.
  bool joinPipeline();
  bool layoutParams();
  /// Calls a per-micro-batch entry on each micro-batch of a whole batch.
  bool callMicroBatches(const char *entryName, const int32_t *tokens,
                        const int32_t *targets, float *lossOut,
                        float *gradsOut);
  float *paramFor(const std::string &name, float *base) {
    auto it = paramIndex.find(name);
    return it == paramIndex.end() || !params[it->second].held
               ? nullptr
               : base + params[it->second].localOffset;
  }
  /// Copies this rank's part of each of `tensors` from `whole` into
  /// `local`.
  void scatter(const std::vector<Param> &tensors, const float *whole,
               float *local) const;
  /// The whole of `tensors` into `whole` from every replica's `local`
  /// part: a collective of the replicas when the plan shards them.
  bool gather(const std::vector<Param> &tensors, const float *local,
              std::vector<float> &whole) const;
  void scatter(const float *whole) { scatter(params, whole, values.data()); }
  bool gather(std::vector<float> &whole) const {
    return gather(params, values.data(), whole);
  }
  /// Resets the optimizer and the step count.
  void resetOptimizer() {
    std::fill(state.begin(), state.end(), 0.0f);
    step = 0;
    lossScaler.reset();
  }
  /// This rank's replica (0 for an artifact of one); false, with the error
  /// set, when a data parallel artifact's process has not joined its grid.
  bool replica(int64_t &index) const;
  /// The model's buffer for argument `arg`; null for one it does not have.
  void *bufferFor(const Arg &arg);
  bool bindEntries();
  /// Allocates the gradients an entry returns, and binds them.
  bool allocateGradients();
  /// Runs an entry point; false, with the error set, when the GPU failed.
  bool call(const char *entryName, const int32_t *tokens,
            const int32_t *targets);
  /// Under the CUDA backend: whether the GPU has room for the step.
  bool checkDeviceMemory();
};

namespace {
/// The entry point pipeline rank `r` runs.
std::string stageEntry(int64_t r) {
  return LOOM_STAGE_STEP_PREFIX + std::to_string(r);
}
/// The forward pass alone (validation) pipeline rank `r` runs.
std::string stageEvalEntry(int64_t r) {
  return LOOM_STAGE_EVAL_PREFIX + std::to_string(r);
}
} // namespace

bool loom_model::parseLayerRuns(const std::string &text, Arg &arg) {
  // "first:count,first:count...", adding up to the argument's leading
  // dimension.
  std::stringstream ss(text);
  std::string run;
  int64_t held = 0;
  while (std::getline(ss, run, ',')) {
    // Plain digits, bounded like the model's layers, so that the runs' ends
    // and their sum stay far from overflowing.
    size_t colon = run.find(':');
    int64_t first = 0, count = 0;
    if (colon == std::string::npos ||
        !parseInteger(run.substr(0, colon), 0, kMaxManifestLayers - 1, first) ||
        !parseInteger(run.substr(colon + 1), 1, kMaxManifestLayers, count))
      return false;
    arg.layerRuns.push_back({first, count});
    held += count;
  }
  return !arg.layerRuns.empty() && !arg.shape.empty() && held == arg.shape[0] &&
         arg.kind != LOOM_ARG_INPUT && arg.kind != LOOM_ARG_OUTPUT;
}

bool loom_model::checkPipelineEntries() {
  auto fail = [&](const std::string &why) { return badManifest(why); };
  for (int64_t r = 0; r < info.pp; ++r)
    if (!entries.count(stageEntry(r)))
      return fail("no '" + stageEntry(r) + "' entry point for pipeline rank " +
                  std::to_string(r) + " of " + std::to_string(info.pp));
  // With every rank's step there, and every rank's forward pass alone or
  // none, any other entry is one too many.
  int64_t evals = 0;
  for (int64_t r = 0; r < info.pp; ++r)
    evals += entries.count(stageEvalEntry(r));
  if (evals != 0 && evals != info.pp)
    return fail("pipeline ranks' " LOOM_STAGE_EVAL_PREFIX "<rank> entry "
                "points: " +
                std::to_string(evals) + " of " + std::to_string(info.pp));
  info.can_eval = evals == info.pp;
  for (const auto &[entryName, entry] : entries) {
    bool own = false;
    for (int64_t r = 0; r < info.pp && !own; ++r)
      own = entryName == stageEntry(r) || entryName == stageEvalEntry(r);
    if (!own)
      return fail("entry point '" + entryName + "' in a pipeline artifact of " +
                  std::to_string(info.pp) +
                  " ranks, which run " LOOM_STAGE_STEP_PREFIX
                  "<rank> and " LOOM_STAGE_EVAL_PREFIX "<rank>");
  }
  // Every rank takes the replica's whole share of the batch and cuts it
  // into the plan's micro-batches.
  for (const auto &[entryName, entry] : entries)
    for (const Arg &arg : entry.args)
      if (arg.kind == LOOM_ARG_INPUT &&
          (arg.name == LOOM_INPUT_TOKENS || arg.name == LOOM_INPUT_TARGETS) &&
          (arg.shape.size() != 2 || info.batch % info.dp ||
           arg.shape[0] != info.batch / info.dp ||
           arg.shape[1] != info.sequence))
        return fail("the " + arg.name + " of '" + entryName +
                    "' do not match the training batch of " +
                    std::to_string(info.batch) +
                    " over dp = " + std::to_string(info.dp) + " replicas");
  if (planMicroBatches < 1 || (info.batch / info.dp) % planMicroBatches)
    return fail("a pipeline's plan line must give micro-batches that divide "
                "the batch");
  info.micro_batches = planMicroBatches;
  // A rank's forward pass alone takes parameters its step holds, as the
  // step holds them.
  if (info.can_eval)
    for (int64_t r = 0; r < info.pp; ++r) {
      const Entry &step = entries[stageEntry(r)];
      for (const Arg &arg : entries[stageEvalEntry(r)].args) {
        if (arg.kind != LOOM_ARG_PARAM)
          continue;
        bool held = std::any_of(
            step.args.begin(), step.args.end(), [&](const Arg &own) {
              return own.kind == arg.kind && own.name == arg.name &&
                     own.shape == arg.shape && own.shard == arg.shard &&
                     own.tpDim == arg.tpDim && own.tpBlocks == arg.tpBlocks &&
                     own.layerRuns == arg.layerRuns;
            });
        if (!held)
          return fail(arg.name + " of '" + stageEvalEntry(r) +
                      "' is not the parameter '" + stageEntry(r) + "' holds");
      }
    }
  // Each layer of each stacked parameter on exactly one stage's step.
  std::map<std::string, std::vector<int>> holders;
  for (int64_t r = 0; r < info.pp; ++r) {
    const std::string entryName = stageEntry(r);
    for (const Arg &arg : entries[entryName].args) {
      // Optimizer state takes its layers from its parameter (flattened by
      // ZeRO, it has none of its own).
      if (arg.kind != LOOM_ARG_PARAM)
        continue;
      bool stacked = arg.name.rfind(LOOM_STACKED_PREFIX, 0) == 0;
      if (stacked != !arg.layerRuns.empty())
        return fail(
            arg.name + " of '" + entryName + "' " +
            (stacked ? "gives no layers" : "is not stacked and gives layers"));
      if (!stacked)
        continue;
      std::vector<int> &count = holders[arg.name];
      count.resize(info.layers);
      for (const auto &[first, n] : arg.layerRuns)
        for (int64_t l = first; l < first + n; ++l) {
          if (l >= info.layers)
            return fail(arg.name + " of '" + entryName + "' holds layer " +
                        std::to_string(l) + " of a model of " +
                        std::to_string(info.layers));
          ++count[l];
        }
    }
  }
  for (const auto &[tensor, count] : holders)
    for (int64_t l = 0; l < static_cast<int64_t>(count.size()); ++l)
      if (count[l] != 1)
        return fail("layer " + std::to_string(l) + " of " + tensor + " is " +
                    (count[l] ? "held by " + std::to_string(count[l]) +
                                    " pipeline stages"
                              : "held by no pipeline stage"));
  if (stackedLayers != info.layers)
    return fail("parameters are stacked over " + std::to_string(stackedLayers) +
                " layers, the model has " + std::to_string(info.layers));
  info.name = name.c_str();
  info.optimizer = optimizer.c_str();
  info.schedule = schedule.c_str();
  return true;
}

bool loom_model::joinPipeline() {
  if (info.pp == 1)
    return true;
  if (loom_dist_init(info.pp, info.dp, info.tp))
    return setError("%s: %s", path.c_str(),
                    std::string(loom_last_error()).c_str());
  stepEntry = stageEntry(loom_dist_get_info()->pp_rank);
  evalEntry = stageEvalEntry(loom_dist_get_info()->pp_rank);
  const Entry &own = entries[stepEntry];
  if (!own.memory.empty())
    setMemory(own.memory);
  return true;
}

bool loom_model::parseManifest(const char *text) {
  // One rank unless the plan says otherwise.
  info.pp = info.dp = info.tp = 1;
  info.virtual_stages = 1;
  info.schedule = "";
  // A pipeline artifact may lack its ranks' forward passes alone; one rank's
  // always has @forward.
  info.can_eval = 1;
  std::istringstream in(text);
  std::string lineText;
  auto fail = [&](const std::string &why) { return badManifest(why); };
  if (!std::getline(in, lineText) || lineText != "loom-artifact 1")
    return fail("expected 'loom-artifact 1' first, the only format this "
                "runtime reads");
  if (!std::getline(in, lineText) ||
      lineText != std::string("loom-version ") + LOOM_VERSION)
    return setError("%s: compiled by another Loom version (%s); this runtime "
                    "is %s: recompile it with this version's loomc",
                    path.c_str(), lineText.c_str(), LOOM_VERSION);
  // A line's fields, each read in its range: a field nobody reads, or one
  // out of range, is an error, not a default.
  auto badLine = [&](const std::string &lineName,
                     const ManifestFields &fields) {
    return fail("the " + lineName + " line '" + lineText +
                "': " + fields.problem());
  };
  std::set<std::string> seen;
  Entry *current = nullptr;
  // The previous entry lists the arguments its entry line announced.
  auto argsComplete = [&] {
    if (!current ||
        static_cast<int64_t>(current->args.size()) == current->declaredArgs)
      return true;
    return fail("entry point '" + current->symbolName + "' announces " +
                std::to_string(current->declaredArgs) +
                " arguments and lists " + std::to_string(current->args.size()));
  };
  bool ended = false;
  while (!ended && std::getline(in, lineText)) {
    std::istringstream line(lineText);
    std::string key;
    line >> key;
    // Lines of the header come once each.
    if (key != "arg" && key != "entry" && key != "memory" && key != "arena" &&
        !seen.insert(key).second)
      return fail("a second '" + key + "' line");
    if (key == "checksum") {
      // Its value was checked against the file's bytes before loading.
      std::string digits, rest;
      line >> digits;
      if (digits.size() != LOOM_CHECKSUM_DIGITS || line >> rest)
        return fail("bad checksum line '" + lineText + "'");
    } else if (key == "model") {
      line >> name;
      ManifestFields f(line);
      int64_t tied = 0;
      if (name.empty() ||
          !f.integer("layers", info.layers, 1, kMaxManifestLayers) ||
          !f.integer("width", info.width, 1, kMaxManifestSize) ||
          !f.integer("heads", info.heads, 1, kMaxManifestSize) ||
          !f.integer("hidden", info.hidden, 1, kMaxManifestSize) ||
          !f.integer("vocab", info.vocab, 1, kMaxManifestSize) ||
          !f.integer("padded_vocab", info.padded_vocab, 1, kMaxManifestSize) ||
          !f.integer("positions", info.positions, 1, kMaxManifestSize) ||
          !f.integer("tied", tied, 0, 1) || !f.allRead())
        return badLine("model", f);
      info.tied = static_cast<int>(tied);
      if (info.width % info.heads || info.padded_vocab < info.vocab)
        return fail("the model line '" + lineText +
                    "' contradicts itself: heads must divide width, "
                    "padded_vocab be at least vocab");
    } else if (key == "training") {
      ManifestFields f(line);
      double ignored;
      if (!f.integer("batch", info.batch, 1, kMaxManifestSize) ||
          !f.integer("sequence", info.sequence, 1, kMaxManifestSize) ||
          !f.text("optimizer", optimizer) ||
          !f.number("lr", info.lr, 1e-300, 1e300) ||
          !f.number("beta1", ignored, 0, 1) ||
          !f.number("beta2", ignored, 0, 1) ||
          !f.number("eps", ignored, 0, 1e300) ||
          !f.number("weight_decay", ignored, 0, 1e300) ||
          !f.number("momentum", ignored, 0, 1) ||
          !f.number("grad_clip", ignored, 0, 1e300) || !f.allRead())
        return badLine("training", f);
      if (optimizer != "adamw" && optimizer != "sgd")
        return fail("the training line '" + lineText +
                    "': unknown optimizer '" + optimizer + "'");
    } else if (key == "plan") {
      ManifestFields f(line);
      if (!f.integer("dp", info.dp, 1, kMaxManifestRanks) ||
          !f.integer("tp", info.tp, 1, kMaxManifestRanks) ||
          !f.integer("pp", info.pp, 1, kMaxManifestRanks) ||
          !f.integer("zero", info.zero, 0, 3) ||
          !f.integer("micro_batches", planMicroBatches, 1, kMaxManifestSize))
        return badLine("plan", f);
      if (info.pp > 1) {
        if (!f.text("schedule", schedule) ||
            !f.integer("virtual_stages", info.virtual_stages, 1,
                       kMaxManifestLayers))
          return badLine("plan", f);
        if (schedule != "gpipe" && schedule != "1f1b" &&
            schedule != "interleaved")
          return fail("bad pipeline schedule in the plan line '" + lineText +
                      "'");
      }
      if (!f.allRead())
        return badLine("plan", f);
    } else if (key == "memory") {
      // After an entry line, that entry's figures (a pipeline rank's).
      ManifestFields f(line);
      std::vector<int64_t> bytes(4);
      if (!f.integer("parameters", bytes[0], 0, INT64_MAX / 8) ||
          !f.integer("gradients", bytes[1], 0, INT64_MAX / 8) ||
          !f.integer("optimizer", bytes[2], 0, INT64_MAX / 8) ||
          !f.integer("activations", bytes[3], 0, INT64_MAX / 8) || !f.allRead())
        return badLine("memory", f);
      if (current && !current->memory.empty())
        return fail("a second 'memory' line for entry point '" +
                    current->symbolName + "'");
      if (current)
        current->memory = bytes;
      else if (!seen.insert("memory").second)
        return fail("a second 'memory' line");
      else
        setMemory(bytes);
    } else if (key == "arena") {
      // After an entry line: its arena, and how much of it is live at once,
      // communicated, kept for the backward pass and gradients (for
      // reports).
      ManifestFields f(line);
      int64_t bytes = 0, live = 0, communication = 0, kept = 0, gradients = 0;
      if (!f.integer("bytes", bytes, 0, INT64_MAX / 8) ||
          !f.integer("live", live, 0, bytes) ||
          !f.integer("communication", communication, 0, live) ||
          !f.integer("kept", kept, 0, live - communication) ||
          !f.integer("gradients", gradients, 0, live - communication - kept) ||
          !f.allRead())
        return badLine("arena", f);
      if (!current)
        return fail("an 'arena' line before any entry line");
      if (current->arena >= 0)
        return fail("a second 'arena' line for entry point '" +
                    current->symbolName + "'");
      current->arena = bytes;
    } else if (key == "target") {
      std::string target, arch;
      line >> target;
      ManifestFields f(line);
      if (target != "cuda")
        return fail("unknown target '" + target + "'");
      if (!f.text("arch", arch) || !f.allRead())
        return badLine("target", f);
      if (!useCuda(arch))
        return setError("%s: %s", path.c_str(),
                        std::string(loom_last_error()).c_str());
      // Blocks the heap kept from a CPU artifact are host memory.
      loom_release_cached_memory();
    } else if (key == "stacked") {
      std::string prefix, count, rest;
      line >> prefix >> count;
      if (prefix + "." != LOOM_STACKED_PREFIX ||
          !parseInteger(count, 1, kMaxManifestLayers, stackedLayers) ||
          line >> rest)
        return fail("bad stacked line '" + lineText + "'");
    } else if (key == "entry") {
      if (!argsComplete())
        return false;
      std::string entryName, symbol, count, rest;
      line >> entryName >> symbol >> count;
      if (entryName.empty() || entries.count(entryName) ||
          symbol != LOOM_ENTRY_PREFIX + entryName || line >> rest)
        return fail("bad entry line '" + lineText + "'");
      current = &entries[entryName];
      current->symbolName = symbol;
      if (!parseInteger(count, 1, 1 << 20, current->declaredArgs))
        return fail("bad entry line '" + lineText + "'");
      // A model read from its manifest alone (openManifest) has no code.
      current->fn =
          handle ? reinterpret_cast<EntryFn>(dlsym(handle, symbol.c_str()))
                 : nullptr;
      if (handle && !current->fn)
        return fail("entry point '" + symbol + "' is missing");
    } else if (key == "arg") {
      if (!current)
        return fail("argument before any entry");
      Arg arg;
      std::string shape;
      line >> arg.kind >> arg.name >> arg.dtype >> shape;
      if (arg.kind != LOOM_ARG_PARAM && arg.kind != LOOM_ARG_STATE &&
          arg.kind != LOOM_ARG_INPUT && arg.kind != LOOM_ARG_OUTPUT)
        return fail("argument of unknown kind '" + arg.kind + "': '" +
                    lineText + "'");
      // Every buffer the runtime binds holds floats, but the tokens.
      bool tokens =
          arg.kind == LOOM_ARG_INPUT &&
          (arg.name == LOOM_INPUT_TOKENS || arg.name == LOOM_INPUT_TARGETS);
      if (arg.dtype != (tokens ? "i32" : "f32"))
        return fail("argument " + arg.name + " of type '" + arg.dtype +
                    "', expected " + (tokens ? "i32" : "f32"));
      if (!parseShape(shape, arg.shape))
        return fail("bad shape '" + shape + "' of " + arg.name);
      ManifestFields f(line);
      int64_t rank = static_cast<int64_t>(arg.shape.size());
      bool divisible = arg.kind == LOOM_ARG_PARAM || arg.kind == LOOM_ARG_STATE;
      // Dimensions of the argument's shape (`shard`), and of the whole
      // tensor, of the same rank (`tp_dim`).
      if (f.has("shard") &&
          (!divisible || !f.integer("shard", arg.shard, 0, rank - 1)))
        return fail("bad shard dimension of " + arg.name + ": '" + lineText +
                    "'");
      if (f.has("tp_dim") && (arg.kind != LOOM_ARG_PARAM ||
                              !f.integer("tp_dim", arg.tpDim, 0, rank - 1)))
        return fail("bad tp_dim of " + arg.name + ": '" + lineText + "'");
      if (arg.tpDim >= 0 || f.has("tp_blocks")) {
        if (arg.tpDim < 0 ||
            !f.integer("tp_blocks", arg.tpBlocks, 1, kMaxManifestSize) ||
            arg.shape[arg.tpDim] % arg.tpBlocks)
          return fail("bad tp_blocks of " + arg.name + ": '" + lineText + "'");
      }
      std::string layers;
      if (f.has("layers") &&
          (!f.text("layers", layers) || !parseLayerRuns(layers, arg)))
        return fail("bad layers of " + arg.name + ": '" + lineText + "'");
      if (!f.allRead())
        return badLine("arg", f);
      current->args.push_back(arg);
    } else if (key == "end") {
      ended = true;
    } else {
      return fail("unknown line '" + lineText + "'");
    }
  }
  if (!ended)
    return fail("no 'end' line: the manifest is cut short");
  if (!argsComplete())
    return false;
  for (const char *line : {"checksum", "model", "training", "stacked"})
    if (!seen.count(line))
      return fail(std::string("no '") + line + "' line");
  if (!checkModelShapes())
    return false;
  if (info.pp > 1)
    return checkPipelineEntries();
  for (const char *needed : {"train_step", "forward", "forward_grad"})
    if (!entries.count(needed))
      return fail(std::string("no '") + needed + "' entry point");
  // The step takes one replica's share of the batch, forward and
  // forward_grad one micro-batch of it.
  auto tokenRows = [&](const char *entryName) -> int64_t {
    for (const Arg &arg : entries[entryName].args)
      if (arg.kind == LOOM_ARG_INPUT && arg.name == LOOM_INPUT_TOKENS &&
          arg.shape.size() == 2)
        return arg.shape[0];
    return 0;
  };
  int64_t stepRows = tokenRows("train_step"), microRows = tokenRows("forward");
  if (info.batch % info.dp || stepRows != info.batch / info.dp ||
      microRows <= 0 || stepRows % microRows ||
      tokenRows("forward_grad") != microRows)
    return fail("the entry points' token shapes do not match the training "
                "batch of " +
                std::to_string(info.batch) +
                " over dp = " + std::to_string(info.dp) + " replicas");
  info.micro_batches = stepRows / microRows;
  forwardChunks = info.batch / microRows;
  if (planMicroBatches && planMicroBatches != info.micro_batches)
    return fail("the plan's " + std::to_string(planMicroBatches) +
                " micro-batches do not match the entry points' shapes");
  if (stackedLayers != info.layers)
    return fail("parameters are stacked over " + std::to_string(stackedLayers) +
                " layers, the model has " + std::to_string(info.layers));
  info.name = name.c_str();
  info.optimizer = optimizer.c_str();
  return true;
}

bool loom_model::checkModelShapes() {
  auto fail = [&](const std::string &why) { return badManifest(why); };
  auto format = [](const std::vector<int64_t> &shape) {
    std::string text;
    for (int64_t d : shape)
      text += (text.empty() ? "" : "x") + std::to_string(d);
    return text.empty() ? std::string("a scalar") : text;
  };
  if (info.sequence > info.positions)
    return fail("the training line's sequence of " +
                std::to_string(info.sequence) +
                " exceeds the model line's positions (" +
                std::to_string(info.positions) + ")");
  ModelShape model{info.layers,       info.width,     info.hidden,
                   info.padded_vocab, info.positions, info.tied != 0};
  for (const auto &[entryName, entry] : entries) {
    std::map<std::string, int64_t> paramSizes;
    for (const Arg &arg : entry.args)
      if (arg.kind == LOOM_ARG_PARAM)
        paramSizes[arg.name] = arg.size();
    for (const Arg &arg : entry.args) {
      std::string where = arg.kind + " " + arg.name + " of '" + entryName + "'";
      bool tokens =
          arg.name == LOOM_INPUT_TOKENS || arg.name == LOOM_INPUT_TARGETS;
      static const std::string gradPrefix = LOOM_OUTPUT_GRAD_PREFIX;
      if (arg.kind == LOOM_ARG_INPUT && tokens) {
        if (arg.shape.size() != 2 || arg.shape[1] != info.sequence)
          return fail(where + " is " + format(arg.shape) +
                      ", not sequences of the training line's " +
                      std::to_string(info.sequence) + " tokens");
      } else if (arg.kind == LOOM_ARG_OUTPUT &&
                 arg.name.rfind(gradPrefix, 0) == 0) {
        auto param = paramSizes.find(arg.name.substr(gradPrefix.size()));
        if (param == paramSizes.end() || param->second != arg.size())
          return fail(where + " is not the size of a parameter of the entry");
      } else if (arg.kind == LOOM_ARG_INPUT || arg.kind == LOOM_ARG_OUTPUT) {
        // The scalars: lr, step, the loss scale, the loss and the norm.
        if (!arg.shape.empty())
          return fail(where + " is " + format(arg.shape) +
                      ", expected a scalar");
      } else if (arg.kind == LOOM_ARG_PARAM) {
        // The whole tensor: the argument's shape with the plan's parts
        // multiplied back, and a pipeline stage's layers the model's.
        std::vector<int64_t> expected, whole = arg.shape;
        if (!model.expectedShape(arg.name, expected))
          return fail(where + ": the model line's GPT-2 has no such "
                              "parameter");
        if (arg.shard >= 0)
          whole[arg.shard] *= info.dp;
        if (arg.tpDim >= 0)
          whole[arg.tpDim] *= info.tp;
        if (!arg.layerRuns.empty())
          whole[0] = info.layers;
        if (whole != expected)
          return fail(where + " makes a whole tensor of " + format(whole) +
                      ", but the model line '" + name +
                      " layers=" + std::to_string(info.layers) +
                      " width=" + std::to_string(info.width) +
                      " hidden=" + std::to_string(info.hidden) +
                      " padded_vocab=" + std::to_string(info.padded_vocab) +
                      " positions=" + std::to_string(info.positions) +
                      "...' makes it " + format(expected));
      }
    }
  }
  return true;
}

bool loom_model::layoutParams() {
  // The step's parameters in the order it lists them: llm.c's order, so that
  // a checkpoint is one read or write.
  // Each tensor after the previous one of its kind, whole and local; one
  // this rank does not hold (another pipeline stage's) takes no room here.
  auto fail = [&](const std::string &why) { return badManifest(why); };
  auto place = [&](const Arg &arg, std::vector<Param> &tensors,
                   std::map<std::string, size_t> &index, bool held,
                   int64_t firstHolder) {
    Param p;
    p.name = arg.name;
    p.shard = arg.shard;
    p.held = held;
    p.firstHolder = firstHolder;
    p.layerRuns = arg.layerRuns;
    p.localSize = held ? arg.size() : 0;
    p.dpShape = arg.shape;
    if (p.shard >= 0)
      p.dpShape[p.shard] *= info.dp;
    p.part = p.dpShape;
    p.tpDim = arg.tpDim;
    p.tpBlocks = arg.tpBlocks;
    if (arg.kind == LOOM_ARG_STATE) {
      // Optimizer state is divided as its parameter ("m.wte" is wte's),
      // flattened or not.
      size_t dot = arg.name.find('.');
      auto param = dot == std::string::npos
                       ? paramIndex.end()
                       : paramIndex.find(arg.name.substr(dot + 1));
      if (param == paramIndex.end())
        return fail("optimizer state " + arg.name + " of no parameter");
      const Param &of = params[param->second];
      if (product(of.part, 0, of.part.size()) !=
          product(p.dpShape, 0, p.dpShape.size()))
        return fail("optimizer state " + arg.name + " is not the size of " +
                    of.name);
      p.part = of.part;
      p.tpDim = of.tpDim;
      p.tpBlocks = of.tpBlocks;
      p.layerRuns = of.layerRuns;
    }
    p.shape = p.part;
    if (p.tpDim >= 0)
      p.shape[p.tpDim] *= info.tp;
    // A pipeline stage's layers of the whole's.
    if (!p.layerRuns.empty())
      p.shape[0] = info.layers;
    p.size = product(p.shape, 0, p.shape.size());
    if (!tensors.empty()) {
      p.offset = tensors.back().offset + tensors.back().size;
      p.localOffset = tensors.back().localOffset + tensors.back().localSize;
    }
    index[p.name] = tensors.size();
    tensors.push_back(p);
    return true;
  };
  // A pipeline's whole model is its stages' tensors in stage order, each
  // once (the tied token table is the first and the last stage's); this
  // rank's own step says how it holds its own.
  std::map<std::string, const Arg *> own;
  for (const Arg &arg : entries[stepEntry].args)
    own[arg.kind + " " + arg.name] = &arg;
  std::vector<std::string> steps = {stepEntry};
  if (info.pp > 1) {
    steps.clear();
    for (int64_t r = 0; r < info.pp; ++r)
      steps.push_back(stageEntry(r));
  }
  for (size_t r = 0; r < steps.size(); ++r) {
    for (const Arg &arg : entries[steps[r]].args) {
      bool param = arg.kind == LOOM_ARG_PARAM;
      if (!param && arg.kind != LOOM_ARG_STATE)
        continue;
      std::map<std::string, size_t> &index = param ? paramIndex : stateIndex;
      if (index.count(arg.name))
        continue;
      auto mine = own.find(arg.kind + " " + arg.name);
      bool held = mine != own.end();
      if (!place(held ? *mine->second : arg, param ? params : states, index,
                 held, static_cast<int64_t>(r)))
        return false;
    }
  }
  auto total = [](const std::vector<Param> &tensors, bool local) -> int64_t {
    if (tensors.empty())
      return 0;
    const Param &last = tensors.back();
    return local ? last.localOffset + last.localSize : last.offset + last.size;
  };
  int64_t localOffset = total(params, true), stateSize = total(states, true);
  info.num_params = total(params, false);
  info.model_flops =
      static_cast<double>(info.batch) * info.sequence *
      (loom_param_flops_per_token(static_cast<double>(info.num_params), 3) +
       loom_attention_flops_per_token(info.layers, info.width, info.sequence,
                                      3));
  info.local_params = localOffset;
  info.state_floats = stateSize;
  info.num_state = total(states, false);
  llmcLayout = info.tied && info.hidden == 4 * info.width &&
               params.size() == kNumLlmcTensors;
  for (size_t i = 0; llmcLayout && i < kNumLlmcTensors; ++i)
    llmcLayout = params[i].name == kLlmcTensors[i];
  auto stepIt = entries.find(stepEntry);
  info.arena_bytes =
      stepIt == entries.end() ? 0 : std::max<int64_t>(stepIt->second.arena, 0);
  if (!checkDeviceMemory())
    return false;
  // A training step keeps its gradients in its arena; only the entry that
  // returns them (forward_grad) needs the runtime's own, allocated when it
  // is first called (allocateGradients).
  try {
    values.assign(localOffset, 0.0f);
    state.assign(stateSize, 0.0f);
    scalars.assign(1, Scalars{});
  } catch (const std::bad_alloc &) {
    return setError("%s: cannot allocate the parameters, gradients and "
                    "optimizer state: %s",
                    path.c_str(), std::string(loom_last_error()).c_str());
  }
  return true;
}

void loom_model::scatter(const std::vector<Param> &tensors, const float *whole,
                         float *localBase) const {
  const loom_dist_info *dist = loom_dist_get_info();
  int64_t dpRank = dist ? dist->dp_rank : 0, tpRank = dist ? dist->tp_rank : 0;
  for (const Param &p : tensors)
    if (p.held)
      p.forEachWholeRun(info.dp, dpRank, info.tp, tpRank,
                        [&](int64_t local, int64_t at, int64_t count) {
                          std::copy_n(whole + p.offset + at, count,
                                      localBase + p.localOffset + local);
                        });
}

bool loom_model::gather(const std::vector<Param> &tensors,
                        const float *localBase,
                        std::vector<float> &whole) const {
  whole.assign(
      tensors.empty() ? 0 : tensors.back().offset + tensors.back().size, 0.0f);
  const loom_dist_info *dist = loom_dist_get_info();
  int64_t dpRank = dist ? dist->dp_rank : 0, tpRank = dist ? dist->tp_rank : 0,
          ppRank = dist ? dist->pp_rank : 0;
  // Each element comes from one rank: of those holding the same part, the
  // first replica, the first of the tensor-parallel group and the first
  // pipeline stage. The sum over the ranks of what each wrote into zeros is
  // then the whole, exactly.
  for (const Param &p : tensors) {
    if (!p.held || (p.shard < 0 && dpRank > 0) || (p.tpDim < 0 && tpRank > 0) ||
        (p.layerRuns.empty() && p.firstHolder != ppRank))
      continue;
    p.forEachWholeRun(info.dp, dpRank, info.tp, tpRank,
                      [&](int64_t local, int64_t at, int64_t count) {
                        std::copy_n(localBase + p.localOffset + local, count,
                                    whole.data() + p.offset + at);
                      });
  }
  if (info.dp * info.tp * info.pp == 1)
    return true;
  return !loom_rt_all_reduce(loom_dist_group(LOOM_GROUP_WORLD), LOOM_DTYPE_F32,
                             whole.data(), whole.data(),
                             static_cast<int64_t>(whole.size()));
}

bool loom_model::callMicroBatches(const char *entryName, const int32_t *tokens,
                                  const int32_t *targets, float *lossOut,
                                  float *gradsOut) {
  // Mean over equal micro-batches is the mean over the batch: the loss and
  // gradients are those of the whole batch, as in the training step.
  int64_t count = forwardChunks;
  int64_t stride = info.batch / count * info.sequence;
  double lossSum = 0;
  if (gradsOut)
    std::fill(gradsOut, gradsOut + grads.size(), 0.0f);
  for (int64_t m = 0; m < count; ++m) {
    if (!call(entryName, tokens + m * stride, targets + m * stride))
      return false;
    lossSum += loss;
    if (gradsOut)
      for (size_t i = 0; i < grads.size(); ++i)
        gradsOut[i] += grads[i];
  }
  *lossOut = static_cast<float>(lossSum / count);
  if (gradsOut && count > 1)
    for (size_t i = 0; i < grads.size(); ++i)
      gradsOut[i] /= static_cast<float>(count);
  return true;
}

bool loom_model::replica(int64_t &index) const {
  index = 0;
  if (info.dp * info.tp * info.pp == 1)
    return true;
  const loom_dist_info *dist = loom_dist_get_info();
  if (!dist || dist->dp != info.dp || dist->tp != info.tp ||
      dist->pp != info.pp)
    return setError(
        "%s: compiled for dp = %lld and tp = %lld ranks; call "
        "loom_dist_init(%lld, %lld, %lld) first",
        path.c_str(), static_cast<long long>(info.dp),
        static_cast<long long>(info.tp), static_cast<long long>(info.pp),
        static_cast<long long>(info.dp), static_cast<long long>(info.tp));
  index = dist->dp_rank;
  return true;
}

void *loom_model::bufferFor(const Arg &arg) {
  if (arg.kind == LOOM_ARG_PARAM)
    return paramFor(arg.name, values.data());
  if (arg.kind == LOOM_ARG_STATE) {
    size_t dot = arg.name.find('.');
    if (dot == std::string::npos)
      return nullptr;
    std::string which = arg.name.substr(0, dot),
                param = arg.name.substr(dot + 1);
    auto it = stateIndex.find(arg.name);
    if (!paramIndex.count(param) || it == stateIndex.end() ||
        !states[it->second].held ||
        (which != LOOM_STATE_ADAM_M && which != LOOM_STATE_ADAM_V &&
         which != LOOM_STATE_MOMENTUM))
      return nullptr;
    return state.data() + states[it->second].localOffset;
  }
  if (arg.kind == LOOM_ARG_INPUT) {
    if (arg.name == LOOM_INPUT_LR)
      return &scalars[0].lr;
    if (arg.name == LOOM_INPUT_STEP)
      return &scalars[0].step;
    if (arg.name == LOOM_INPUT_LOSS_SCALE) {
      lossScaler.enabled = true;
      return &scalars[0].lossScale;
    }
    return nullptr;
  }
  if (arg.kind == LOOM_ARG_OUTPUT) {
    static const std::string gradPrefix = LOOM_OUTPUT_GRAD_PREFIX;
    if (arg.name == LOOM_OUTPUT_LOSS)
      return &scalars[0].loss;
    if (arg.name == LOOM_OUTPUT_GRAD_NORM)
      return &scalars[0].gradNorm;
    if (arg.name.rfind(gradPrefix, 0) == 0)
      return paramFor(arg.name.substr(gradPrefix.size()), grads.data());
  }
  return nullptr;
}

bool loom_model::allocateGradients() {
  if (!grads.empty() || info.local_params == 0)
    return true;
  try {
    grads.assign(info.local_params, 0.0f);
  } catch (const std::bad_alloc &) {
    return setError("%s: cannot allocate the gradients: %s", path.c_str(),
                    std::string(loom_last_error()).c_str());
  }
  return bindEntries();
}

bool loom_model::bindEntries() {
  static const std::string gradPrefix = LOOM_OUTPUT_GRAD_PREFIX;
  for (auto &[entryName, entry] : entries) {
    entry.buffers.clear();
    entry.unboundGradients = false;
    // A pipeline rank runs its own step and forward pass; the others' take
    // what it lacks.
    if (info.pp > 1 && entryName != stepEntry && entryName != evalEntry)
      continue;
    for (const Arg &arg : entry.args) {
      int64_t slot = entry.buffers.size();
      void *p = nullptr;
      if (arg.kind == LOOM_ARG_INPUT && arg.name == LOOM_INPUT_TOKENS) {
        entry.tokensSlot = slot;
        if (cudaActive())
          entry.tokens.assign(arg.size(), 0);
      } else if (arg.kind == LOOM_ARG_INPUT && arg.name == LOOM_INPUT_TARGETS) {
        entry.targetsSlot = slot;
        if (cudaActive())
          entry.targets.assign(arg.size(), 0);
      } else if (arg.kind == LOOM_ARG_OUTPUT &&
                 arg.name.rfind(gradPrefix, 0) == 0 && grads.empty()) {
        entry.unboundGradients = true;
      } else if (!(p = bufferFor(arg)))
        return setError("%s: entry '%s' has an argument '%s %s' this runtime "
                        "cannot provide",
                        path.c_str(), entryName.c_str(), arg.kind.c_str(),
                        arg.name.c_str());
      entry.buffers.push_back(p);
    }
  }
  return true;
}

bool loom_model::call(const char *entryName, const int32_t *tokens,
                      const int32_t *targets) {
  Entry &entry = entries[entryName];
  if (entry.unboundGradients)
    return setError("%s: entry '%s' returns gradients, and none are "
                    "allocated",
                    path.c_str(), entryName);
  // The GPU reads the batch from memory it addresses; the CPU from the
  // caller's arrays.
  auto bind = [&](int64_t slot, StepVector<int32_t> &staging,
                  const int32_t *data) {
    if (slot < 0)
      return;
    if (!staging.empty()) {
      std::copy(data, data + staging.size(), staging.begin());
      data = staging.data();
    }
    entry.buffers[slot] = const_cast<int32_t *>(data);
  };
  bind(entry.tokensSlot, entry.tokens, tokens);
  bind(entry.targetsSlot, entry.targets, targets);
  scalars[0].lr = lr;
  scalars[0].step = step;
  scalars[0].lossScale = lossScaler.scale;
  heapBeginCall();
  entry.fn(entry.buffers.data());
  heapEndCall();
  if (cudaActive() && !cudaSynchronize())
    return false;
  loss = scalars[0].loss;
  gradNorm = scalars[0].gradNorm;
  return true;
}

bool loom_model::checkDeviceMemory() {
  // The compiled step's own count (the manifest's memory and arena lines):
  // the runtime's parameters and optimizer state and the step's arena,
  // which holds every buffer the step allocates, its gradients included.
  // Without an arena, the gradients and activations bound the step's
  // buffers from below.
  bool arena = info.arena_bytes > 0;
  int64_t stepBytes =
      arena ? info.arena_bytes : info.grad_bytes + info.activation_bytes;
  int64_t needed = info.param_bytes + info.state_bytes + stepBytes;
  size_t available = 0, total = 0;
  if (cudaActive()) {
    if (!cudaMemoryInfo(available, total))
      return false;
  } else {
    // The host: a step needing more than the machine's memory would only
    // fail midway (or swap for hours); no count of what is free is exact
    // enough to refuse less.
    long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || pageSize <= 0)
      return true;
    available = total =
        static_cast<size_t>(pages) * static_cast<size_t>(pageSize);
  }
  if (needed <= 0 || static_cast<size_t>(needed) <= available)
    return true;
  std::string has =
      cudaActive() ? "the GPU has " + std::to_string(available >> 20) +
                         " MiB free of " + std::to_string(total >> 20)
                   : "this machine has " + std::to_string(total >> 20) + " MiB";
  return setError(
      "%s: the step needs %lld MiB of %smemory (parameters %lld, optimizer "
      "state %lld, %s %lld MiB, as compiled) and %s: "
      "compile it for a smaller batch or more micro-batches",
      path.c_str(), static_cast<long long>(needed >> 20),
      cudaActive() ? "GPU " : "",
      static_cast<long long>(info.param_bytes >> 20),
      static_cast<long long>(info.state_bytes >> 20),
      arena ? "the step's arena with its gradients"
            : "gradients and activations",
      static_cast<long long>(stepBytes >> 20), has.c_str());
}

/// The loader maps a shared object's segments without checking that the file
/// holds them, and a truncated file then faults on first touch. Check the
/// ELF header and every segment against the file's size before dlopen.
static bool checkObjectFile(const char *path) {
  if (!checkRegularFile(path))
    return false;
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return setError("%s: cannot open: %s", path, std::strerror(errno));
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                          std::istreambuf_iterator<char>());
  if (bytes.size() < 4 || std::memcmp(bytes.data(),
                                      "\x7f"
                                      "ELF",
                                      4) != 0)
    return setError("%s: not a Loom artifact (wrong magic: expected a shared "
                    "object made by loomc)",
                    path);
  auto truncated = [&] {
    return setError("%s: cannot load the artifact (truncated or corrupt?): "
                    "its ELF headers describe more than the file's %zu bytes",
                    path, bytes.size());
  };
  if (bytes.size() < 64 || bytes[4] != 2 /*ELFCLASS64*/)
    return truncated();
  auto read = [&](size_t offset, size_t size) -> uint64_t {
    uint64_t v = 0;
    std::memcpy(&v, bytes.data() + offset, size);
    return v;
  };
  uint64_t phoff = read(32, 8), shoff = read(40, 8);
  uint64_t phentsize = read(54, 2), phnum = read(56, 2);
  uint64_t shentsize = read(58, 2), shnum = read(60, 2);
  if (phoff + phnum * phentsize > bytes.size() ||
      shoff + shnum * shentsize > bytes.size())
    return truncated();
  for (uint64_t i = 0; i < phnum; ++i) {
    size_t h = phoff + i * phentsize;
    if (h + 56 > bytes.size() ||
        read(h + 8, 8) + read(h + 32, 8) > bytes.size()) // p_offset + p_filesz
      return truncated();
  }
  return checkArtifactChecksum(path, bytes);
}

loom_model *loom::openManifest(const char *text, bool layout) {
  auto model = std::make_unique<loom_model>();
  model->path = "manifest";
  if (!model->parseManifest(text))
    return nullptr;
  // A pipeline's layout depends on the rank, which needs the job.
  if (layout && model->info.pp > 1) {
    setError("manifest: a pipeline artifact's tensors are laid out by rank, "
             "on open");
    return nullptr;
  }
  if (layout && !model->layoutParams())
    return nullptr;
  return model.release();
}

extern "C" {

loom_model *loom_model_open(const char *path) {
  auto model = std::make_unique<loom_model>();
  model->path = path;
  if (!checkObjectFile(path))
    return nullptr;
  // A path without a slash would make dlopen search the library path.
  std::string openPath =
      std::strchr(path, '/') ? path : std::string("./") + path;
  model->handle = dlopen(openPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!model->handle) {
    setError("%s: cannot load the artifact (truncated or corrupt?): %s", path,
             dlerror());
    return nullptr;
  }
  auto *manifest =
      static_cast<const char *>(dlsym(model->handle, LOOM_MANIFEST_SYMBOL));
  if (!manifest) {
    setError("%s: not a Loom artifact (no manifest)", path);
    return nullptr;
  }
  if (!model->parseManifest(manifest) || !model->joinPipeline() ||
      !model->layoutParams() || !model->bindEntries())
    return nullptr;
  return model.release();
}

void loom_model_close(loom_model *model) {
  delete model;
  loom_release_cached_memory();
}

double loom_peak_memory_mib(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0; // kilobytes on Linux
}

const loom_model_info *loom_model_get_info(const loom_model *model) {
  return &model->info;
}

float *loom_model_params(loom_model *model) { return model->values.data(); }

void loom_model_init(loom_model *model, uint64_t seed) {
  // splitmix64 feeding Box-Muller in double: the same seed gives the same
  // weights on every machine.
  uint64_t s = seed;
  auto next = [&s]() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  auto uniform = [&]() { return ((next() >> 11) + 0.5) * 0x1.0p-53; };
  double residualStd = 0.02 / std::sqrt(2.0 * model->info.layers);
  // Every rank draws the whole model and keeps its part, so that the
  // weights do not depend on the plan.
  std::vector<float> whole(model->info.num_params);
  for (const Param &p : model->params) {
    float *data = whole.data() + p.offset;
    const std::string &n = p.name;
    auto endsWith = [&](const char *suffix) {
      size_t len = std::strlen(suffix);
      return n.size() >= len && n.compare(n.size() - len, len, suffix) == 0;
    };
    bool norm = endsWith("ln_1.weight") || endsWith("ln_2.weight") ||
                n == "ln_f.weight";
    if (norm || p.shape.size() < 2) {
      std::fill(data, data + p.size, norm ? 1.0f : 0.0f);
      continue;
    }
    double std =
        (endsWith("attn.c_proj.weight") || endsWith("mlp.c_proj.weight"))
            ? residualStd
            : 0.02;
    // The vocabulary's padding rows (loomc --pad-vocab) are zeros and take
    // no draws: the real rows, and every tensor after them, get the values
    // they have without the padding. No token names a padding row, and the
    // loss leaves out their logits.
    int64_t drawn = p.size;
    if ((n == "wte" || n == "lm_head.weight") &&
        model->info.padded_vocab > model->info.vocab) {
      drawn = p.size / model->info.padded_vocab * model->info.vocab;
      std::fill(data + drawn, data + p.size, 0.0f);
    }
    for (int64_t i = 0; i < drawn; i += 2) {
      double r = std::sqrt(-2.0 * std::log(uniform()));
      double t = 2.0 * M_PI * uniform();
      data[i] = static_cast<float>(std * r * std::cos(t));
      if (i + 1 < drawn)
        data[i + 1] = static_cast<float>(std * r * std::sin(t));
    }
  }
  model->scatter(whole.data());
  model->resetOptimizer();
}

int loom_model_train_step(loom_model *model, const int32_t *tokens,
                          const int32_t *targets, float lr, float *loss,
                          float *grad_norm) {
  const loom_model_info &info = model->info;
  int64_t replica;
  if (!model->replica(replica))
    return 1;
  // Replica d takes sequences [d * batch / dp, (d + 1) * batch / dp).
  int64_t share = info.batch / info.dp * info.sequence;
  model->lr = lr;
  model->step += 1;
  auto start = TraceClock::now();
  if (!model->call(model->stepEntry.c_str(), tokens + replica * share,
                   targets + replica * share))
    return 1;
  if (traceActive())
    traceSpan("step " + std::to_string(static_cast<int64_t>(model->step)),
              "step", start);
  // An overflowed step left the parameters and the optimizer as they were.
  if (model->lossScaler.enabled && model->lossScaler.update(model->gradNorm))
    model->step -= 1;
  *loss = model->loss;
  if (grad_norm)
    *grad_norm = model->gradNorm;
  return 0;
}

int loom_model_get_loss_scale(const loom_model *model, loom_loss_scale *out) {
  const LossScaler &scaler = model->lossScaler;
  if (!scaler.enabled)
    return 0;
  out->scale = scaler.scale;
  out->last_skipped = scaler.lastSkipped;
  out->skipped_steps = scaler.skippedSteps;
  return 1;
}

int loom_model_set_loss_scaling(loom_model *model, float initial_scale,
                                int64_t growth_interval) {
  if (!(std::isfinite(initial_scale) && initial_scale > 0))
    return !setError("the loss scale must be a positive finite number, got %g",
                     initial_scale);
  if (growth_interval < 1)
    return !setError("the loss scale's growth interval must be at least 1 "
                     "step, got %lld",
                     static_cast<long long>(growth_interval));
  LossScaler &scaler = model->lossScaler;
  scaler.initial = scaler.scale = initial_scale;
  scaler.growthInterval = growth_interval;
  scaler.cleanSteps = 0;
  return 0;
}

int loom_model_eval(loom_model *model, const int32_t *tokens,
                    const int32_t *targets, float *loss) {
  const loom_model_info &info = model->info;
  if (!info.can_eval)
    return !setError("%s: evaluation runs the forward pass alone, which "
                     "this pipeline artifact (pp = %lld) does not have",
                     model->path.c_str(), static_cast<long long>(info.pp));
  int64_t replica;
  if (!model->replica(replica))
    return 1;
  if (info.pp > 1) {
    // Each rank's forward passes over the replica's share, in the plan's
    // micro-batches; the mean comes back on every rank of the pipeline.
    int64_t share = info.batch / info.dp * info.sequence;
    if (!model->call(model->evalEntry.c_str(), tokens + replica * share,
                     targets + replica * share))
      return 1;
    float mean = model->loss;
    if (info.dp > 1 && loom_rt_all_reduce(loom_dist_group(LOOM_GROUP_DP),
                                          LOOM_DTYPE_F32, &mean, &mean, 1))
      return 1;
    *loss = mean / static_cast<float>(info.dp);
    return 0;
  }
  if (info.dp == 1) {
    return model->callMicroBatches("forward", tokens, targets, loss, nullptr)
               ? 0
               : 1;
  }
  // Each replica evaluates its share of the micro-batches; the mean is
  // taken over all of them.
  int64_t perReplica = model->forwardChunks / info.dp;
  int64_t stride = info.batch / model->forwardChunks * info.sequence;
  float sum = 0;
  for (int64_t m = replica * perReplica; m < (replica + 1) * perReplica; ++m) {
    if (!model->call("forward", tokens + m * stride, targets + m * stride))
      return 1;
    sum += model->loss;
  }
  if (loom_rt_all_reduce(loom_dist_group(LOOM_GROUP_DP), LOOM_DTYPE_F32, &sum,
                         &sum, 1))
    return 1;
  *loss = sum / static_cast<float>(model->forwardChunks);
  return 0;
}

int loom_model_loss_and_grad(loom_model *model, const int32_t *tokens,
                             const int32_t *targets, float *loss,
                             float *grads) {
  const loom_model_info &info = model->info;
  if (info.dp * info.tp * info.pp > 1)
    return !setError("%s: the loss and gradients of a whole batch come from "
                     "single-rank artifacts; this one is compiled for dp = "
                     "%lld, tp = %lld, pp = %lld",
                     model->path.c_str(), static_cast<long long>(info.dp),
                     static_cast<long long>(info.tp),
                     static_cast<long long>(info.pp));
  return model->allocateGradients() &&
                 model->callMicroBatches("forward_grad", tokens, targets, loss,
                                         grads)
             ? 0
             : 1;
}

//===----------------------------------------------------------------------===//
// llm.c checkpoints
//===----------------------------------------------------------------------===//

static constexpr int32_t kCheckpointMagic = 20240326;

namespace {
/// Whether this process is rank 0 of its job (or in no job).
bool isFirstRank() {
  const loom_dist_info *dist = loom_dist_get_info();
  return !dist || dist->rank == 0;
}

/// The job's communicator when it has several ranks, else null.
loom_comm *jobComm() {
  loom_comm *world = loom_dist_group(LOOM_GROUP_WORLD);
  return world && loom_comm_size(world) > 1 ? world : nullptr;
}

/// Rank 0's outcome of work only it did, on every rank: 0 on success. The
/// others report that rank 0 failed; rank 0 has the reason.
int shareOutcome(int failed, const char *what, const char *path) {
  loom_comm *world = jobComm();
  if (!world)
    return failed;
  float flag = failed ? 1.0f : 0.0f;
  if (loom_rt_broadcast(world, LOOM_DTYPE_F32, &flag, 1, 0))
    return 1;
  if (flag != 0 && !failed)
    return !setError("%s: rank 0 could not %s it (rank 0 says why)", path,
                     what);
  return flag != 0;
}

/// Words of an optimizer state file's header holding fp16's loss scaling:
/// 1 when present, the scale's float32 bits, clean steps since it last
/// changed, steps skipped.
constexpr int kLossScaleWord = 16;

/// What llm.c checkpoints and Loom's optimizer state files share: a header
/// of 256 int32, the magic, the version and, from `dims` on, the model's
/// dimensions as llm.c writes them; then the float32 values.
struct FileKind {
  const char *what; ///< "an llm.c checkpoint"
  int32_t magic, version;
  const char *versionNote; ///< What the version means, for errors.
  int dims;
  const char *values; ///< What the floats are, for errors.
  const char *file;   ///< "the checkpoint"
};
constexpr FileKind kCheckpoint = {
    "an llm.c checkpoint", kCheckpointMagic, 3, " (fp32)", 2,
    "parameters",          "the checkpoint"};
constexpr FileKind kOptimizerState = {
    "a Loom optimizer state file", 20241124, 1, "", 4, "optimizer state values",
    "the optimizer state"};

void fillHeader(const loom_model_info &info, const FileKind &kind,
                int32_t header[256]) {
  std::fill(header, header + 256, 0);
  header[0] = kind.magic;
  header[1] = kind.version;
  int64_t dims[] = {info.positions, info.vocab, info.layers,
                    info.heads,     info.width, info.padded_vocab};
  for (int i = 0; i < 6; ++i)
    header[kind.dims + i] = static_cast<int32_t>(dims[i]);
}

/// Reads `path`, a file of `kind` for `info`'s model with `count` values,
/// into `header` and `whole`; checks every field and the size.
int readWholeFile(const loom_model_info &info, const char *path,
                  const FileKind &kind, int64_t count, int32_t header[256],
                  std::vector<float> &whole,
                  const std::vector<Param> &tensors) {
  if (!checkRegularFile(path))
    return 1;
  FILE *file = std::fopen(path, "rb");
  if (!file)
    return !setError("%s: cannot open: %s", path, std::strerror(errno));
  std::unique_ptr<FILE, int (*)(FILE *)> closer(file, std::fclose);
  if (std::fread(header, sizeof(int32_t), 256, file) != 256)
    return !setError("%s: truncated: no complete 256-int header", path);
  if (header[0] != kind.magic)
    return !setError("%s: wrong magic %d: not %s (expected %d)", path,
                     header[0], kind.what, kind.magic);
  if (header[1] != kind.version)
    return !setError("%s: version %d; only version %d%s is read", path,
                     header[1], kind.version, kind.versionNote);
  int32_t want[256];
  fillHeader(info, kind, want);
  static const char *const fields[] = {"max_seq_len", "vocab_size",
                                       "num_layers",  "num_heads",
                                       "channels",    "padded_vocab_size"};
  for (int i = 0; i < 6; ++i)
    if (header[kind.dims + i] != want[kind.dims + i])
      return !setError("%s: %s is %d but the artifact's model has %d; %s is "
                       "for another model",
                       path, fields[i], header[kind.dims + i],
                       want[kind.dims + i], kind.file);
  whole.resize(count);
  if (std::fread(whole.data(), sizeof(float), whole.size(), file) !=
      whole.size())
    return !setError("%s: truncated: expected %lld %s after the header", path,
                     static_cast<long long>(whole.size()), kind.values);
  if (std::fgetc(file) != EOF)
    return !setError("%s: longer than the %lld %s the header describes", path,
                     static_cast<long long>(whole.size()), kind.values);
  // A NaN or an infinity would train as `loss nan` from the first step.
  for (const Param &t : tensors)
    for (int64_t i = 0; i < t.size; ++i)
      if (!std::isfinite(whole[t.offset + i]))
        return !setError("%s: %s holds %s at element %lld, not a finite "
                         "number; %s is damaged",
                         path, t.name.c_str(),
                         std::isnan(whole[t.offset + i]) ? "NaN"
                                                         : "an infinity",
                         static_cast<long long>(i), kind.file);
  return 0;
}

/// Writes `path` with `write(file)`, false on a failed write. A regular
/// file (or a missing one) is written as `<path>.partial` and renamed over
/// it once complete, so that a failure never leaves a partial file and
/// keeps the previous one; anything else that exists (/dev/null, a pipe) is
/// written directly: renaming would replace it.
int writeFile(const char *path, const std::function<bool(FILE *)> &write) {
  struct stat status;
  bool direct = ::stat(path, &status) == 0 && !S_ISREG(status.st_mode);
  std::string target =
      direct ? std::string(path) : std::string(path) + ".partial";
  FILE *file = std::fopen(target.c_str(), "wb");
  if (!file)
    return !setError("%s: cannot write%s: %s", path,
                     direct ? "" : (" (as " + target + ")").c_str(),
                     std::strerror(errno));
  bool ok = write(file);
  ok &= std::fclose(file) == 0;
  if (ok && (direct || std::rename(target.c_str(), path) == 0))
    return 0;
  int error = errno;
  if (!direct)
    std::remove(target.c_str());
  return !setError("%s: cannot write (as %s): %s", path, target.c_str(),
                   std::strerror(error));
}

int writeWholeFile(const char *path, const int32_t header[256],
                   const std::vector<float> &whole) {
  return writeFile(path, [&](FILE *file) {
    return std::fwrite(header, sizeof(int32_t), 256, file) == 256 &&
           std::fwrite(whole.data(), sizeof(float), whole.size(), file) ==
               whole.size();
  });
}

/// Whether `model` has llm.c's layout, which checkpoints and GPT-2's
/// tensors (`format`) need; sets the error naming `path` when not.
bool checkLlmcLayout(const loom_model *model, const char *path,
                     const char *format = "llm.c checkpoint") {
  if (model->llmcLayout)
    return true;
  return setError("%s: this model (%s) has no %s layout, which needs a tied "
                  "head and hidden = 4 * width",
                  path, model->info.name, format);
}
} // namespace

namespace {
/// Rank 0 reads the file; every rank receives its header and values, and
/// returns rank 0's outcome.
int readOnFirstRank(const loom_model_info &info, const char *path,
                    const FileKind &kind, int64_t count, int32_t header[256],
                    std::vector<float> &whole,
                    const std::vector<Param> &tensors) {
  int failed = isFirstRank() ? readWholeFile(info, path, kind, count, header,
                                             whole, tensors)
                             : 0;
  if (shareOutcome(failed, "read", path))
    return 1;
  loom_comm *world = jobComm();
  if (!world)
    return 0;
  whole.resize(count);
  // The header's ints move as floats do: 4 bytes each, untouched.
  if (loom_rt_broadcast(world, LOOM_DTYPE_F32, header, 256, 0))
    return 1;
  for (int64_t done = 0; done < count;) {
    int64_t chunk = std::min<int64_t>(count - done, 1 << 30);
    if (loom_rt_broadcast(world, LOOM_DTYPE_F32, whole.data() + done, chunk, 0))
      return 1;
    done += chunk;
  }
  return 0;
}
} // namespace

int loom_model_load_checkpoint(loom_model *model, const char *path) {
  if (!checkLlmcLayout(model, path))
    return 1;
  // Rank 0 reads the file; every rank gets the whole model and keeps its
  // part. Nothing changes before the whole file has been read and checked.
  std::vector<float> whole;
  int32_t header[256];
  if (readOnFirstRank(model->info, path, kCheckpoint, model->info.num_params,
                      header, whole, model->params))
    return 1;
  // Copied, not swapped: the entry points are bound to this buffer, and
  // loom_model_params has handed it out.
  model->scatter(whole.data());
  model->resetOptimizer();
  return 0;
}

int loom_model_gather_params(const loom_model *model, float *whole) {
  std::vector<float> gathered;
  if (!model->gather(gathered))
    return 1;
  std::copy(gathered.begin(), gathered.end(), whole);
  return 0;
}

int loom_model_save_checkpoint(const loom_model *model, const char *path) {
  if (!checkLlmcLayout(model, path))
    return 1;
  // Every replica holds its part: they gather the whole model, rank 0
  // writes it, once.
  std::vector<float> whole;
  if (!model->gather(whole))
    return 1;
  int32_t header[256];
  fillHeader(model->info, kCheckpoint, header);
  int failed = isFirstRank() ? writeWholeFile(path, header, whole) : 0;
  return shareOutcome(failed, "write", path);
}

int loom_model_save_optimizer_state(const loom_model *model, const char *path) {
  std::vector<float> whole;
  if (!model->gather(model->states, model->state.data(), whole))
    return 1;
  int32_t header[256];
  fillHeader(model->info, kOptimizerState, header);
  header[2] = model->optimizer == "adamw" ? 1 : 2;
  header[3] = static_cast<int32_t>(model->step);
  // fp16's loss scaling resumes where it was, not from its initial scale.
  const LossScaler &scaler = model->lossScaler;
  if (scaler.enabled) {
    header[kLossScaleWord] = 1;
    std::memcpy(&header[kLossScaleWord + 1], &scaler.scale, sizeof(float));
    header[kLossScaleWord + 2] =
        static_cast<int32_t>(std::min<int64_t>(scaler.cleanSteps, INT32_MAX));
    header[kLossScaleWord + 3] =
        static_cast<int32_t>(std::min<int64_t>(scaler.skippedSteps, INT32_MAX));
  }
  int failed = isFirstRank() ? writeWholeFile(path, header, whole) : 0;
  return shareOutcome(failed, "write", path);
}

int loom_model_load_optimizer_state(loom_model *model, const char *path) {
  std::vector<float> whole;
  int32_t header[256];
  if (readOnFirstRank(model->info, path, kOptimizerState, model->info.num_state,
                      header, whole, model->states))
    return 1;
  int32_t optimizer = model->optimizer == "adamw" ? 1 : 2;
  if (header[2] != optimizer || header[3] < 0)
    return !setError("%s: the state of %s after %d steps, and the artifact "
                     "trains with %s",
                     path,
                     header[2] == 1   ? "adamw"
                     : header[2] == 2 ? "sgd"
                                      : "an unknown optimizer",
                     header[3], model->optimizer.c_str());
  float scale = 0;
  std::memcpy(&scale, &header[kLossScaleWord + 1], sizeof(float));
  bool scaled = header[kLossScaleWord] == 1;
  if ((header[kLossScaleWord] != 0 && !scaled) ||
      (scaled &&
       (!std::isfinite(scale) || scale <= 0 || header[kLossScaleWord + 2] < 0 ||
        header[kLossScaleWord + 3] < 0)))
    return !setError("%s: bad loss scaling state in words %d-%d of the "
                     "header (flag %d, scale %g, %d clean and %d skipped "
                     "steps)",
                     path, kLossScaleWord, kLossScaleWord + 3,
                     header[kLossScaleWord], scale, header[kLossScaleWord + 2],
                     header[kLossScaleWord + 3]);
  model->scatter(model->states, whole.data(), model->state.data());
  model->step = static_cast<float>(header[3]);
  // A state saved without loss scaling (fp32) leaves the scaler at its start.
  if (scaled && model->lossScaler.enabled) {
    model->lossScaler.scale = scale;
    model->lossScaler.cleanSteps = header[kLossScaleWord + 2];
    model->lossScaler.skippedSteps = header[kLossScaleWord + 3];
  }
  return 0;
}

int64_t loom_model_get_step(const loom_model *model) {
  return static_cast<int64_t>(model->step);
}

//===----------------------------------------------------------------------===//
// Hugging Face safetensors
//===----------------------------------------------------------------------===//

namespace {
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors' F32 is little-endian, written as this host has "
              "it");

/// A tensor of Hugging Face's GPT-2 (GPT2LMHeadModel's state dict): `rows`
/// x `cols` floats of the whole model from `offset`, as llm.c stores them,
/// written transposed when `transpose` is set.
struct HfTensor {
  std::string name;
  std::vector<int64_t> shape; ///< Hugging Face's.
  int64_t offset, rows, cols;
  bool transpose;
};

/// The model's tensors under Hugging Face's names and layouts, in the order
/// the file holds them: the embeddings, each block's, the final norm. The
/// tied head is wte, which Hugging Face ties again.
std::vector<HfTensor> hfTensors(const loom_model &model) {
  const loom_model_info &info = model.info;
  std::vector<HfTensor> tensors;
  auto param = [&](const char *name) -> const Param & {
    return model.params[model.paramIndex.at(name)];
  };
  auto add = [&](std::string name, const std::vector<int64_t> &shape,
                 int64_t offset) {
    int64_t rows = shape.size() == 2 ? shape[0] : 1;
    tensors.push_back(
        {std::move(name), shape, offset, rows, shape.back(), false});
  };
  // wte's rows past the vocabulary pad it for the GEMMs: they are dropped.
  add("transformer.wte.weight", {info.vocab, info.width}, param("wte").offset);
  add("transformer.wpe.weight", param("wpe").shape, param("wpe").offset);
  const size_t prefix = std::strlen(LOOM_STACKED_PREFIX);
  for (int64_t l = 0; l < info.layers; ++l)
    for (const Param &p : model.params) {
      if (p.name.compare(0, prefix, LOOM_STACKED_PREFIX) != 0)
        continue;
      std::vector<int64_t> shape(p.shape.begin() + 1, p.shape.end());
      add("transformer.h." + std::to_string(l) + "." + p.name.substr(prefix),
          shape, p.offset + l * (p.size / info.layers));
      // GPT-2's Conv1D weights, a block's only matrices, are (in, out):
      // llm.c's (out, in) transposed.
      if (shape.size() == 2) {
        tensors.back().shape = {shape[1], shape[0]};
        tensors.back().transpose = true;
      }
    }
  for (const char *name : {"ln_f.weight", "ln_f.bias"})
    add(std::string("transformer.") + name, param(name).shape,
        param(name).offset);
  return tensors;
}

/// The JSON header: every tensor's dtype, shape and byte range in the data
/// after it, padded with spaces to a multiple of 8 bytes.
std::string safetensorsHeader(const std::vector<HfTensor> &tensors) {
  std::string json = "{\"__metadata__\":{\"format\":\"pt\"}";
  int64_t begin = 0;
  for (const HfTensor &t : tensors) {
    int64_t end = begin + t.rows * t.cols * int64_t(sizeof(float));
    json += ",\"" + t.name + "\":{\"dtype\":\"F32\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d)
      json += (d ? "," : "") + std::to_string(t.shape[d]);
    json += "],\"data_offsets\":[" + std::to_string(begin) + "," +
            std::to_string(end) + "]}";
    begin = end;
  }
  json += "}";
  json.resize((json.size() + 7) / 8 * 8, ' ');
  return json;
}

int writeSafetensors(const loom_model &model, const char *path,
                     const std::vector<float> &whole) {
  std::vector<HfTensor> tensors = hfTensors(model);
  std::string header = safetensorsHeader(tensors);
  return writeFile(path, [&](FILE *file) {
    uint64_t size = header.size();
    unsigned char length[8];
    for (int i = 0; i < 8; ++i)
      length[i] = static_cast<unsigned char>(size >> (8 * i));
    if (std::fwrite(length, 1, 8, file) != 8 ||
        std::fwrite(header.data(), 1, header.size(), file) != header.size())
      return false;
    std::vector<float> transposed;
    for (const HfTensor &t : tensors) {
      const float *from = whole.data() + t.offset;
      size_t count = t.rows * t.cols;
      if (t.transpose) {
        transposed.resize(count);
        for (int64_t r = 0; r < t.rows; ++r)
          for (int64_t c = 0; c < t.cols; ++c)
            transposed[c * t.rows + r] = from[r * t.cols + c];
        from = transposed.data();
      }
      if (std::fwrite(from, sizeof(float), count, file) != count)
        return false;
    }
    return true;
  });
}
} // namespace

int loom_trace_write(const char *path) {
  const loom_dist_info *dist = loom_dist_get_info();
  int64_t rank = dist ? dist->rank : 0;
  std::string label = "rank " + std::to_string(rank);
  if (dist && dist->pp > 0)
    label += " (pp " + std::to_string(dist->pp_rank) + ", dp " +
             std::to_string(dist->dp_rank) + ", tp " +
             std::to_string(dist->tp_rank) + ")";
  std::vector<std::string> ranks;
  if (!gatherToFirst(traceEvents(rank, label), ranks))
    return 1;
  int failed = 0;
  if (isFirstRank())
    failed = writeFile(path, [&](FILE *file) {
      std::string text = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
      for (size_t r = 0; r < ranks.size(); ++r)
        text += (r ? ",\n" : "") + ranks[r];
      text += "\n]}\n";
      return std::fwrite(text.data(), 1, text.size(), file) == text.size();
    });
  return shareOutcome(failed, "write", path);
}

int loom_model_export_safetensors(const loom_model *model, const char *path) {
  if (!checkLlmcLayout(model, path, "Hugging Face GPT-2"))
    return 1;
  // As a checkpoint: the replicas gather the whole model, rank 0 writes it.
  std::vector<float> whole;
  if (!model->gather(whole))
    return 1;
  int failed = isFirstRank() ? writeSafetensors(*model, path, whole) : 0;
  return shareOutcome(failed, "write", path);
}

} // extern "C"
