//===- loom-run.cpp - Train with a compiled artifact ----------------------===//
//
// Uses only the runtime's C API: what this program does, any program linked
// against the runtime can do.
//
//===----------------------------------------------------------------------===//

#include "LrSchedule.h"
#include "loom/runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace {
const char *const kUsage =
    "usage: loom-run ARTIFACT --data FILE [options]\n"
    "\n"
    "Trains the model compiled into ARTIFACT (by loomc) on FILE, an llm.c\n"
    "token shard or any other file read as bytes (vocabulary 256).\n"
    "\n"
    "  --data FILE         training data\n"
    "  --steps N           training steps (default 100)\n"
    "  --lr X              learning rate (default: the model description's);\n"
    "                      with a schedule, the one after the warm-up\n"
    "  --warmup-steps N    raise the learning rate linearly from 0 over the\n"
    "                      first N steps (default 0)\n"
    "  --lr-schedule S     after the warm-up: constant (default), or cosine\n"
    "                      or linear decay to --min-lr at the last step\n"
    "  --min-lr X          the rate a decay ends at (default: --lr / 10)\n"
    "  --lr-decay-end N    the step a decay ends at (default: the run's\n"
    "                      last; give the whole run's when it is split over\n"
    "                      several --load-state resumptions)\n"
    "  --seed N            initialization seed (default 1337)\n"
    "  --load FILE         start from an llm.c checkpoint instead, or from\n"
    "                      Hugging Face weights: FILE.safetensors, or an\n"
    "                      index of shards (model.safetensors.index.json)\n"
    "  --save FILE         write an llm.c checkpoint after the last step\n"
    "  --save-state FILE   also write the optimizer state and step count\n"
    "  --load-state FILE   resume from them (after --load): the steps go on\n"
    "                      from the saved count, on the batches that follow\n"
    "  --export-safetensors FILE\n"
    "                      write the parameters after the last step as a\n"
    "                      safetensors file with the Hugging Face names\n"
    "                      and layouts its manifest gives (GPT-2's:\n"
    "                      GPT2LMHeadModel's state dict)\n"
    "  --val-fraction X    hold out the last X of the data (default 0.1)\n"
    "  --val-every K       validation loss every K steps and at the end\n"
    "                      (default 0: never)\n"
    "  --val-batches N     batches per validation (default 4)\n"
    "  --threads N         threads for the step's loops and BLAS (default:\n"
    "                      every core this process may use, divided among\n"
    "                      the ranks allowed on the same cores); the same\n"
    "                      N gives bitwise-identical losses run to run\n"
    "  --loss-scale X      fp16 artifacts: the first loss scale (default\n"
    "                      65536); it halves after a step whose gradients\n"
    "                      overflowed, which is skipped\n"
    "  --loss-scale-window N\n"
    "                      fp16 artifacts: double the scale after N steps in\n"
    "                      a row without overflow (default 2000)\n"
    "  --allow-nonfinite   go on training after a loss that is NaN or\n"
    "                      infinite (by default the run stops with exit 1)\n"
    "  --peak-tflops X     the dense peak of one rank's device, in TFLOP/s,\n"
    "                      for the step's precision (an H100 SXM's 989 for\n"
    "                      bf16): each step line and the summary then give\n"
    "                      the MFU, the model's FLOPs over all ranks' peak\n"
    "                      (the cost model's count: docs/loom-run.md)\n"
    "  --quiet             print only the summary line\n"
    "  --verbose-ranks     under mpirun, every rank prints (prefixed with its\n"
    "                      rank), not only rank 0\n"
    "  --trace FILE        write the run's timeline as Chrome trace-event\n"
    "                      JSON (Perfetto, chrome://tracing): a track per\n"
    "                      rank, with each step, its micro-batches' forward\n"
    "                      and backward passes, its collectives and messages\n"
    "                      and the optimizer\n"
    "\n"
    "An artifact compiled for several ranks runs under mpirun, one loom-run\n"
    "per rank: mpirun -np N loom-run ARTIFACT --data FILE. The job's size\n"
    "must be the plan's pp * dp * tp.\n";

