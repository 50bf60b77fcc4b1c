//===- ModelJsonFuzzer.cpp - Fuzzing the model description reader ---------===//
//
// Any bytes as a model description (docs/model-format.md): read, checked and
// completed as loomc does, which must end in a config or in errors, never in
// a crash, a hang or unbounded memory.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ModelConfig.h"

#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace mlir::loom;
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  ConfigDiagnostics diag("fuzz.json", llvm::nulls());
  if (std::optional<ModelConfig> config = parseModelConfig(text, diag))
    finalizeModelConfig(*config, diag);
  return 0;
}
