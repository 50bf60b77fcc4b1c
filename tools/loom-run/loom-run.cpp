//===- loom-run.cpp - Train with a compiled artifact ----------------------===//
//
// Uses only the runtime's C API: what this program does, any program linked
// against the runtime can do.
//
//===----------------------------------------------------------------------===//

#include "Bpe.h"
#include "LrSchedule.h"
#include "MetricsLog.h"
#include "Options.h"
#include "RunDir.h"
#include "Sampler.h"
#include "TensorBoard.h"
#include "TrainingData.h"
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

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace loom;

namespace {
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

/// The flags of standard output and error (by descriptor) before a stop
/// request made them non-blocking; -1 while untouched.
volatile std::sig_atomic_t outputFlags[3] = {-1, -1, -1};

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
  // Whoever reads the output may be going too: signalled, mpirun stops
  // reading its ranks' terminals, and rank 0, blocked on a full one, would
  // never save before mpirun's SIGKILL a second later. From here on a line
  // that cannot be written is lost (a write into a pipe or terminal fails
  // instead of waiting, a closed one's instead of ending the process), and
  // the saves go ahead.
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat status;
    int flags = ::fcntl(fd, F_GETFL);
    if (::fstat(fd, &status) == 0 && !S_ISREG(status.st_mode) && flags >= 0 &&
        !(flags & O_NONBLOCK) && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0)
      outputFlags[fd] = flags;
  }
  std::signal(SIGPIPE, SIG_IGN);
}

/// Gives a terminal the process shares with its shell back its blocking
/// writes.
void restoreOutputFlags() {
  for (int fd : {STDOUT_FILENO, STDERR_FILENO})
    if (outputFlags[fd] >= 0)
      ::fcntl(fd, F_SETFL, outputFlags[fd]);
}

void installStopHandlers() {
  std::atexit(restoreOutputFlags);
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
  int startLog();
  int prepareSampling();
  /// --prompt's text as tokens: bytes, or the BPE merges beside `table`
  /// (the vocabulary read).
  int encodePrompt(const std::string &table);
  /// --generate: text from the weights loaded, printed; no training.
  int generate();
  int train();
  int summarize();
  int writeOutputs();
  /// The exit status of a run that ended well: a run cut short by a signal
  /// says so to whoever started it.
  int status() const { return stoppedAfter ? 128 + stopSignal : 0; }

private:
  int trainStep(long long step);
  /// The mean loss of --val-batches batches of the held-out data.
  int validate(long long step, double &loss);
  /// The model's FLOPs per second over the peak of every rank's device,
  /// with --peak-tflops: `prefix` and a percentage, or nothing.
  std::string mfu(double ms, const char *prefix) const;
  double flopsFraction(double flops, double ms) const;
  /// Fills tokens and targets with the next training batch.
  int nextBatch();
  /// Continues from --resume's newest checkpoint: the weights, the
  /// optimizer state and the data position.
  int resume();
  /// Starts from --load, --load-state or the initialization.
  int loadWeights();
  /// Writes the checkpoint of the step just taken into the run directory.
  int saveCheckpoint(long long step);
  /// Generates text from the weights of `step` and prints it (rank 0);
  /// `text` gets it.
  int sampleText(long long step, std::string &text);
  /// Writes a record to --log (rank 0), failing the run if it cannot.
  int logRecord(const JsonRecord &record);

  Options &o;
  loom_model *model = nullptr;
  const loom_model_info *info = nullptr;
  const loom_dist_info *dist = nullptr;
  TrainingData data;
  /// The seed the data's shards are shuffled from: the run's, kept by its
  /// checkpoints.
  uint64_t dataSeed = 0;
  int64_t tokensPerStep = 0;
  /// Training sequences taken from the data: where the next batch starts.
  long long sequences = 0;
  std::vector<int32_t> tokens, targets;
  long long first = 1, last = 0, stoppedAfter = 0, savedStep = 0;
  loom::LrSchedule schedule;
  /// Every step's time and the first's, which allocates the step's buffers
  /// and warms the caches.
  double totalMs = 0, firstMs = 0, lastLoss = 0;
  std::optional<RunDir> runDir;
  MetricsLog log;
  TensorBoardWriter tensorboard;
  Vocabulary vocabulary;
  std::vector<int32_t> prompt;
};

