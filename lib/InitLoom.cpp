//===- InitLoom.cpp - Register Loom's dialects and passes -----------------===//

#include "loom/InitLoom.h"

#include "Loom/LoomDialect.h"
#include "loom/Pipeline/Pipeline.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

void mlir::loom::registerLoomDialects(DialectRegistry &registry) {
  registry.insert<LoomDialect, func::FuncDialect>();
}

void mlir::loom::registerLoomPasses() {
  registerLoomTransformsPasses();
  registerLoomPipeline();
}
