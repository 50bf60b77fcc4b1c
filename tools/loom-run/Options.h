//===- Options.h - loom-run's command line ----------------------*- C++ -*-===//
//
// The flags docs/loom-run.md lists, parsed and checked before anything
// runs: a bad value is echoed with what was expected, and an output that
// could not be written is found before the first step.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOMRUN_OPTIONS_H
#define LOOM_TOOLS_LOOMRUN_OPTIONS_H

#include "LrSchedule.h"

#include <string>

namespace loom {

struct Options {
  std::string artifact, data, valData, load, save, exportSafetensors, loadState,
      saveState, trace, log, tensorboard;
  /// The run directory (--out) periodic checkpoints go into, and the one
  /// --resume continues from (then also --out's default).
  std::string out, resume;
  /// Sampling (--sample-every, --generate): the prompt as text or token
  /// ids, and the vocabulary that turns tokens into text.
  std::string prompt, promptTokens, vocab;
  long long steps = 100, seed = 1337, valEvery = 0, valBatches = 4, threads = 0,
            lossScaleWindow = 2000, saveEvery = 0, keepLast = 3,
            sampleEvery = 0, sampleTokens = 64, topK = 0;
  double temperature = 1.0;
  double lr = -1, minLr = -1, valFraction = 0.1, lossScale = 65536,
         peakTflops = 0;
  long long warmupSteps = 0, lrDecayEnd = 0;
  LrDecay lrDecay = LrDecay::Constant;
  bool quiet = false, verboseRanks = false, lossScaleGiven = false,
       allowNonfinite = false, stepsGiven = false, seedGiven = false,
       dataBytes = false, generate = false;
};

/// Fills `o` from the command line; 0, or the exit status after printing
/// the error (or the usage, for --help, which exits).
int parseArgs(int argc, char **argv, Options &o);

/// Why a file could not be written at `path` (given with `flag`), or ""
/// if it can: checked before training, so that a run does not end by
/// losing its checkpoint. The file is written as `path`.partial next to it
/// and renamed, or directly into a path that is not a regular file
/// (/dev/null).
std::string unwritable(const std::string &path, const char *flag);

/// The directory part of `path`: "." for a bare name.
std::string parentDirectory(const std::string &path);

} // namespace loom

#endif // LOOM_TOOLS_LOOMRUN_OPTIONS_H
