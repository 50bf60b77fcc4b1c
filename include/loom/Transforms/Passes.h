//===- Passes.h - Loom's passes ---------------------------------*- C++ -*-===//

#ifndef LOOM_TRANSFORMS_PASSES_H
#define LOOM_TRANSFORMS_PASSES_H

#include "loom/Dialect/LoomDialect.h"
#include "loom/Plan/CostModel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace loom {

#define GEN_PASS_DECL
#include "loom/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "loom/Transforms/Passes.h.inc"

/// Gives shard.all_gather, shard.all_reduce and shard.reduce_scatter their
/// vector-Jacobian products (the reduce-scatter, the identity and the
/// all-gather of the cotangent), with which ZeRO-3's gathers and tensor
/// parallelism's reductions are differentiated
/// (lib/Transforms/CollectiveGradients.cpp).
void registerCollectiveDifferentiationModels(DialectRegistry &registry);

/// The compiler as loom-plan uses it to count Loom's memory.
struct MemoryCompiler {
  /// Compiles a copy of `module` under `estimate`'s plan and precision as
  /// far as its memory plan, and returns the figures of a rank of each
  /// pipeline stage; fails, saying why in `why`, for a plan the compiler
  /// cannot compile.
  std::function<FailureOr<SmallVector<CompiledRankMemory>>(
      ModuleOp module, const PlanEstimate &estimate, std::string &why)>
      compile;
  /// The dialects that compile loads, which loom-plan declares as its own:
  /// a pass manager loads dialects before its passes run, not while they
  /// do.
  std::function<void(DialectRegistry &registry)> getDependentDialects;
};

/// loom-plan whose cost model, pricing Loom's own step
/// (`framework=loom`), takes each rank's memory from the compiler for the
/// plans it reports: the given plan, or the fastest of a search until one
/// fits.
std::unique_ptr<Pass> createLoomPlan(const LoomPlanOptions &options,
                                     MemoryCompiler compiler);

} // namespace loom
} // namespace mlir

#endif // LOOM_TRANSFORMS_PASSES_H