Run::~Run() { loom_model_close(model); }

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
  dataSeed = static_cast<uint64_t>(o.seed);
  if (std::string error = data.open(o, *info, dataSeed); !error.empty())
    return fail(error.c_str());
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
  if (!o.resume.empty()) {
    if (int rc = resume())
      return rc;
  } else if (int rc = loadWeights()) {
    return rc;
  }
  if (!o.out.empty())
    runDir.emplace(o.out);
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
  return 0;
}

int Run::loadWeights() {
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
  sequences = (first - 1) * info->batch;
  return 0;
}

/// Rank 0's `count` integers on every rank.
static int broadcastFromRankZero(const loom_dist_info &dist, long long *values,
                                 int count) {
  if (dist.world_size == 1)
    return 0;
  // As 16-bit words, which the collective moves without looking at them.
  return loom_rt_broadcast(loom_dist_group(LOOM_GROUP_WORLD), LOOM_DTYPE_BF16,
                           values, count * sizeof(long long) / 2, 0);
}

int Run::resume() {
  RunDir from(o.resume);
  // Rank 0 finds the checkpoint and reads its position; the other ranks
  // take its findings, never the file system's.
  long long found[4] = {0, 0, 0, 0};
  if (dist->rank == 0) {
    RunPosition position;
    std::string error = from.newest(position.step);
    if (error.empty())
      error = from.readPosition(position.step, position);
    if (!error.empty())
      return fail(error.c_str());
    found[0] = position.step;
    found[1] = position.sequences;
    found[2] = position.lastStep;
    found[3] = position.dataSeed;
  }
  if (broadcastFromRankZero(*dist, found, 4))
    return fail(loom_last_error());
  // The data is shuffled as the run that wrote the checkpoint shuffled it.
  if (static_cast<uint64_t>(found[3]) != dataSeed && !o.data.empty()) {
    dataSeed = static_cast<uint64_t>(found[3]);
    if (std::string error = data.open(o, *info, dataSeed); !error.empty())
      return fail(error.c_str());
  }
  std::string dir = from.stepPath(found[0]);
  std::string weights = dir + "/" + RunDir::modelFile();
  std::string state = dir + "/" + RunDir::optimizerFile();
  if (loom_model_load_safetensors(model, weights.c_str()) ||
      loom_model_load_optimizer_state(model, state.c_str()))
    return fail(loom_last_error());
  if (loom_model_get_step(model) != found[0]) {
    std::string msg = state + ": holds the state after " +
                      std::to_string(loom_model_get_step(model)) +
                      " steps, and its checkpoint is of step " +
                      std::to_string(found[0]);
    return fail(msg.c_str());
  }
  first = found[0] + 1;
  // --steps is the whole run's last step here: the same command, rerun
  // with --resume, finishes the run it started.
  last = std::max(o.stepsGiven ? o.steps : found[2], found[0]);
  o.steps = last - found[0];
  sequences = found[1];
  if (!o.quiet)
    report("loom-run: resuming from %s: step %lld of %lld\n", dir.c_str(),
           found[0], last);
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
  report("loom-run: %s, %lld parameters, %lld x %lld tokens a step%s, %s\n",
         info->name, static_cast<long long>(info->num_params),
         static_cast<long long>(info->batch),
         static_cast<long long>(info->sequence), split.c_str(),
         data.describe().c_str());
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
  if (const char *kernels = loom_blas_kernels(); *kernels)
    report("loom-run: GEMMs: %s\n", kernels);
  if (info->arena_bytes > 0)
    report("loom-run: the step's buffers: an arena of %lld B, as compiled\n",
           static_cast<long long>(info->arena_bytes));
  if (info->host_bytes > 0)
    report("loom-run: offload: the host keeps and uses %lld B (master "
           "weights, optimizer state, gradients%s and its arena), as "
           "compiled\n",
           static_cast<long long>(info->host_bytes),
           info->param_bytes == 0 ? ", the parameters the device fetches" : "");
}

int Run::nextBatch() {
  std::string error = data.batch(sequences, tokens.data(), targets.data());
  if (!error.empty())
    return fail(error.c_str());
  sequences += info->batch;
  return 0;
}

