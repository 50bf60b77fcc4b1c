//===- InitLoom.h - Register Loom's dialects and passes ---------*- C++ -*-===//

#ifndef LOOM_INITLOOM_H
#define LOOM_INITLOOM_H

#include "mlir/IR/DialectRegistry.h"

namespace mlir {
namespace loom {

/// Adds Loom's dialects and the upstream dialects its IR uses to `registry`.
void registerLoomDialects(DialectRegistry &registry);

/// Registers Loom's passes and the `loom-pipeline` pipeline.
void registerLoomPasses();

} // namespace loom
} // namespace mlir

#endif // LOOM_INITLOOM_H
