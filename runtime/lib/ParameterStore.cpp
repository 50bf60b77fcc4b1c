//===- ParameterStore.cpp - Parameters and optimizer state of a rank -----===//
//
// Where each parameter and tensor of optimizer state lives: its place in
// the whole model (llm.c's order) and in this rank's buffers under the
// plan's tensor, data (ZeRO) and pipeline parallelism; the copies between
// a whole and the ranks' parts; and the model's initialization.
//
//===----------------------------------------------------------------------===//

#include "Dist.h"
#include "Float.h"
#include "Model.h"

#include <algorithm>
#include <cstring>

using namespace loom;

void loom_model::attachTensorSpecs() {
  for (Param &p : params)
    p.spec = tensorSpecs.at(p.name);
  for (Param &state : states) {
    size_t dot = state.name.find('.');
    state.spec = params[paramIndex.at(state.name.substr(dot + 1))].spec;
  }
  // llm.c's files are the whole model in the order of its tensors, which
  // a checkpoint reads and writes in one pass: the parameters must be
  // those, in that order.
  bool same = params.size() == tensorOrder.size();
  for (size_t i = 0; same && i < params.size(); ++i)
    same = params[i].name == tensorOrder[i];
  llmcLayout = llmcLayout && same;
}

bool loom_model::layoutParams() {
  // The step's parameters in the order it lists them: llm.c's order, so that
  // a checkpoint is one read or write.
  // Each tensor after the previous one of its kind, whole and local; one
  // this rank does not hold (another pipeline stage's) takes no room here.
  auto fail = [&](const std::string &why) { return badManifest(why); };
  auto place = [&](const Arg &arg, const Entry &entry,
                   std::vector<Param> &tensors,
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
    p.tpSplit = arg.tpSplit;
    // A master weight kept as ZeRO-1/2 keep the state (offload): the
    // rank's slice of its flattened part, which the device's copy holds
    // whole, laid out as tensor parallelism and the pipeline divide it.
    const Arg &layout = entry.partLayout(arg);
    if (arg.kind == LOOM_ARG_PARAM && &layout != &arg) {
      if (layout.size() != arg.size() * info.dp)
        return fail("the master weight " + arg.name +
                    " is not a slice of its device copy");
      p.part = layout.shape;
      p.tpSplit = layout.tpSplit;
      p.layerRuns = layout.layerRuns;
    }
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
      p.tpSplit = of.tpSplit;
      p.layerRuns = of.layerRuns;
    }
    p.shape = p.part;
    if (p.tpSplit.dim >= 0)
      p.shape[p.tpSplit.dim] =
          p.tpSplit.wholeExtent(p.shape[p.tpSplit.dim], info.tp);
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
      if (!place(held ? *mine->second : arg,
                 entries[held ? stepEntry : steps[r]], param ? params : states,
                 index, held, static_cast<int64_t>(r)))
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
  auto stepFlops = [&](int paramPasses, int attentionPasses) {
    return static_cast<double>(info.batch) * info.sequence *
           (loom_param_flops_per_token(static_cast<double>(info.num_params),
                                       paramPasses) +
            loom_attention_flops_per_token(info.layers, info.width,
                                           info.sequence, attentionPasses));
  };
  info.model_flops = stepFlops(3, 3);
  bool layersAgain = recompute == "full" || recompute == "stage";
  info.hardware_flops =
      stepFlops(layersAgain ? 4 : 3, recompute == "none" ? 3 : 4);
  info.local_params = localOffset;
  info.state_floats = stateSize;
  info.num_state = total(states, false);
  attachTensorSpecs();
  auto stepIt = entries.find(stepEntry);
  info.arena_bytes =
      stepIt == entries.end() ? 0 : std::max<int64_t>(stepIt->second.arena, 0);
  if (!layoutParamCopies() || !checkDeviceMemory())
    return false;
  // A training step keeps its gradients in its arena, and only the entry
  // that returns them (forward_grad) needs the runtime's own, allocated
  // when it is first called (allocateGradients); but an offloaded step
  // sends them to host memory, the runtime's, as it makes them.
  static const std::string gradPrefix = LOOM_OUTPUT_GRAD_PREFIX;
  bool stepSendsGradients =
      offloaded() &&
      std::any_of(entries[stepEntry].args.begin(),
                  entries[stepEntry].args.end(), [&](const Arg &arg) {
                    return arg.kind == LOOM_ARG_OUTPUT &&
                           arg.name.rfind(gradPrefix, 0) == 0;
                  });
  try {
    {
      HostMemoryScope host(offloaded());
      values.assign(localOffset, 0.0f);
      state.assign(stateSize, 0.0f);
      if (stepSendsGradients)
        grads.assign(localOffset, 0.0f);
    }
    int64_t copySize =
        copies.empty()
            ? 0
            : copies.back().offset +
                  copies.back().count * elementSize(copies.back().dtype);
    {
      HostMemoryScope host(offload == "parameters");
      copyBytes.assign(copySize, 0);
    }
    scalars.assign(1, Scalars{});
  } catch (const std::bad_alloc &) {
    return setError("%s: cannot allocate the parameters, gradients and "
                    "optimizer state: %s",
                    path.c_str(), std::string(loom_last_error()).c_str());
  }
  return true;
}