int Run::validate(long long step, double &loss) {
  double sum = 0;
  for (long long i = 0; i < o.valBatches; ++i) {
    float batchLoss = 0;
    std::string error = data.validationBatch(i, tokens.data(), targets.data());
    if (!error.empty())
      return fail(error.c_str());
    if (loom_model_eval(model, tokens.data(), targets.data(), &batchLoss))
      return fail(loom_last_error());
    sum += batchLoss;
  }
  loss = sum / o.valBatches;
  report("step %5lld | val loss %s\n", step, formatValue(loss).c_str());
  return 0;
}

/// `flops` a step over every rank's peak, at `ms` a step: MFU with the
/// model's FLOPs, HFU with the hardware's (recomputation included).
double Run::flopsFraction(double flops, double ms) const {
  double peak = o.peakTflops * 1e12 * std::max<int64_t>(dist->world_size, 1);
  return flops / (ms * 1e-3) / peak;
}

/// The MFU, and the HFU where the plan recomputes.
std::string Run::mfu(double ms, const char *prefix) const {
  if (o.peakTflops <= 0 || ms <= 0)
    return "";
  char text[96];
  int n = std::snprintf(text, sizeof(text), "%s%.1f%%", prefix,
                        flopsFraction(info->model_flops, ms) * 100.0);
  if (info->hardware_flops != info->model_flops)
    std::snprintf(text + n, sizeof(text) - n, " (HFU %.1f%%)",
                  flopsFraction(info->hardware_flops, ms) * 100.0);
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
  if (step == first)
    firstMs = ms;
  lastLoss = loss;
  // fp16: the scale the step ran with, and whether its gradients
  // overflowed, which left the parameters as they were.
  char scaled[64] = "";
  loom_loss_scale after{};
  if (scaling) {
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
  JsonRecord record("step");
  record.add("step", step)
      .add("loss", static_cast<double>(loss))
      .add("lr", lr)
      .add("grad_norm", static_cast<double>(norm))
      .add("ms", ms)
      .add("tokens_per_s", tokensPerStep / ms * 1e3);
  if (o.peakTflops > 0)
    record.add("mfu", flopsFraction(info->model_flops, ms))
        .add("hfu", flopsFraction(info->hardware_flops, ms));
  record.add("memory_mib", loom_peak_memory_mib())
      .add("tensor_bytes", static_cast<long long>(loom_heap_peak_bytes()));
  if (scaling)
    record.add("loss_scale", static_cast<double>(before.scale))
        .addBool("skipped", after.last_skipped);
  if (o.valEvery > 0 && (step % o.valEvery == 0 || step == last)) {
    double valLoss = 0;
    if (int rc = validate(step, valLoss))
      return rc;
    record.add("val_loss", valLoss);
  }
  if (o.sampleEvery > 0 && (step % o.sampleEvery == 0 || step == last)) {
    std::string text;
    if (int rc = sampleText(step, text))
      return rc;
    if (dist->rank == 0) {
      report("step %5lld | sample:\n%s\n", step, printable(text).c_str());
      record.add("sample", text);
    }
  }
  return logRecord(record);
}

int Run::train() {
  if (!o.trace.empty() && loom_trace_start())
    return fail(loom_last_error());
  installStopHandlers();
  for (long long step = first; step <= last; ++step) {
    if (int rc = trainStep(step))
      return rc;
    if (runDir && o.saveEvery > 0 && step % o.saveEvery == 0 && step < last)
      if (int rc = saveCheckpoint(step))
        return rc;
    if (step < last && stopAgreed(*dist)) {
      stoppedAfter = step;
      o.steps = step - first + 1;
      report("loom-run: %s after step %lld of %lld: stopping%s\n",
             stopSignal == SIGINT ? "interrupted (SIGINT)"
                                  : "terminated (SIGTERM)",
             step, last,
             o.save.empty() && o.saveState.empty() && !runDir
                 ? ""
                 : "; saving what this step left");
      break;
    }
  }
  return 0;
}

int Run::summarize() {
  if (o.steps <= 0)
    return 0;
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
  // The means are of the steps after the first, where there are any.
  long long timed = o.steps > 1 ? o.steps - 1 : o.steps;
  double msPerStep = (o.steps > 1 ? totalMs - firstMs : totalMs) / timed;
  char which[64] = "";
  if (o.steps > 1)
    std::snprintf(which, sizeof(which), " (steps %lld-%lld)", first + 1,
                  first + o.steps - 1);
  std::string utilization = mfu(msPerStep, ", MFU ");
  if (!utilization.empty()) {
    char of[48];
    std::snprintf(of, sizeof(of), " of %g TFLOP/s a rank", o.peakTflops);
    utilization += of;
  }
  // Under offload, the device's figures and the host's apart, and how much
  // of the copies started alongside the step's work it hid.
  double copyMs = loom_started_transfer_seconds() * 1e3 / o.steps;
  double waitMs = loom_transfer_wait_seconds() * 1e3 / o.steps;
  char host[288] = "";
  if (loom_heap_host_peak_bytes() > 0) {
    int n = std::snprintf(
        host, sizeof(host),
        "; host tensors %lld B, the host step's buffers %lld B, "
        "%lld B a step between host and device",
        static_cast<long long>(loom_heap_host_peak_bytes()),
        static_cast<long long>(loom_heap_host_step_peak_bytes()),
        static_cast<long long>(loom_transferred_bytes() / o.steps));
    if (copyMs > 0)
      std::snprintf(host + n, sizeof(host) - n,
                    ", copies started alongside the step %.2f ms a step, "
                    "%.2f ms of it waited for",
                    copyMs, waitMs);
  }
  report("loom-run: %lld steps%s, final loss %s, %.2f ms/step%s, %.0f "
         "tok/s%s, peak memory %.1f MiB (%stensors %lld B, the step's "
         "buffers %lld B%s)%s\n",
         o.steps, scaled, formatValue(lastLoss).c_str(), msPerStep, which,
         tokensPerStep / msPerStep * 1e3, utilization.c_str(),
         loom_peak_memory_mib(), *host ? "device " : "",
         static_cast<long long>(loom_heap_peak_bytes()),
         static_cast<long long>(loom_heap_step_peak_bytes()), host, comm);
  JsonRecord record("summary");
  record.add("steps", o.steps)
      .add("final_loss", lastLoss)
      .add("ms_per_step", msPerStep)
      .add("tokens_per_s", tokensPerStep / msPerStep * 1e3)
      .add("timed_steps", timed);
  if (o.peakTflops > 0)
    record.add("mfu", flopsFraction(info->model_flops, msPerStep))
        .add("hfu", flopsFraction(info->hardware_flops, msPerStep));
  record.add("memory_mib", loom_peak_memory_mib())
      .add("tensor_bytes", static_cast<long long>(loom_heap_peak_bytes()));
  if (copyMs > 0)
    record.add("started_copies_ms_per_step", copyMs)
        .add("copy_waits_ms_per_step", waitMs);
  if (stoppedAfter)
    record.add("stopped_after", stoppedAfter);
  return logRecord(record);
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
  // The run directory gets the last step's checkpoint, unless the run
  // trained none or --save-every has just written it.
  long long step = loom_model_get_step(model);
  if (runDir && step >= first && step != savedStep)
    return saveCheckpoint(step);
  return 0;
}

int Run::saveCheckpoint(long long step) {
  if (dist->rank == 0) {
    std::string error = runDir->create();
    if (error.empty())
      error = runDir->begin(step);
    if (!error.empty())
      return fail(error.c_str());
  }
  std::string partial = runDir->partialPath(step);
  std::string weights = partial + "/" + RunDir::modelFile();
  std::string state = partial + "/" + RunDir::optimizerFile();
  if (loom_model_export_safetensors(model, weights.c_str()) ||
      loom_model_save_optimizer_state(model, state.c_str()))
    return fail(loom_last_error());
  if (dist->rank == 0) {
    RunPosition position;
    position.step = step;
    position.sequences = sequences;
    position.lastStep = last;
    position.dataSeed = static_cast<long long>(dataSeed);
    std::string error = runDir->commit(position, o.keepLast);
    if (!error.empty())
      return fail(error.c_str());
  }
  savedStep = step;
  if (!o.quiet)
    report("step %5lld | saved %s\n", step, runDir->stepPath(step).c_str());
  return 0;
}

int Run::startLog() {
  if (dist->rank != 0)
    return 0;
  if (!o.tensorboard.empty())
    if (std::string error = tensorboard.open(o.tensorboard); !error.empty())
      return fail(error.c_str());
  std::string path = o.log;
  if (path.empty() && runDir) {
    // The run directory holds its log unless --log puts it elsewhere.
    if (std::string error = runDir->create(); !error.empty())
      return fail(error.c_str());
    path = runDir->directory() + "/log.jsonl";
  }
  if (path.empty())
    return 0;
  // A resumed run goes on with the log of the run it continues.
  if (std::string error = log.open(path, !o.resume.empty()); !error.empty())
    return fail(error.c_str());
  JsonRecord config("config");
  config.add("model", info->name)
      .add("artifact", o.artifact)
      .add("params", static_cast<long long>(info->num_params))
      .add("batch", static_cast<long long>(info->batch))
      .add("sequence", static_cast<long long>(info->sequence))
      .add("tokens_per_step", static_cast<long long>(tokensPerStep))
      .add("ranks", static_cast<long long>(dist->world_size))
      .add("pp", static_cast<long long>(info->pp))
      .add("dp", static_cast<long long>(info->dp))
      .add("tp", static_cast<long long>(info->tp))
      .add("zero", static_cast<long long>(info->zero))
      .add("micro_batches", static_cast<long long>(info->micro_batches))
      .add("optimizer", info->optimizer)
      .add("data", o.data)
      .add("first_step", first)
      .add("last_step", last)
      .add("lr", schedule.peak)
      .add("min_lr", schedule.final)
      .add("warmup_steps", schedule.warmup)
      .add("lr_schedule", loom::lrDecayName(schedule.decay))
      .add("lr_decay_end", schedule.last)
      .add("seed", o.seed)
      .add("data_seed", static_cast<long long>(dataSeed));
  if (o.peakTflops > 0)
    config.add("peak_tflops", o.peakTflops);
  return logRecord(config);
}

int Run::logRecord(const JsonRecord &record) {
  std::string error = log.write(record);
  if (error.empty() && tensorboard.isOpen() && record.type() == "step") {
    // The step's figures under the log's names, but the step itself.
    std::vector<std::pair<std::string, double>> scalars;
    int64_t step = 0;
    for (const auto &field : record.numbers())
      if (field.first == "step")
        step = static_cast<int64_t>(field.second);
      else
        scalars.push_back(field);
    error = tensorboard.write(step, scalars);
  }
  return error.empty() ? 0 : fail(error.c_str());
}
/// Token ids written "1,2,3" into `tokens`; false for anything else.
static bool parseTokenList(const std::string &text,
                           std::vector<int32_t> &tokens) {
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = std::min(text.find(',', at), text.size());
    char *end = nullptr;
    std::string item = text.substr(at, comma - at);
    errno = 0;
    long long value = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end || errno || value < 0 || value > INT32_MAX)
      return false;
    tokens.push_back(static_cast<int32_t>(value));
    at = comma + 1;
  }
  return !tokens.empty();
}

