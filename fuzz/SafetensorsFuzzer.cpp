//===- SafetensorsFuzzer.cpp - Fuzzing the safetensors reader -------------===//
//
// Any bytes as a safetensors file for a small Llama-family model read from
// its manifest alone (corpus/manifest/micro-qwen2: a fused q/k/v projection
// with grouped key/value heads and biases, whose Hugging Face tensors
// interleave).
//
//===----------------------------------------------------------------------===//

#include "FuzzFile.h"
#include "Manifest.h"

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

static loom_model *model() {
  static loom_model *micro = [] {
    std::ifstream file(LOOM_FUZZ_MANIFEST);
    std::string text((std::istreambuf_iterator<char>(file)),
                     std::istreambuf_iterator<char>());
    loom_model *m = loom::openManifest(text.c_str(), /*layout=*/true);
    if (!m) {
      std::fprintf(stderr, "%s: %s\n", LOOM_FUZZ_MANIFEST, loom_last_error());
      std::abort();
    }
    return m;
  }();
  return micro;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  loom_model_load_safetensors(model(), loom::fuzz::writeInput(data, size));
  return 0;
}
