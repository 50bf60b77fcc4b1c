//===- InitLoom.cpp - Register Loom's dialects and passes -----------------===//

#include "loom/InitLoom.h"

#include "Loom/LoomDialect.h"
#include "loom/Conversion/Collectives.h"
#include "loom/Conversion/Passes.h"
#include "loom/Pipeline/Pipeline.h"
#include "loom/Transforms/Passes.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"

void mlir::loom::registerLoomDialects(DialectRegistry &registry) {
  registry.insert<LoomDialect>();
  // The lowering goes through many upstream dialects, and bufferization,
  // inlining and the conversion to LLVM find their per-dialect parts
  // through these extensions.
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerCollectiveBufferizationModels(registry);
  registerCollectiveDifferentiationModels(registry);
}

void mlir::loom::registerLoomPasses() {
  registerLoomTransformsPasses();
  registerLoomConversionPasses();
  registerLoomPipeline();
}