int Run::prepareSampling() {
  if (o.sampleEvery == 0 && !o.generate)
    return 0;
  if (!info->logits_rows) {
    std::string msg = o.artifact +
                      ": compiled without --logits, so nothing samples from "
                      "it: compile it with loomc --logits";
    return fail(msg.c_str());
  }
  // The vocabulary: --vocab, a data directory's, or bytes.
  std::string table = o.vocab;
  struct stat status;
  if (table.empty() && !o.data.empty() &&
      ::stat(o.data.c_str(), &status) == 0 && S_ISDIR(status.st_mode) &&
      ::stat((o.data + "/vocab.hex").c_str(), &status) == 0)
    table = o.data + "/vocab.hex";
  if (!table.empty()) {
    if (std::string error = vocabulary.read(table); !error.empty())
      return fail(error.c_str());
    if (vocabulary.size() > info->vocab) {
      std::string msg =
          table + ": a vocabulary of " + std::to_string(vocabulary.size()) +
          " tokens, more than the model's " + std::to_string(info->vocab);
      return fail(msg.c_str());
    }
  }
  if (!o.promptTokens.empty()) {
    if (!parseTokenList(o.promptTokens, prompt))
      return fail(("--prompt-tokens '" + o.promptTokens +
                   "': not token ids separated by commas")
                      .c_str());
  } else if (!o.prompt.empty()) {
    if (int rc = encodePrompt(table))
      return rc;
  } else {
    // Where documents start: after the end-of-text token, or a newline.
    prompt = {vocabulary.isBytes() ? int32_t('\n') % int32_t(info->vocab)
                                   : vocabulary.endOfText()};
  }
  for (int32_t token : prompt)
    if (token >= info->vocab) {
      std::string msg = "the prompt's token " + std::to_string(token) +
                        " is outside the model's vocabulary of " +
                        std::to_string(info->vocab);
      return fail(msg.c_str());
    }
  if (static_cast<int64_t>(prompt.size()) > info->sequence) {
    std::string msg = "the prompt is " + std::to_string(prompt.size()) +
                      " tokens, more than the model's context of " +
                      std::to_string(info->sequence);
    return fail(msg.c_str());
  }
  return 0;
}

