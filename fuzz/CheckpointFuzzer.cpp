//===- CheckpointFuzzer.cpp - Fuzzing the llm.c checkpoint reader ---------===//
//
// Any bytes as a checkpoint (and as an optimizer state file) for a small
// model read from its manifest alone (corpus/manifest/micro-gpt).
//
//===----------------------------------------------------------------------===//

#include "FuzzFile.h"

#include <cstddef>
#include <cstdint>

static loom_model *model() {
  static loom_model *micro = loom::fuzz::openModel(LOOM_FUZZ_MANIFEST);
  return micro;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = loom::fuzz::writeInput(data, size);
  loom_model_load_checkpoint(model(), path);
  loom_model_load_optimizer_state(model(), path);
  return 0;
}
