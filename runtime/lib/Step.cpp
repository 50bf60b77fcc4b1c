//===- Step.cpp - Running the compiled step ------------------------------===//
//
// The entry points' calls: their argument arrays bound once to the
// model's buffers, a training step on this replica's share of the batch,
// the forward pass alone and the loss and gradients of micro-batches, and
// fp16's loss scaling between steps.
//
//===----------------------------------------------------------------------===//

#include "Dist.h"
#include "Float.h"
#include "Model.h"
#include "Trace.h"

#include <unistd.h>

using namespace loom;

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
    if (gradsOut) {
      storeOnHost = true;
      for (size_t i = 0; i < grads.size(); ++i)
        gradsOut[i] += grads[i];
    }
  }
  *lossOut = static_cast<float>(lossSum / count);
  if (gradsOut && count > 1)
    for (size_t i = 0; i < grads.size(); ++i)
      gradsOut[i] /= static_cast<float>(count);
  return true;
}

void *loom_model::bufferFor(const Arg &arg) {
  if (arg.kind == LOOM_ARG_PARAM)
    return paramFor(arg.name, values.data());
  if (arg.kind == LOOM_ARG_PARAM_COPY) {
    auto it = copyIndex.find(arg.name);
    return it == copyIndex.end() ? nullptr
                                 : copyBytes.data() + copies[it->second].offset;
  }
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
    if (arg.name == LOOM_OUTPUT_LOGITS) {
      logits.assign(arg.size(), 0.0f);
      return logits.data();
    }
  }
  return nullptr;
}

bool loom_model::allocateGradients() {
  if (!grads.empty() || info.local_params == 0)
    return true;
  try {
    storeOnHost = true;
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
    entry.wholeParts.clear();
    entry.unbindable.clear();
    // A pipeline rank runs its own step, forward pass and scores; the
    // others' take what it lacks.
    if (info.pp > 1 && entryName != stepEntry && entryName != evalEntry &&
        entryName != logitsEntry)
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
      } else if (arg.kind == LOOM_ARG_OUTPUT &&
                 arg.name.rfind(gradPrefix, 0) == 0 &&
                 !holdsAsRead(arg.name.substr(gradPrefix.size()), arg.size())) {
        // The whole gradient of a parameter the rank keeps a slice of
        // (ZeRO-1/2 under offload): the runtime's gradients are slices.
        entry.unbindable = "returns the whole gradient of " +
                           arg.name.substr(gradPrefix.size()) +
                           ", of which this rank keeps a slice";
      } else if (arg.kind == LOOM_ARG_PARAM &&
                 !holdsAsRead(arg.name, arg.size())) {
        // Read whole where the rank keeps a slice: the device copy holds
        // the whole part, widened before each call.
        auto copy = copyIndex.find(arg.name);
        if (copy == copyIndex.end() || !copies[copy->second].whole ||
            copies[copy->second].count != arg.size())
          return setError("%s: entry '%s' reads parameter %s as %lld "
                          "elements, which is not how this rank holds it",
                          path.c_str(), entryName.c_str(), arg.name.c_str(),
                          static_cast<long long>(arg.size()));
        entry.wholeParts.push_back({slot, copy->second, {}});
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
  if (!entry.unbindable.empty())
    return setError("%s: entry '%s' %s", path.c_str(), entryName,
                    entry.unbindable.c_str());
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
  if ((entryName == stepEntry || !entry.wholeParts.empty()) &&
      !refreshParamCopies())
    return false;
  for (Entry::WholePart &part : entry.wholeParts) {
    const ParamCopy &copy = copies[part.copy];
    part.values.resize(copy.count);
    const char *from = copyBytes.data() + copy.offset;
    for (int64_t i = 0; i < copy.count; ++i)
      part.values[i] = loadElement(copy.dtype, from, i);
    entry.buffers[part.slot] = part.values.data();
  }
  moveStoreToDevice();
  heapBeginCall();
  entry.fn(entry.buffers.data());
  heapEndCall();
  if (cudaActive() && !cudaSynchronize())
    return false;
  // What the call started and did not wait for (a compiled step waits for
  // its own) is done before anyone reads what it wrote.
  transfersWaitAll();
  loss = scalars[0].loss;
  gradNorm = scalars[0].gradNorm;
  return true;
}

bool loom_model::checkHostMemory(int64_t device) {
  // Offload: the host keeps the master weights, the optimizer state and the
  // gradients the device sends, and runs the update in an arena of its own; on
  // a CPU the device's memory is the same machine's, counted as well
  // (`device`).
  if (info.host_bytes <= 0)
    return true;
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0)
    return true;
  size_t total = static_cast<size_t>(pages) * static_cast<size_t>(pageSize);
  int64_t needed = info.host_bytes + device;
  if (static_cast<size_t>(needed) <= total)
    return true;
  return setError("%s: the offloaded step needs %lld MiB of host memory "
                  "(master weights, optimizer state, gradients and the host's "
                  "arena "
                  "%lld MiB, as compiled%s) and this machine has %lld MiB",
                  path.c_str(), static_cast<long long>(needed >> 20),
                  static_cast<long long>(info.host_bytes >> 20),
                  device ? ", with the device's part on the same memory" : "",
                  static_cast<long long>(total >> 20));
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
  if (!checkHostMemory(cudaActive() ? 0 : needed))
    return false;
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

extern "C" {

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

int loom_model_logits(loom_model *model, const int32_t *tokens, float *logits) {
  if (!model->info.logits_rows)
    return !setError("%s: has no logits entry point: compile it with loomc "
                     "--logits to sample from it",
                     model->path.c_str());
  if (!model->call(model->logitsEntry.c_str(), tokens, nullptr))
    return 1;
  std::copy(model->logits.begin(), model->logits.end(), logits);
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

} // extern "C"
