//===- ModelSummary.h - What a model module holds ---------------*- C++ -*-===//
//
// Parameter counts and the training setup of a module built by the importer,
// read from the IR itself (the `loom.param` arguments of @forward and the
// module's loom attributes), so that they hold for hand-written IR too.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_MODELSUMMARY_H
#define LOOM_ANALYSIS_MODELSUMMARY_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir {
namespace loom {

struct ParameterInfo {
  std::string name;
  RankedTensorType type;
  int64_t count;
};

struct ModelSummary {
  func::FuncOp function;
  SmallVector<ParameterInfo> parameters;
  /// All parameters, and those of the transformer blocks (stacked over the
  /// blocks as "h.*.<name>").
  int64_t totalParameters = 0;
  int64_t blockParameters = 0;
  int64_t numBlocks = 0;
};

/// Summarizes the model function `@forward` of `module`. Emits an error on
/// the module and fails when there is no such function or an argument of it
/// is neither a parameter nor an input.
FailureOr<ModelSummary> summarizeModel(ModuleOp module);

/// Prints a human-readable summary: the model, its parameter count, the
/// training setup, plan and cluster when present.
void printModelSummary(ModuleOp module, const ModelSummary &summary,
                       raw_ostream &os);

/// Formats 124439808 as "124,439,808".
std::string formatWithCommas(int64_t value);

} // namespace loom
} // namespace mlir

#endif // LOOM_ANALYSIS_MODELSUMMARY_H
