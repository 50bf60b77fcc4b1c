//===- Options.cpp - loom-run's command line ------------------------------===//

#include "Options.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include <sys/stat.h>
#include <unistd.h>

using namespace loom;

namespace {
const char *const kUsage =
    "usage: loom-run ARTIFACT --data DATA [options]\n"
    "\n"
    "Trains the model compiled into ARTIFACT (by loomc) on FILE, an llm.c\n"
    "token shard or any other file read as bytes (vocabulary 256).\n"
    "\n"
    "  --data DATA         training data: a file, or a directory or glob\n"
    "                      pattern of token shards (prepare-data.py's),\n"
    "                      shuffled each epoch from --seed\n"
    "  --data-bytes        read a --data file as bytes whatever it holds (a\n"
    "                      file that starts like a damaged token shard is\n"
    "                      refused otherwise)\n"
    "  --val-data DATA     validation data: a file, directory or pattern\n"
    "                      (default: the --data directory's val shards, or\n"
    "                      the last --val-fraction of a --data file)\n"
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
    "  --log FILE          one JSON line per step (loss, validation loss,\n"
    "                      learning rate, norm, time, throughput, memory)\n"
    "                      after the run's configuration; scripts/plot.py\n"
    "                      draws it (default with --out: DIR/log.jsonl)\n"
    "  --tensorboard DIR   the step lines' figures as TensorBoard scalars,\n"
    "                      in a new event file in DIR\n"
    "\n"
    "Sampling (an artifact compiled with loomc --logits):\n"
    "  --sample-every N    print text the model generates every N steps\n"
    "  --generate          generate instead of training (after --load or\n"
    "                      --resume), print it and exit\n"
    "  --sample-tokens K   tokens to generate (default 64)\n"
    "  --prompt TEXT       the text to continue (bytes, or the data's BPE)\n"
    "  --prompt-tokens L   the token ids to continue, comma-separated\n"
    "                      (scripts/tokenize-text.py DATA TEXT prints them)\n"
    "                      (default: the data's end-of-text token, or a\n"
    "                      newline for bytes)\n"
    "  --temperature X     0 for the most likely token each time (default\n"
    "                      1: the model's distribution)\n"
    "  --top-k K           draw among the K most likely only (default 0:\n"
    "                      all)\n"
    "  --vocab FILE        the tokens' bytes (default: vocab.hex of the\n"
    "                      --data directory; bytes for 256 tokens)\n"
    "\n"
    "A run directory:\n"
    "  --out DIR           write checkpoints into DIR/step-NNNNNNNN (the\n"
    "                      weights, the optimizer state and the data\n"
    "                      position), each complete or not there at all:\n"
    "                      after the last step, and with --save-every\n"
    "  --save-every N      also after every N-th step\n"
    "  --keep-last K       keep the newest K checkpoints (default 3)\n"
    "  --resume DIR        continue from DIR's newest checkpoint, under this\n"
    "                      artifact's plan, whatever wrote it: --steps is\n"
    "                      then the run's last step (default: the one the\n"
    "                      run that saved it was to reach)\n"
    "\n"
    "An artifact compiled for several ranks runs under mpirun, one loom-run\n"
    "per rank: mpirun -np N loom-run ARTIFACT --data FILE. The job's size\n"
    "must be the plan's pp * dp * tp.\n";

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

/// The run directory's flags together: --save-every writes into --out,
/// which --resume gives by default; --resume takes the weights and the
/// optimizer state from there, which --load and --load-state would too.
int checkRunDirectory(Options &o) {
  if (!o.resume.empty()) {
    if (!o.load.empty() || !o.loadState.empty())
      return usageError("--resume takes the weights and the optimizer state "
                        "from its run directory: give neither --load nor "
                        "--load-state with it");
    if (o.out.empty())
      o.out = o.resume;
  }
  if (o.saveEvery > 0 && o.out.empty())
    return usageError("--save-every needs a run directory to write into: "
                      "--out DIR (or --resume DIR)");
  if (o.out.empty())
    return 0;
  // The directory may be made by the first save: its parent must exist.
  struct stat status;
  bool exists = ::stat(o.out.c_str(), &status) == 0;
  std::string why;
  if (exists && !S_ISDIR(status.st_mode))
    why = o.out + " (--out): is not a directory";
  else if (exists && ::access(o.out.c_str(), W_OK | X_OK) != 0)
    why = o.out + " (--out): cannot write in the run directory: " +
          std::strerror(errno);
  else if (!exists)
    why = unwritable(o.out, "--out");
  if (!why.empty()) {
    std::fprintf(stderr, "loom-run: error: %s\n", why.c_str());
    return 1;
  }
  return 0;
}
} // namespace