struct Options {
  std::string artifact, data, load, save, exportSafetensors, loadState,
      saveState, trace;
  long long steps = 100, seed = 1337, valEvery = 0, valBatches = 4, threads = 0,
            lossScaleWindow = 2000;
  double lr = -1, minLr = -1, valFraction = 0.1, lossScale = 65536,
         peakTflops = 0;
  long long warmupSteps = 0, lrDecayEnd = 0;
  loom::LrDecay lrDecay = loom::LrDecay::Constant;
  bool quiet = false, verboseRanks = false, lossScaleGiven = false,
       allowNonfinite = false;
};

int usageError(const std::string &message) {
  std::fprintf(stderr, "loom-run: error: %s\n(loom-run --help for usage)\n",
               message.c_str());
  return 1;
}

bool parseInt(const char *text, long long min, long long &out) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (!*text || *end || errno || v < min)
    return false;
  out = v;
  return true;
}

bool parseReal(const char *text, double min, double max, double &out) {
  char *end = nullptr;
  double v = std::strtod(text, &end);
  if (!*text || *end || !(v >= min && v <= max))
    return false;
  out = v;
  return true;
}

/// Whether a file can be written at `path` (given with `flag`): checked
/// before training, so that a run does not end by losing its checkpoint.
/// The file is written as `path`.partial next to it and renamed, or
/// directly into a path that is not a regular file (/dev/null).
std::string unwritable(const std::string &path, const char *flag) {
  struct stat status;
  if (::stat(path.c_str(), &status) == 0) {
    if (S_ISDIR(status.st_mode))
      return path + " (" + flag + "): is a directory";
    if (!S_ISREG(status.st_mode))
      return ::access(path.c_str(), W_OK) == 0
                 ? ""
                 : path + " (" + flag +
                       "): cannot write: " + std::strerror(errno);
  }
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0               ? "/"
                                               : path.substr(0, slash);
  if (::stat(dir.c_str(), &status) != 0 || !S_ISDIR(status.st_mode))
    return path + " (" + flag + "): no directory " + dir;
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return path + " (" + flag + "): cannot write in " + dir + ": " +
           std::strerror(errno);
  return "";
}

/// A flag that takes a value: a path, an integer or a number, in bounds,
/// or a learning-rate schedule's name.
struct ValueFlag {
  const char *name;
  std::string *path = nullptr;
  long long *integer = nullptr;
  double *real = nullptr;
  loom::LrDecay *decay = nullptr;
  double min = 0, max = 0;

  /// What the value must be, for the error that echoes a bad one.
  std::string expected() const {
    if (decay)
      return "constant, cosine or linear";
    char text[96];
    if (integer && max == 0)
      std::snprintf(text, sizeof(text), "an integer, %g or more", min);
    else
      std::snprintf(text, sizeof(text), "%s from %g to %g",
                    integer ? "an integer" : "a number", min, max);
    return text;
  }
  bool parse(const char *v) const {
    if (decay) {
      std::optional<loom::LrDecay> parsed = loom::parseLrDecay(v);
      if (parsed)
        *decay = *parsed;
      return parsed.has_value();
    }
    if (path) {
      *path = v;
      return true;
    }
    if (integer) {
      long long parsed;
      if (!parseInt(v, static_cast<long long>(min), parsed) ||
          (max != 0 && parsed > max))
        return false;
      *integer = parsed;
      return true;
    }
    return parseReal(v, min, max, *real);
  }
};

