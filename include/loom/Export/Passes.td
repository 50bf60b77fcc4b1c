//===- Passes.td - Loom's export of entry points -----------*- tablegen -*-===//

#ifndef LOOM_EXPORT_PASSES_TD
#define LOOM_EXPORT_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomExportEntries : Pass<"loom-export-entries", "::mlir::ModuleOp"> {
  let summary = "Add the C entry points and the manifest the runtime reads";
  let description = [{
    For every public function whose arguments carry Loom attributes and
    whose arguments are all statically shaped memrefs, adds
    `void loom_entry_<name>(void **buffers)`, which receives one pointer per
    argument, in order, and calls the function with memrefs over them. The
    function itself becomes private. Adds the constant global
    `loom_manifest`, a NUL-terminated text describing the model, the
    training setup, the target the code runs on and every entry point's
    arguments (see docs/artifact.md).
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The target the artifact's code runs on (cpu or cuda), which the "
           "runtime's backend must match">,
    Option<"cudaArch", "cuda-arch", "std::string", "\"sm_90\"",
           "The GPU architecture of the kernels, with target=cuda">
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // LOOM_EXPORT_PASSES_TD