bool loom_model::layoutParamCopies() {
  copies.clear();
  copyIndex.clear();
  int64_t offset = 0;
  for (const Arg &arg : entries[stepEntry].args) {
    if (arg.kind != LOOM_ARG_PARAM_COPY)
      continue;
    auto param = paramIndex.find(arg.name);
    const Param *p =
        param == paramIndex.end() ? nullptr : &params[param->second];
    // The rank's part of the parameter, or (ZeRO-1/2) the whole of the
    // part it holds a slice of.
    bool whole = p && p->shard >= 0 && p->localSize != arg.size() &&
                 product(p->part, 0, p->part.size()) == arg.size();
    if (!p || !p->held || (p->localSize != arg.size() && !whole))
      return badManifest("the device copy " + arg.name +
                         " is not the size of a parameter this rank holds");
    int32_t dtype = arg.dtype == "bf16"  ? LOOM_DTYPE_BF16
                    : arg.dtype == "f16" ? LOOM_DTYPE_F16
                                         : LOOM_DTYPE_F32;
    copyIndex[arg.name] = copies.size();
    copies.push_back({param->second, dtype, offset, arg.size(), whole});
    // Each tensor at the heap's alignment.
    offset += (arg.size() * elementSize(dtype) + 63) / 64 * 64;
  }
  copiesStale = true;
  return true;
}

bool loom_model::refreshParamCopies() {
  if (!copiesStale)
    return true;
  storeOnHost = true;
  // Copies of whole parameters whose masters the ranks hold slices of
  // (ZeRO-1/2) come from the gathered whole: every rank refreshes at
  // once, as every rank steps at once.
  std::vector<float> gathered;
  if (std::any_of(copies.begin(), copies.end(),
                  [](const ParamCopy &c) { return c.whole; }) &&
      !gather(gathered))
    return false;
  const loom_dist_info *dist = loom_dist_get_info();
  int64_t tpRank = dist ? dist->tp_rank : 0;
  for (const ParamCopy &copy : copies) {
    const Param &p = params[copy.param];
    void *out = copyBytes.data() + copy.offset;
    // The step's own conversion rounds to nearest even, as storeElement.
    if (!copy.whole) {
      const float *master = values.data() + p.localOffset;
      for (int64_t i = 0; i < copy.count; ++i)
        storeElement(copy.dtype, out, i, master[i]);
      continue;
    }
    // The rank's part, from where it lies in the gathered whole.
    Param part = p;
    part.shard = -1;
    part.dpShape = p.part;
    part.localSize = copy.count;
    part.forEachWholeRun(1, 0, info.tp, tpRank,
                         [&](int64_t local, int64_t at, int64_t count) {
                           const float *from = gathered.data() + p.offset + at;
                           for (int64_t i = 0; i < count; ++i)
                             storeElement(copy.dtype, out, local + i, from[i]);
                         });
  }
  copiesStale = false;
  return true;
}