int parseArgs(int argc, char **argv, Options &o) {
  auto path = [](const char *name, std::string &to) {
    ValueFlag f{name};
    f.path = &to;
    return f;
  };
  // max 0: no upper bound.
  auto integer = [](const char *name, long long &to, long long min,
                    long long max = 0) {
    ValueFlag f{name};
    f.integer = &to;
    f.min = min;
    f.max = max;
    return f;
  };
  auto real = [](const char *name, double &to, double min, double max) {
    ValueFlag f{name};
    f.real = &to;
    f.min = min;
    f.max = max;
    return f;
  };
  auto schedule = [](const char *name, loom::LrDecay &to) {
    ValueFlag f{name};
    f.decay = &to;
    return f;
  };
  const ValueFlag flags[] = {
      path("--data", o.data),
      path("--load", o.load),
      path("--save", o.save),
      path("--load-state", o.loadState),
      path("--save-state", o.saveState),
      path("--export-safetensors", o.exportSafetensors),
      path("--trace", o.trace),
      integer("--steps", o.steps, 0),
      integer("--seed", o.seed, 0),
      integer("--val-every", o.valEvery, 0),
      integer("--val-batches", o.valBatches, 1),
      integer("--threads", o.threads, 1, 1024),
      real("--lr", o.lr, 0.0, 1e3),
      real("--min-lr", o.minLr, 0.0, 1e3),
      integer("--warmup-steps", o.warmupSteps, 0),
      integer("--lr-decay-end", o.lrDecayEnd, 1),
      schedule("--lr-schedule", o.lrDecay),
      real("--val-fraction", o.valFraction, 0.0, 0.9),
      real("--loss-scale", o.lossScale, 0x1p-24, 0x1p64),
      real("--peak-tflops", o.peakTflops, 1e-6, 1e6),
      integer("--loss-scale-window", o.lossScaleWindow, 1),
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (a == "--quiet") {
      o.quiet = true;
      continue;
    }
    if (a == "--verbose-ranks") {
      o.verboseRanks = true;
      continue;
    }
    if (a == "--allow-nonfinite") {
      o.allowNonfinite = true;
      continue;
    }
    if (a.rfind("--", 0) == 0) {
      const ValueFlag *flag = nullptr;
      for (const ValueFlag &f : flags)
        if (a == f.name)
          flag = &f;
      if (!flag)
        return usageError("unknown option " + a);
      if (i + 1 >= argc)
        return usageError(a + " needs a value");
      const char *v = argv[++i];
      if (!flag->parse(v))
        return usageError("bad value for " + a + ": '" + v + "' (expected " +
                          flag->expected() + ")");
      if (flag->path && !*v)
        return usageError(a + " needs a file name, got an empty one");
      if (flag->real == &o.lossScale || flag->integer == &o.lossScaleWindow)
        o.lossScaleGiven = true;
      continue;
    }
    if (!o.artifact.empty())
      return usageError("more than one artifact given (" + a + ")");
    o.artifact = a;
  }
  if (o.artifact.empty())
    return usageError("no artifact given");
  if (o.data.empty())
    return usageError("no --data given");
  for (auto [path, flag] :
       {std::pair<const std::string &, const char *>{o.save, "--save"},
        {o.saveState, "--save-state"},
        {o.exportSafetensors, "--export-safetensors"},
        {o.trace, "--trace"}})
    if (!path.empty()) {
      std::string why = unwritable(path, flag);
      if (!why.empty()) {
        std::fprintf(stderr, "loom-run: error: %s\n", why.c_str());
        return 1;
      }
    }
  return 0;
}

/// Standard output of the run: rank 0's, or every rank's with
/// --verbose-ranks, each line then prefixed with its rank.
bool printing = true;
std::string rankPrefix;

__attribute__((format(printf, 1, 2))) void report(const char *format, ...) {
  if (!printing)
    return;
  std::fputs(rankPrefix.c_str(), stdout);
  va_list args;
  va_start(args, format);
  std::vprintf(format, args);
  va_end(args);
  // A line as it happens, also into a pipe (tee, a scheduler's log), which
  // would otherwise see the lines of a slow model's steps in 4 KB chunks.
  std::fflush(stdout);
}

int fail(const char *what) {
  const loom_dist_info *dist = loom_dist_get_info();
  if (dist && dist->world_size > 1)
    std::fprintf(stderr, "loom-run: error: rank %lld of %lld: %s\n",
                 static_cast<long long>(dist->rank),
                 static_cast<long long>(dist->world_size), what);
  else
    std::fprintf(stderr, "loom-run: error: %s\n", what);
  // Once the ranks are laid on the plan's grid, the others may be waiting
  // for this one in a collective: end them all. Before (a world size that
  // is not the plan's, which every rank finds), each leaves on its own.
  if (loom_dist_group(LOOM_GROUP_WORLD) && dist->world_size > 1)
    loom_dist_abort(1);
  loom_dist_finalize();
  return 1;
}

