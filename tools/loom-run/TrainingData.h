//===- TrainingData.h - Where loom-run's batches come from ------*- C++ -*-===//
//
// --data names one file, whose last --val-fraction is held out and whose
// windows are taken in order, or a directory or a pattern of shards,
// read through the runtime's loom_loader: shuffled per epoch, validated on
// the directory's val shards or --val-data's. Either way the k-th training
// window is a function of k, which is the position a checkpoint records.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOMRUN_TRAININGDATA_H
#define LOOM_TOOLS_LOOMRUN_TRAININGDATA_H

#include "Options.h"
#include "loom/runtime.h"

#include <cstdint>
#include <string>

namespace loom {

class TrainingData {
public:
  TrainingData() = default;
  TrainingData(const TrainingData &) = delete;
  TrainingData &operator=(const TrainingData &) = delete;
  ~TrainingData();

  /// Opens --data (and --val-data) for batches of `batch` windows of the
  /// model's sequence; a directory's or pattern's windows are shuffled from
  /// `seed`; opened again, with another seed. Each returns "" or what went
  /// wrong.
  std::string open(const Options &o, const loom_model_info &info,
                   uint64_t seed);
  /// Fills a training batch starting at window `first` of the run.
  std::string batch(int64_t first, int32_t *tokens, int32_t *targets);
  /// Fills the `index`-th validation batch, from the start of the held-out
  /// data.
  std::string validationBatch(int64_t index, int32_t *tokens, int32_t *targets);
  /// What the run trains on, for its first line: "35149 text tokens (3514
  /// held out)", "1000000 tokens in 4 shards, shuffled".
  std::string describe() const;

private:
  void close();

  int64_t batchSize = 0, sequence = 0;
  // One file, its windows in order from `cursor`, `taken` of them so far.
  loom_dataset *file = nullptr;
  int64_t size = 0, valBegin = 0, cursor = 0, taken = 0;
  // Shards.
  loom_loader *train = nullptr, *validation = nullptr;
};

} // namespace loom

#endif // LOOM_TOOLS_LOOMRUN_TRAININGDATA_H