int Run::encodePrompt(const std::string &table) {
  if (vocabulary.isBytes()) {
    if (info->vocab < 256)
      return fail("--prompt reads text as bytes, and this model's "
                  "vocabulary is under 256 tokens: give --prompt-tokens");
    prompt = vocabulary.encodeBytes(o.prompt);
    return 0;
  }
  // A tokenizer's vocabulary: its merges beside it (prepare-data.py writes
  // them for byte-level BPE with GPT-2's pre-tokenizer).
  std::string bpePath =
      table.substr(0, table.find_last_of('/') + 1) + "bpe.txt";
  struct stat status;
  if (::stat(bpePath.c_str(), &status) != 0) {
    std::string msg =
        "--prompt needs the tokenizer's merges, " + bpePath +
        ", which scripts/prepare-data.py writes for byte-level BPE "
        "tokenizers with GPT-2's pre-tokenizer: give --prompt-tokens "
        "(scripts/tokenize-text.py DATA TEXT prints them)";
    return fail(msg.c_str());
  }
  BpeEncoder bpe;
  if (std::string error = bpe.read(bpePath, vocabulary.tokenBytes());
      !error.empty())
    return fail(error.c_str());
  if (std::string error = bpe.encode(o.prompt, prompt); !error.empty())
    return fail(("--prompt: " + error).c_str());
  return 0;
}

