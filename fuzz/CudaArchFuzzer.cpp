//===- CudaArchFuzzer.cpp - Fuzzing loomc's --cuda-arch check -------------===//
//
// Any bytes as a --cuda-arch value: loomc checks it before any pass runs,
// because LLVM's NVPTX back end aborts on an architecture it does not know.
// The check must accept exactly the architectures it lists.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomHardware.h"

#include "llvm/ADT/STLExtras.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace mlir::loom;
  llvm::StringRef arch(reinterpret_cast<const char *>(data), size);
  bool accepted = checkCudaArch(arch).empty();
  if (accepted != llvm::is_contained(getCudaArchs(), arch))
    std::abort();
  return 0;
}
