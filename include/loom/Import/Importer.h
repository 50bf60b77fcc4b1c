//===- Importer.h - Model descriptions to loom IR ---------------*- C++ -*-===//

#ifndef LOOM_IMPORT_IMPORTER_H
#define LOOM_IMPORT_IMPORTER_H

#include "loom/Import/ModelConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mlir {
namespace loom {

/// Builds a module holding `@forward(params..., tokens, targets) -> loss`
/// for a finalized `config` (see finalizeModelConfig). Parameters carry
/// their GPT-2 names in `loom.param` argument attributes; the module carries
/// the model, training, plan and cluster attributes. `file` is used for
/// locations.
OwningOpRef<ModuleOp> importModel(MLIRContext &context,
                                  const ModelConfig &config,
                                  llvm::StringRef file);

} // namespace loom
} // namespace mlir

#endif // LOOM_IMPORT_IMPORTER_H
