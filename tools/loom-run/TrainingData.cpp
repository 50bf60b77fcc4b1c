//===- TrainingData.cpp - Where loom-run's batches come from --------------===//

#include "TrainingData.h"

#include <cstring>

#include <sys/stat.h>

using namespace loom;

namespace {
bool isDirectory(const std::string &path) {
  struct stat status;
  return ::stat(path.c_str(), &status) == 0 && S_ISDIR(status.st_mode);
}

/// Whether `spec` names shards: a directory or a glob pattern.
bool namesShards(const std::string &spec) {
  struct stat status;
  if (::stat(spec.c_str(), &status) == 0)
    return S_ISDIR(status.st_mode);
  return spec.find_first_of("*?[") != std::string::npos;
}
} // namespace

TrainingData::~TrainingData() { close(); }

void TrainingData::close() {
  loom_dataset_close(file);
  loom_loader_close(train);
  loom_loader_close(validation);
  file = nullptr;
  train = validation = nullptr;
  cursor = taken = 0;
}

std::string TrainingData::open(const Options &o, const loom_model_info &info,
                               uint64_t seed) {
  close();
  batchSize = info.batch;
  sequence = info.sequence;
  bool validating = o.valEvery > 0;
  if (namesShards(o.data)) {
    if (o.dataBytes)
      return o.data + " (--data): --data-bytes reads one file as bytes, not "
                      "a directory or pattern of shards";
    train = loom_loader_open(o.data.c_str(), "train", info.vocab, sequence,
                             /*shuffle=*/1, seed);
    if (!train)
      return loom_last_error();
    // A directory holds its validation shards; a pattern names none.
    if (validating && o.valData.empty() && !isDirectory(o.data))
      return o.data + " (--data): a pattern names no validation shards: give "
                      "--val-data with --val-every";
  } else {
    file = o.dataBytes ? loom_dataset_open_bytes(o.data.c_str(), info.vocab)
                       : loom_dataset_open(o.data.c_str(), info.vocab);
    if (!file)
      return loom_last_error();
    size = loom_dataset_size(file);
    // Validation shards of their own leave the whole file to training.
    valBegin = o.valData.empty()
                   ? size - static_cast<int64_t>(size * o.valFraction)
                   : size;
    int64_t need = sequence + 1;
    if (valBegin < need ||
        (validating && o.valData.empty() && size - valBegin < need))
      return (o.data + ": " + std::to_string(size) +
              " tokens are too few: training and validation each "
              "need at least " +
              std::to_string(need) + " (sequence + 1)");
  }
  if (validating && (train || !o.valData.empty())) {
    std::string spec = o.valData.empty() ? o.data : o.valData;
    validation = loom_loader_open(spec.c_str(), "val", info.vocab, sequence,
                                  /*shuffle=*/0, seed);
    if (!validation)
      return loom_last_error();
  }
  return "";
}

std::string TrainingData::batch(int64_t first, int32_t *tokens,
                                int32_t *targets) {
  if (train)
    return loom_loader_batch(train, first, batchSize, tokens, targets)
               ? loom_last_error()
               : "";
  // One file's windows follow each other from a cursor: a run that starts
  // elsewhere (resumed) passes over those before it.
  if (first < taken) {
    cursor = 0;
    taken = 0;
  }
  if (loom_dataset_skip(file, 0, valBegin, &cursor, first - taken, sequence) ||
      loom_dataset_batch(file, 0, valBegin, &cursor, batchSize, sequence,
                         tokens, targets))
    return loom_last_error();
  taken = first + batchSize;
  return "";
}

std::string TrainingData::validationBatch(int64_t index, int32_t *tokens,
                                          int32_t *targets) {
  int64_t at = valBegin;
  bool failed =
      validation ? loom_loader_batch(validation, index * batchSize, batchSize,
                                     tokens, targets)
                 : loom_dataset_skip(file, valBegin, size, &at,
                                     index * batchSize, sequence) ||
                       loom_dataset_batch(file, valBegin, size, &at, batchSize,
                                          sequence, tokens, targets);
  return failed ? loom_last_error() : "";
}

std::string TrainingData::describe() const {
  if (train) {
    int64_t files = loom_loader_files(train);
    std::string text = std::to_string(loom_loader_tokens(train)) +
                       " tokens in " + std::to_string(files) +
                       (files == 1 ? " shard" : " shards") +
                       ", shuffled each epoch of " +
                       std::to_string(loom_loader_windows(train)) + " windows";
    if (validation)
      text += ", " + std::to_string(loom_loader_tokens(validation)) +
              " to validate on";
    return text;
  }
  std::string text = std::to_string(size) +
                     (loom_dataset_is_shard(file) ? " shard" : " text") +
                     " tokens";
  if (validation)
    return text + ", " + std::to_string(loom_loader_tokens(validation)) +
           " to validate on";
  return text + " (" + std::to_string(size - valBegin) + " held out)";
}