/// A loss or a norm with six decimals; a NaN as `nan` whatever its sign
/// bit (printf writes `-nan` for some), so that logs compare as text.
std::string formatValue(double value) {
  if (std::isnan(value))
    return "nan";
  char text[64];
  std::snprintf(text, sizeof(text), "%.6f", value);
  return text;
}

/// The signal (SIGINT or SIGTERM) that asked training to stop, 0 if none.
volatile std::sig_atomic_t stopSignal = 0;

/// The first SIGINT or SIGTERM lets the step in flight finish and ends
/// training after it, saving what --save asks for; a second one ends the
/// process at once, as the default action would have.
void requestStop(int signal) {
  if (stopSignal) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  stopSignal = signal;
}

void installStopHandlers() {
  struct sigaction action {};
  action.sa_handler = requestStop;
  sigemptyset(&action.sa_mask);
  // Reads and waits interrupted by the signal resume.
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

/// Whether to stop after this step: on several ranks, whether any rank was
/// asked to, agreed by all so that none is left waiting in a collective.
bool stopAgreed(const loom_dist_info &dist) {
  float stop = static_cast<float>(stopSignal);
  if (dist.world_size > 1 &&
      loom_rt_all_reduce_max(loom_dist_group(LOOM_GROUP_WORLD), LOOM_DTYPE_F32,
                             &stop, &stop, 1))
    return false;
  if (stop > 0 && !stopSignal)
    stopSignal = static_cast<int>(stop);
  return stop > 0;
}

/// One run of loom-run: its artifact, data and batch, through the steps,
/// each phase returning 0 or the exit status of a failure it reported.
class Run {
public:
  explicit Run(Options &o) : o(o) {}
  ~Run();

  int openModel();
  int openData();
  int startWeights();
  void describe() const;
  int train();
  void summarize() const;
  int writeOutputs();
  /// The exit status of a run that ended well: a run cut short by a signal
  /// says so to whoever started it.
  int status() const { return stoppedAfter ? 128 + stopSignal : 0; }

private:
  int trainStep(long long step);
  int validate(long long step);
  /// The model's FLOPs per second over the peak of every rank's device,
  /// with --peak-tflops: `prefix` and a percentage, or nothing.
  std::string mfu(double ms, const char *prefix) const;
  /// Fills tokens and targets with the next training batch.
  int nextBatch();

  Options &o;
  loom_model *model = nullptr;
  const loom_model_info *info = nullptr;
  const loom_dist_info *dist = nullptr;
  loom_dataset *data = nullptr;
  int64_t size = 0, valBegin = 0, cursor = 0, tokensPerStep = 0;
  std::vector<int32_t> tokens, targets;
  long long first = 1, last = 0, stoppedAfter = 0;
  loom::LrSchedule schedule;
  double totalMs = 0, lastLoss = 0;
};

Run::~Run() {
  loom_dataset_close(data);
  loom_model_close(model);
}

int Run::openModel() {
  if (o.threads > 0)
    loom_set_num_threads(o.threads);
  model = loom_model_open(o.artifact.c_str());
  if (!model)
    return fail(loom_last_error());
  info = loom_model_get_info(model);
  if (loom_dist_init(info->pp, info->dp, info->tp)) {
    std::string msg = o.artifact + ": " + loom_last_error();
    return fail(msg.c_str());
  }
  dist = loom_dist_get_info();
  // Ranks allowed on the same cores share them: without --threads, each
  // takes its part rather than all of them.
  if (o.threads == 0 && dist->core_sharers > 1)
    loom_set_num_threads(
        std::max<int64_t>(1, loom_get_num_threads() / dist->core_sharers));
  printing = dist->rank == 0 || o.verboseRanks;
  if (o.verboseRanks && dist->world_size > 1)
    rankPrefix = "[rank " + std::to_string(dist->rank) + "] ";
  if (o.valEvery > 0 && !info->can_eval) {
    std::string msg = o.artifact +
                      ": --val-every: validation runs the forward pass "
                      "alone, which this pipeline artifact (pp = " +
                      std::to_string(info->pp) + ") does not have";
    return fail(msg.c_str());
  }
  return 0;
}

int Run::openData() {
  data = loom_dataset_open(o.data.c_str(), info->vocab);
  if (!data)
    return fail(loom_last_error());
  size = loom_dataset_size(data);
  valBegin = size - static_cast<int64_t>(size * o.valFraction);
  int64_t need = info->sequence + 1;
  if (valBegin < need || (o.valEvery > 0 && size - valBegin < need)) {
    std::string msg = o.data + ": " + std::to_string(size) +
                      " tokens are too few: training and validation each "
                      "need at least " +
                      std::to_string(need) + " (sequence + 1)";
    return fail(msg.c_str());
  }
  tokensPerStep = info->batch * info->sequence;
  try {
    tokens.resize(tokensPerStep);
    targets.resize(tokensPerStep);
  } catch (const std::bad_alloc &) {
    std::string msg = o.artifact +
                      ": cannot allocate the batch's tokens and "
                      "targets (" +
                      std::to_string(2 * 4 * tokensPerStep) + " bytes)";
    return fail(msg.c_str());
  }
  return 0;
}

int Run::startWeights() {
  loom_loss_scale scale;
  if (!loom_model_get_loss_scale(model, &scale) && o.lossScaleGiven) {
    std::string msg = o.artifact +
                      ": --loss-scale and --loss-scale-window are for "
                      "artifacts compiled with precision fp16, which scale "
                      "their loss; this one does not";
    return fail(msg.c_str());
  }
  // The initial scale, before a state file (--load-state) may restore the
  // one its run had reached.
  if (loom_model_set_loss_scaling(model, static_cast<float>(o.lossScale),
                                  o.lossScaleWindow))
    return fail(loom_last_error());
  if (!o.load.empty()) {
    // Hugging Face's files by their extension, llm.c's otherwise.
    auto endsWith = [&](const std::string &suffix) {
      return o.load.size() >= suffix.size() &&
             o.load.compare(o.load.size() - suffix.size(), suffix.size(),
                            suffix) == 0;
    };
    bool hf = endsWith(".safetensors") || endsWith(".json");
    if (hf ? loom_model_load_safetensors(model, o.load.c_str())
           : loom_model_load_checkpoint(model, o.load.c_str()))
      return fail(loom_last_error());
  } else {
    loom_model_init(model, static_cast<uint64_t>(o.seed));
  }
  if (!o.loadState.empty() &&
      loom_model_load_optimizer_state(model, o.loadState.c_str()))
    return fail(loom_last_error());
  // Resumed, the run takes the batches that follow those already trained
  // on, and counts its steps on from theirs.
  first = loom_model_get_step(model) + 1;
  last = first + o.steps - 1;
  schedule.peak = o.lr >= 0 ? o.lr : info->lr;
  schedule.final = o.minLr >= 0 ? o.minLr : schedule.peak / 10;
  schedule.warmup = o.warmupSteps;
  schedule.decay = o.lrDecay;
  schedule.last = o.lrDecayEnd ? o.lrDecayEnd : last;
  if (schedule.decay != loom::LrDecay::Constant &&
      schedule.final > schedule.peak) {
    std::string why = "--min-lr " + formatValue(schedule.final) +
                      " is above the learning rate " +
                      formatValue(schedule.peak) + ", which a decay lowers";
    return fail(why.c_str());
  }
  for (long long skipped = 1; skipped < first; ++skipped)
    if (int rc = nextBatch())
      return rc;
  return 0;
}

void Run::describe() const {
  if (o.quiet)
    return;
  // How the step's batch is split: over replicas, then micro-batches.
  std::string split;
  if (info->dp > 1) {
    int64_t threads = loom_get_num_threads();
    split = ", " + std::to_string(info->batch / info->dp) +
            " sequences on each of " + std::to_string(info->dp) +
            " replicas of " + std::to_string(threads) +
            (threads == 1 ? " thread" : " threads");
    if (info->zero > 0)
      split += " (ZeRO-" + std::to_string(info->zero) + ")";
  }
  if (info->tp > 1)
    split += ", each layer split over " + std::to_string(info->tp) +
             " tensor-parallel ranks";
  if (info->pp > 1) {
    split += ", the layers in " + std::to_string(info->pp) +
             " pipeline stages (" + info->schedule;
    if (info->virtual_stages > 1)
      split += ", " + std::to_string(info->virtual_stages) + " chunks each";
    split += ")";
  }
  if (info->micro_batches > 1)
    split += " in " + std::to_string(info->micro_batches) + " micro-batches";
  report("loom-run: %s, %lld parameters, %lld x %lld tokens a step%s, "
         "%lld %s tokens (%lld held out)\n",
         info->name, static_cast<long long>(info->num_params),
         static_cast<long long>(info->batch),
         static_cast<long long>(info->sequence), split.c_str(),
         static_cast<long long>(size),
         loom_dataset_is_shard(data) ? "shard" : "text",
         static_cast<long long>(size - valBegin));
  if (info->param_bytes > 0)
    report("loom-run: per rank: parameters %lld B, gradients %lld B, "
           "optimizer state %lld B (%.2f MiB), activations %lld B per "
           "micro-batch, as compiled\n",
           static_cast<long long>(info->param_bytes),
           static_cast<long long>(info->grad_bytes),
           static_cast<long long>(info->state_bytes),
           (info->param_bytes + info->grad_bytes + info->state_bytes) /
               1048576.0,
           static_cast<long long>(info->activation_bytes));
  if (info->arena_bytes > 0)
    report("loom-run: the step's buffers: an arena of %lld B, as compiled\n",
           static_cast<long long>(info->arena_bytes));
}

int Run::nextBatch() {
  if (loom_dataset_batch(data, 0, valBegin, &cursor, info->batch,
                         info->sequence, tokens.data(), targets.data()))
    return fail(loom_last_error());
  return 0;
}

int Run::validate(long long step) {
  int64_t at = valBegin;
  double sum = 0;
  for (long long i = 0; i < o.valBatches; ++i) {
    float loss = 0;
    if (loom_dataset_batch(data, valBegin, size, &at, info->batch,
                           info->sequence, tokens.data(), targets.data()) ||
        loom_model_eval(model, tokens.data(), targets.data(), &loss))
      return fail(loom_last_error());
    sum += loss;
  }
  report("step %5lld | val loss %s\n", step,
         formatValue(sum / o.valBatches).c_str());
  return 0;
}

std::string Run::mfu(double ms, const char *prefix) const {
  if (o.peakTflops <= 0 || ms <= 0)
    return "";
  double peak = o.peakTflops * 1e12 * std::max<int64_t>(dist->world_size, 1);
  char text[64];
  std::snprintf(text, sizeof(text), "%s%.1f%%", prefix,
                info->model_flops / (ms * 1e-3) / peak * 100.0);
  return text;
}

int Run::trainStep(long long step) {
  if (int rc = nextBatch())
    return rc;
  auto start = std::chrono::steady_clock::now();
  float loss = 0, norm = 0;
  loom_loss_scale before{};
  bool scaling = loom_model_get_loss_scale(model, &before);
  double lr = schedule.at(step);
  if (loom_model_train_step(model, tokens.data(), targets.data(),
                            static_cast<float>(lr), &loss, &norm))
    return fail(loom_last_error());
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  totalMs += ms;
  lastLoss = loss;
  // fp16: the scale the step ran with, and whether its gradients
  // overflowed, which left the parameters as they were.
  char scaled[64] = "";
  if (scaling) {
    loom_loss_scale after{};
    loom_model_get_loss_scale(model, &after);
    std::snprintf(scaled, sizeof(scaled), " | scale %g%s", before.scale,
                  after.last_skipped ? " | skipped (overflow)" : "");
  }
  // The rate, where a schedule varies it, to six significant digits.
  char rate[48] = "";
  if (schedule.varies())
    std::snprintf(rate, sizeof(rate), " | lr %.6g", lr);
  if (!o.quiet)
    report("step %5lld/%lld | loss %s | norm %s%s | %8.2f ms | "
           "%9.0f tok/s%s%s\n",
           step, last, formatValue(loss).c_str(), formatValue(norm).c_str(),
           rate, ms, tokensPerStep / ms * 1e3, mfu(ms, " | MFU ").c_str(),
           scaled);
  if (!std::isfinite(loss) && !o.allowNonfinite) {
    std::string msg = "step " + std::to_string(step) + ": the loss is " +
                      (std::isnan(loss) ? "NaN" : "infinite") +
                      ": training has diverged, or the data or the "
                      "starting checkpoint is bad; stopping without "
                      "saving (--allow-nonfinite trains on)";
    return fail(msg.c_str());
  }
  if (o.valEvery > 0 && (step % o.valEvery == 0 || step == last))
    return validate(step);
  return 0;
}

int Run::train() {
  if (!o.trace.empty() && loom_trace_start())
    return fail(loom_last_error());
  installStopHandlers();
  for (long long step = first; step <= last; ++step) {
    if (int rc = trainStep(step))
      return rc;
    if (step < last && stopAgreed(*dist)) {
      stoppedAfter = step;
      o.steps = step - first + 1;
      report("loom-run: %s after step %lld of %lld: stopping%s\n",
             stopSignal == SIGINT ? "interrupted (SIGINT)"
                                  : "terminated (SIGTERM)",
             step, last,
             o.save.empty() && o.saveState.empty()
                 ? ""
                 : "; saving what this step left");
      break;
    }
  }
  return 0;
}

void Run::summarize() const {
  if (o.steps <= 0)
    return;
  // Under several ranks, the part of the step spent in its collectives
  // (waiting for the slowest rank included).
  char comm[64] = "";
  if (dist->world_size > 1)
    std::snprintf(comm, sizeof(comm), ", communication %.2f ms/step",
                  loom_dist_comm_seconds() * 1e3 / o.steps);
  char scaled[96] = "";
  loom_loss_scale scale;
  if (loom_model_get_loss_scale(model, &scale))
    std::snprintf(scaled, sizeof(scaled),
                  ", %lld skipped (overflow), loss scale %g",
                  static_cast<long long>(scale.skipped_steps), scale.scale);
  std::string utilization = mfu(totalMs / o.steps, ", MFU ");
  if (!utilization.empty()) {
    char of[48];
    std::snprintf(of, sizeof(of), " of %g TFLOP/s a rank", o.peakTflops);
    utilization += of;
  }
  report("loom-run: %lld steps%s, final loss %s, %.2f ms/step, %.0f "
         "tok/s%s, peak memory %.1f MiB (tensors %lld B, the step's "
         "buffers %lld B)%s\n",
         o.steps, scaled, formatValue(lastLoss).c_str(), totalMs / o.steps,
         tokensPerStep * o.steps / totalMs * 1e3, utilization.c_str(),
         loom_peak_memory_mib(), static_cast<long long>(loom_heap_peak_bytes()),
         static_cast<long long>(loom_heap_step_peak_bytes()), comm);
}

int Run::writeOutputs() {
  std::fflush(stdout);
  if (!o.trace.empty() && loom_trace_write(o.trace.c_str()))
    return fail(loom_last_error());
  // The ranks gather the whole model (under ZeRO-3, each holds a part of
  // it) and rank 0 writes it, once, for each file.
  if (!o.save.empty() && loom_model_save_checkpoint(model, o.save.c_str()))
    return fail(loom_last_error());
  if (!o.saveState.empty() &&
      loom_model_save_optimizer_state(model, o.saveState.c_str()))
    return fail(loom_last_error());
  if (!o.exportSafetensors.empty() &&
      loom_model_export_safetensors(model, o.exportSafetensors.c_str()))
    return fail(loom_last_error());
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  Options o;
  if (int rc = parseArgs(argc, argv, o))
    return rc;
  int status;
  {
    Run run(o);
    if (int rc = run.openModel())
      return rc;
    if (int rc = run.openData())
      return rc;
    if (int rc = run.startWeights())
      return rc;
    run.describe();
    if (int rc = run.train())
      return rc;
    run.summarize();
    if (int rc = run.writeOutputs())
      return rc;
    status = run.status();
  }
  loom_dist_finalize();
  return status;
}
