//===- Checkpoint.cpp - llm.c checkpoints and optimizer state ------------===//
//
// Whole-model files, whatever the plan: llm.c's GPT-2 checkpoints and
// Loom's optimizer state files, a 256-int32 header and the float32 values
// in llm.c's order. Rank 0 reads and writes them; the ranks gather the
// whole from their parts or receive it and keep theirs.
//
//===----------------------------------------------------------------------===//

#include "Dist.h"
#include "JobFiles.h"
#include "Manifest.h"
#include "Model.h"

#include <cerrno>
#include <cstring>
#include <memory>

using namespace loom;

static constexpr int32_t kCheckpointMagic = 20240326;

namespace {

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

int writeWholeFile(const char *path, const int32_t header[256],
                   const std::vector<float> &whole) {
  return writeFile(path, [&](FILE *file) {
    return std::fwrite(header, sizeof(int32_t), 256, file) == 256 &&
           std::fwrite(whole.data(), sizeof(float), whole.size(), file) ==
               whole.size();
  });
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
  // The header's ints move as floats do: 4 bytes each, untouched.
  if (world && loom_rt_broadcast(world, LOOM_DTYPE_F32, header, 256, 0))
    return 1;
  return broadcastFromFirstRank(whole, count);
}
} // namespace

bool loom_model::checkLlmcHeader() const {
  const std::pair<const char *, std::vector<int64_t>> header[] = {
      {"wte", {info.padded_vocab, info.width}},
      {"wpe", {info.positions, info.width}}};
  for (const auto &[tensor, expected] : header) {
    auto it = tensorSpecs.find(tensor);
    std::string actual = it == tensorSpecs.end()
                             ? std::string("missing")
                             : formatShape(it->second.shape);
    if (it == tensorSpecs.end() || it->second.shape != expected)
      return badManifest(std::string("'checkpoint llmc', but tensor ") +
                         tensor + " is " + actual +
                         " where the model line's sizes, which llm.c's "
                         "header holds, make it " +
                         formatShape(expected));
  }
  return true;
}

bool loom::checkLlmcLayout(const loom_model *model, const char *path) {
  if (model->llmcLayout)
    return true;
  return setError("%s: this model (%s) has no llm.c checkpoint layout (its "
                  "manifest has no 'checkpoint llmc': llm.c's files hold "
                  "GPT-2 with a tied head and hidden = 4 * width)",
                  path, model->info.name);
}

extern "C" {

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
  // The steps' counter, which the compiled step takes for AdamW's bias
  // correction, is a float: exact to 2^24, past which a step would not count.
  constexpr int32_t kMaxSteps = (1 << 24) - 1;
  if (header[3] > kMaxSteps)
    return !setError("%s: the state after %d steps; a run counts at most %d "
                     "(a damaged file?)",
                     path, header[3], kMaxSteps);
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

} // extern "C"
