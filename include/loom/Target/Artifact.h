//===- Artifact.h - Packaging a lowered module as an artifact ---*- C++ -*-===//

#ifndef LOOM_TARGET_ARTIFACT_H
#define LOOM_TARGET_ARTIFACT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/Timing.h"

namespace mlir {
namespace loom {

struct ArtifactOptions {
  /// CPU to generate code for; empty means the host's.
  std::string cpu;
  /// LLVM optimization level, 0 to 3.
  unsigned optLevel = 3;
};

/// Translates `module` (in the LLVM dialect, with the entry points and the
/// manifest of loom-export-entries) to LLVM IR, optimizes it, compiles it for
/// the host and links it into the shared object at `path`: the artifact the
/// runtime loads. Errors are emitted on the module. Each step is timed under
/// `timing` when given.
LogicalResult writeArtifact(ModuleOp module, llvm::StringRef path,
                            const ArtifactOptions &options,
                            TimingScope *timing = nullptr);

/// Writes the PTX of every kernel module of a step lowered for the CUDA
/// target to `path` ("-" for stdout), each after a line
/// `// loom-kernel-module <name>`.
LogicalResult writePtx(ModuleOp module, llvm::StringRef path);

} // namespace loom
} // namespace mlir

#endif // LOOM_TARGET_ARTIFACT_H
