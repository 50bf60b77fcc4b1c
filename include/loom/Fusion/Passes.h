//===- Passes.h - Loom's fusion passes --------------------------*- C++ -*-===//

#ifndef LOOM_FUSION_PASSES_H
#define LOOM_FUSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace loom {

#define GEN_PASS_DECL
#include "loom/Fusion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Fusion/Passes.h.inc"

} // namespace loom
} // namespace mlir

#endif // LOOM_FUSION_PASSES_H
