//===- TensorBoard.h - Step metrics as TensorBoard event files --*- C++ -*-===//
//
// `--tensorboard DIR` (docs/metrics.md): each step record's numbers as
// TensorBoard scalars, in an event file of the directory, which
// `tensorboard --logdir DIR` shows while the run goes on. The file is
// TFRecord framing around `tensorflow.Event` protocol buffers, written here
// by hand: the format is small and stable, and the runtime needs no
// protobuf library for it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOMRUN_TENSORBOARD_H
#define LOOM_TOOLS_LOOMRUN_TENSORBOARD_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace loom {

class TensorBoardWriter {
public:
  TensorBoardWriter() = default;
  TensorBoardWriter(const TensorBoardWriter &) = delete;
  TensorBoardWriter &operator=(const TensorBoardWriter &) = delete;
  ~TensorBoardWriter();

  /// Creates `directory` where it does not exist and a new event file in
  /// it (a resumed run adds one; TensorBoard reads them all); "" or why
  /// not.
  std::string open(const std::string &directory);
  bool isOpen() const { return file != nullptr; }
  /// Writes and flushes one event of `scalars` at `step`; "" or why not.
  std::string write(int64_t step,
                    const std::vector<std::pair<std::string, double>> &scalars);

private:
  std::string writeEvent(const std::string &event);

  std::string path;
  std::FILE *file = nullptr;
};

} // namespace loom

#endif // LOOM_TOOLS_LOOMRUN_TENSORBOARD_H
