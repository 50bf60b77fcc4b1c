//===- Passes.td - Loom's passes ---------------------------*- tablegen -*-===//

#ifndef LOOM_TRANSFORMS_PASSES_TD
#define LOOM_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomPrintSummary : Pass<"loom-print-summary", "::mlir::ModuleOp"> {
  let summary = "Print the model's parameter count and training setup";
  let description = [{
    Reads the model function `@forward` and the module's `#loom.model`,
    `#loom.training`, `#loom.plan` and `#loom.cluster` attributes and prints
    the architecture, the parameter count (from the parameters' tensor types,
    so padded vocabularies and untied heads count) and the setup. The IR is
    left unchanged.
  }];
  let options = [
    Option<"toStdout", "to-stdout", "bool", /*default=*/"false",
           "Print to stdout instead of stderr">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

#endif // LOOM_TRANSFORMS_PASSES_TD