std::string loom::parentDirectory(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "."
         : slash == 0               ? "/"
                                    : path.substr(0, slash);
}

std::string loom::unwritable(const std::string &path, const char *flag) {
  struct stat status;
  if (::stat(path.c_str(), &status) == 0) {
    if (S_ISDIR(status.st_mode))
      return path + " (" + flag + "): is a directory";
    // Opening one waits for a reader, maybe forever, after the training.
    if (S_ISFIFO(status.st_mode) || S_ISSOCK(status.st_mode))
      return path + " (" + flag + "): is a " +
             (S_ISFIFO(status.st_mode) ? "FIFO" : "socket") +
             ", whose opening would wait for a reader: give a regular file";
    if (!S_ISREG(status.st_mode))
      return ::access(path.c_str(), W_OK) == 0
                 ? ""
                 : path + " (" + flag +
                       "): cannot write: " + std::strerror(errno);
  }
  std::string dir = parentDirectory(path);
  if (::stat(dir.c_str(), &status) != 0 || !S_ISDIR(status.st_mode))
    return path + " (" + flag + "): no directory " + dir;
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return path + " (" + flag + "): cannot write in " + dir + ": " +
           std::strerror(errno);
  return "";
}

int loom::parseArgs(int argc, char **argv, Options &o) {
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
      path("--val-data", o.valData),
      path("--load", o.load),
      path("--save", o.save),
      path("--load-state", o.loadState),
      path("--save-state", o.saveState),
      path("--export-safetensors", o.exportSafetensors),
      path("--trace", o.trace),
      path("--log", o.log),
      path("--tensorboard", o.tensorboard),
      path("--out", o.out),
      path("--resume", o.resume),
      path("--prompt", o.prompt),
      path("--prompt-tokens", o.promptTokens),
      path("--vocab", o.vocab),
      integer("--sample-every", o.sampleEvery, 0),
      integer("--sample-tokens", o.sampleTokens, 1, 1 << 20),
      integer("--top-k", o.topK, 0),
      real("--temperature", o.temperature, 0.0, 100.0),
      integer("--save-every", o.saveEvery, 1),
      integer("--keep-last", o.keepLast, 1),
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
    if (a == "--generate") {
      o.generate = true;
      continue;
    }
    if (a == "--data-bytes") {
      o.dataBytes = true;
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
        return usageError(
            a +
            (flag->path == &o.prompt || flag->path == &o.promptTokens
                 ? " needs a value"
                 : " needs a file name") +
            ", got an empty one");
      if (flag->real == &o.lossScale || flag->integer == &o.lossScaleWindow)
        o.lossScaleGiven = true;
      o.stepsGiven |= flag->integer == &o.steps;
      o.seedGiven |= flag->integer == &o.seed;
      continue;
    }
    if (!o.artifact.empty())
      return usageError("more than one artifact given (" + a + ")");
    o.artifact = a;
  }
  if (o.artifact.empty())
    return usageError("no artifact given");
  if (o.data.empty() && !o.generate)
    return usageError("no --data given");
  // Standard output holds the text alone.
  if (o.generate)
    o.quiet = true;
  if (!o.prompt.empty() && !o.promptTokens.empty())
    return usageError("--prompt and --prompt-tokens both give the prompt: "
                      "give one");
  if (int rc = checkRunDirectory(o))
    return rc;
  for (auto [path, flag] :
       {std::pair<const std::string &, const char *>{o.save, "--save"},
        {o.saveState, "--save-state"},
        {o.exportSafetensors, "--export-safetensors"},
        {o.trace, "--trace"},
        {o.log, "--log"}})
    if (!path.empty()) {
      std::string why = unwritable(path, flag);
      if (!why.empty()) {
        std::fprintf(stderr, "loom-run: error: %s\n", why.c_str());
        return 1;
      }
    }
  return 0;
}
