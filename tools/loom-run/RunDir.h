//===- RunDir.h - A run directory's periodic checkpoints --------*- C++ -*-===//
//
// `--out DIR` holds a training run's checkpoints, one directory per saved
// step (docs/loom-run.md):
//
//   DIR/step-00000100/model.safetensors  the weights, Hugging Face names
//   DIR/step-00000100/optimizer.bin      optimizer state and step count
//   DIR/step-00000100/position           the data position, the run's end
//
// A checkpoint is written into DIR/.step-00000100.partial and renamed when
// every file in it is on disk, so a process killed at any moment leaves
// either a complete step directory or a partial one that resuming ignores.
// Rank 0 alone touches the file system; these functions are its.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOMRUN_RUNDIR_H
#define LOOM_TOOLS_LOOMRUN_RUNDIR_H

#include <string>

namespace loom {

/// What a checkpoint's `position` file records besides its step: the
/// training sequences taken from the data so far, which the next batch
/// follows, the seed the data is shuffled from, and the last step the run
/// that wrote it was to train.
struct RunPosition {
  long long step = 0, sequences = 0, dataSeed = 0, lastStep = 0;
};

class RunDir {
public:
  explicit RunDir(std::string path) : path(std::move(path)) {}

  const std::string &directory() const { return path; }
  /// The files of the checkpoint being written (`partial`) or of a
  /// complete one.
  std::string partialPath(long long step) const;
  std::string stepPath(long long step) const;
  static const char *modelFile() { return "model.safetensors"; }
  static const char *optimizerFile() { return "optimizer.bin"; }

  /// Creates the run directory when it does not exist (its parent must);
  /// "" or why not.
  std::string create() const;
  /// The newest complete checkpoint's step into `step`: "" or why there is
  /// none (no such directory, no complete step directory in it).
  std::string newest(long long &step) const;
  /// Reads a complete checkpoint's position file: "" or what is wrong.
  std::string readPosition(long long step, RunPosition &position) const;

  /// Makes a fresh, empty partial directory for `step`; "" or why not.
  std::string begin(long long step) const;
  /// Writes the position into the partial directory, flushes its files to
  /// the disk and renames it into place, replacing an older checkpoint of
  /// the same step; then removes all but the newest `keep` complete ones.
  std::string commit(const RunPosition &position, long long keep) const;

private:
  std::string path;
};

} // namespace loom

#endif // LOOM_TOOLS_LOOMRUN_RUNDIR_H
