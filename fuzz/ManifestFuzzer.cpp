//===- ManifestFuzzer.cpp - Fuzzing the artifact manifest reader ----------===//
//
// Any text as an artifact's manifest (docs/artifact.md), read and checked as
// loom_model_open does after loading the code; a small model's tensors are
// laid out and allocated too.
//
//===----------------------------------------------------------------------===//

#include "Manifest.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  loom_model *model = loom::openManifest(text.c_str(), /*layout=*/false);
  if (!model)
    return 0;
  // Laying out a model the manifest makes large would only measure the
  // machine's memory.
  const loom_model_info *info = loom_model_get_info(model);
  double floats = static_cast<double>(info->layers) * 16 * info->width *
                      (info->width + info->hidden) +
                  static_cast<double>(info->padded_vocab + info->positions) *
                      info->width * 2;
  loom_model_close(model);
  if (floats < (1 << 24))
    if (loom_model *laidOut = loom::openManifest(text.c_str(), true))
      loom_model_close(laidOut);
  return 0;
}