void loom_model::moveStoreToDevice() {
  if (!storeOnHost || !cudaActive())
    return;
  // An offload plan's master weights, state and gradients are host
  // memory, which stays there; so are offload=parameters' copies.
  if (!offloaded()) {
    cudaPrefetch(values.data(), values.size() * sizeof(float));
    cudaPrefetch(grads.data(), grads.size() * sizeof(float));
    cudaPrefetch(state.data(), state.size() * sizeof(float));
  }
  if (offload != "parameters")
    cudaPrefetch(copyBytes.data(), copyBytes.size());
  storeOnHost = false;
}

void loom_model::scatter(const std::vector<Param> &tensors, const float *whole,
                         float *localBase) const {
  storeOnHost = true;
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
  storeOnHost = true;
  whole.assign(
      tensors.empty() ? 0 : tensors.back().offset + tensors.back().size, 0.0f);
  const loom_dist_info *dist = loom_dist_get_info();
  int64_t dpRank = dist ? dist->dp_rank : 0, tpRank = dist ? dist->tp_rank : 0,
          ppRank = dist ? dist->pp_rank : 0;
  // Each element comes from one rank: of those holding the same part, the
  // first replica, the first of the tensor-parallel group (of the team, for
  // the elements a team of ranks shares) and the first pipeline stage. The sum
  // over the ranks of what each wrote into zeros is then the whole, exactly.
  for (const Param &p : tensors) {
    if (!p.held || (p.shard < 0 && dpRank > 0) ||
        (p.tpSplit.dim < 0 && tpRank > 0) ||
        (p.layerRuns.empty() && p.firstHolder != ppRank))
      continue;
    p.forEachWholeRun(
        info.dp, dpRank, info.tp, tpRank,
        [&](int64_t local, int64_t at, int64_t count) {
          std::copy_n(localBase + p.localOffset + local, count,
                      whole.data() + p.offset + at);
        },
        /*ownedOnly=*/true);
  }
  if (info.dp * info.tp * info.pp == 1)
    return true;
  return !loom_rt_all_reduce(loom_dist_group(LOOM_GROUP_WORLD), LOOM_DTYPE_F32,
                             whole.data(), whole.data(),
                             static_cast<int64_t>(whole.size()));
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

extern "C" {

float *loom_model_params(loom_model *model) {
  // The caller may write the master weights.
  model->copiesStale = model->storeOnHost = true;
  return model->values.data();
}

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
  // Every rank draws the whole model and keeps its part, so that the
  // weights do not depend on the plan.
  std::vector<float> whole(model->info.num_params);
  for (const Param &p : model->params) {
    float *data = whole.data() + p.offset;
    if (p.spec.init != TensorSpec::Init::Normal) {
      std::fill(data, data + p.size,
                p.spec.init == TensorSpec::Init::Ones ? 1.0f : 0.0f);
      continue;
    }
    // Rows past the real ones (a token table's padding past the
    // vocabulary, loomc --pad-vocab) are zeros and take no draws: the real
    // rows, and every tensor after them, get the values they have without
    // the padding. No token names a padding row, and the loss leaves out
    // their logits.
    int64_t drawn = p.spec.rows ? p.size / p.shape[0] * p.spec.rows : p.size;
    std::fill(data + drawn, data + p.size, 0.0f);
    double std = p.spec.std;
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

int loom_model_gather_params(const loom_model *model, float *whole) {
  std::vector<float> gathered;
  if (!model->gather(gathered))
    return 1;
  std::copy(gathered.begin(), gathered.end(), whole);
  return 0;
}

} // extern "C"
