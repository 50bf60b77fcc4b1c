//===- PrintSummary.cpp - The loom-print-summary pass ---------------------===//

#include "loom/Analysis/ModelSummary.h"
#include "loom/Transforms/Passes.h"

#include "llvm/Support/raw_ostream.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMPRINTSUMMARY
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
struct PrintSummaryPass
    : public loom::impl::LoomPrintSummaryBase<PrintSummaryPass> {
  using LoomPrintSummaryBase::LoomPrintSummaryBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ModelSummary> summary = summarizeModel(module);
    if (failed(summary))
      return signalPassFailure();
    printModelSummary(module, *summary, toStdout ? llvm::outs() : llvm::errs());
    markAllAnalysesPreserved();
  }
};
} // namespace
