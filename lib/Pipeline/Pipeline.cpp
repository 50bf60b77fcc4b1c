//===- Pipeline.cpp - The compile pipeline shared by loomc and loom-opt ---===//

#include "loom/Pipeline/Pipeline.h"

#include "loom/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::loom;

llvm::cl::ValuesClass mlir::loom::getEmitStageValues() {
  return llvm::cl::values(clEnumValN(
      EmitStage::Loom, "loom", "the imported forward pass and loss (loom IR)"));
}

void mlir::loom::buildLoomPipeline(OpPassManager &pm, EmitStage stage,
                                   bool summary) {
  // The module is verified before and after every pass by the pass manager;
  // at the `loom` stage nothing is rewritten yet.
  if (summary)
    pm.addPass(createLoomPrintSummary());
  switch (stage) {
  case EmitStage::Loom:
    break;
  }
}

void mlir::loom::registerLoomPipeline() {
  PassPipelineRegistration<LoomPipelineOptions>(
      "loom-pipeline",
      "Loom's compile pipeline up to a stage, as `loomc --emit=<stage>` runs "
      "it",
      [](OpPassManager &pm, const LoomPipelineOptions &options) {
        buildLoomPipeline(pm, options.emit, options.summary);
      });
}
