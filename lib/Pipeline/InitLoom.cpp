//===- InitLoom.cpp - Register Loom's dialects and passes -----------------===//

#include "loom/InitLoom.h"

#include "loom/Bufferization/Attention.h"
#include "loom/Bufferization/Collectives.h"
#include "loom/Bufferization/Passes.h"
#include "loom/Bufferization/ScatterAddRows.h"
#include "loom/Bufferization/SoftmaxStats.h"
#include "loom/Bufferization/Transfer.h"
#include "loom/Conversion/Passes.h"
#include "loom/Dialect/LoomDialect.h"
#include "loom/Export/Passes.h"
#include "loom/Fusion/Passes.h"
#include "loom/GPU/Passes.h"
#include "loom/Lowering/Passes.h"
#include "loom/Pipeline/Pipeline.h"
#include "loom/Transforms/Passes.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

void mlir::loom::registerLoomDialects(DialectRegistry &registry) {
  registry.insert<LoomDialect>();
  // The lowering goes through many upstream dialects, and bufferization,
  // inlining and the conversion to LLVM find their per-dialect parts
  // through these extensions.
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerCollectiveBufferizationModels(registry);
  registerAttentionBufferizationModels(registry);
  registerScatterAddRowsBufferizationModel(registry);
  registerSoftmaxStatsBufferizationModel(registry);
  registerTransferBufferizationModel(registry);
  registerCollectiveDifferentiationModels(registry);
  // gpu-module-to-binary translates each kernel module to LLVM IR on its way
  // to PTX.
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
}

void mlir::loom::registerLoomPasses() {
  registerLoomTransformsPasses();
  registerLoomConversionPasses();
  registerLoomFusionPasses();
  registerLoomBufferizationPasses();
  registerLoomExportPasses();
  registerLoomLoweringPasses();
  registerLoomGPUPasses();
  registerLoomPipeline();
}
