//===- SafetensorsFuzzer.cpp - Fuzzing the safetensors reader -------------===//
//
// Any bytes as a safetensors file for a small Llama-family model read from
// its manifest alone (corpus/manifest/micro-qwen2: a fused q/k/v projection
// with grouped key/value heads and biases, whose Hugging Face tensors
// interleave).
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
  loom_model_load_safetensors(model(), loom::fuzz::writeInput(data, size));
  return 0;
}
