//===- CheckpointFuzzer.cpp - Fuzzing the llm.c checkpoint reader ---------===//
//
// Any bytes as a checkpoint (and as an optimizer state file) for a small
// model read from its manifest alone (corpus/manifest/micro-gpt).
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
  const char *path = loom::fuzz::writeInput(data, size);
  loom_model_load_checkpoint(model(), path);
  loom_model_load_optimizer_state(model(), path);
  return 0;
}