int Run::sampleText(long long step, std::string &text) {
  // Where each rank holds the whole model, rank 0 samples alone. Under
  // ZeRO-3 the scores gather the replicas' shards, under tensor
  // parallelism the ranks' columns, and under pipeline parallelism the last
  // stage sends them on: every rank makes the same calls, and rank 0's
  // text is the one printed.
  if (dist->rank != 0 && info->zero < 3 && info->tp == 1 && info->pp == 1)
    return 0;
  SampleSettings settings;
  settings.temperature = o.temperature;
  settings.topK = o.topK;
  settings.seed = static_cast<uint64_t>(o.seed) * 0x9e3779b97f4a7c15ULL ^
                  static_cast<uint64_t>(step);
  std::vector<int32_t> tokens = prompt;
  if (std::string error =
          sample(model, *info, settings, o.sampleTokens, tokens);
      !error.empty())
    return fail(error.c_str());
  text = vocabulary.decode(tokens);
  return 0;
}

int Run::generate() {
  std::string text;
  if (int rc = sampleText(loom_model_get_step(model), text))
    return rc;
  if (dist->rank == 0) {
    std::fputs(printable(text).c_str(), stdout);
    std::fputs("\n", stdout);
    std::fflush(stdout);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  loom_select_blas_kernels(argv);
  Options o;
  if (int rc = parseArgs(argc, argv, o))
    return rc;
  int status;
  {
    Run run(o);
    if (int rc = run.openModel())
      return rc;
    // Generating reads no data, but for its vocabulary.
    if (!(o.generate && o.data.empty()))
      if (int rc = run.openData())
        return rc;
    if (int rc = run.startWeights())
      return rc;
    if (int rc = run.prepareSampling())
      return rc;
    if (o.generate) {
      if (int rc = run.generate())
        return rc;
      loom_dist_finalize();
      return 0;
    }
    run.describe();
    if (int rc = run.startLog())
      return rc;
    if (int rc = run.train())
      return rc;
    if (int rc = run.summarize())
      return rc;
    if (int rc = run.writeOutputs())
      return rc;
    status = run.status();
  }
  loom_dist_finalize();
  return status;
}
