//===- TokenShardFuzzer.cpp - Fuzzing the token shard reader --------------===//
//
// Any bytes as training data (an llm.c token shard, or text), opened for
// GPT-2's vocabulary and cut into one batch, as loom-run does.
//
//===----------------------------------------------------------------------===//

#include "FuzzFile.h"

#include "loom/runtime.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = loom::fuzz::writeInput(data, size);
  loom_dataset *dataset = loom_dataset_open(path, 50257);
  if (!dataset)
    return 0;
  int64_t cursor = 0, tokens = loom_dataset_size(dataset);
  int32_t batch[2 * 4], targets[2 * 4];
  loom_dataset_batch(dataset, 0, tokens, &cursor, 2, 4, batch, targets);
  loom_dataset_close(dataset);
  return 0;
}
