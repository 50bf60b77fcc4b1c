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

def LoomDifferentiate : Pass<"loom-differentiate", "::mlir::ModuleOp"> {
  let summary = "Build @forward_grad: the loss and its gradients";
  let description = [{
    Reverse-mode differentiation of `@forward`, whose single result is the
    0-d loss. The new function `@forward_grad` takes the same arguments and
    returns the loss followed by the gradient of every `loom.param`
    argument, in argument order (each result carries `loom.grad` with the
    parameter's name). Each op contributes its vector-Jacobian product
    through `DifferentiableOpInterface`; cotangents of values used more than
    once are summed. `@forward` is kept.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def LoomBuildTrainStep : Pass<"loom-build-train-step", "::mlir::ModuleOp"> {
  let summary = "Build @train_step: gradients, clipping and the optimizer";
  let description = [{
    Builds `@train_step(params, optimizer state, tokens, targets, lr, step)
    -> (loss, grad_norm, new params, new optimizer state)` from
    `@forward_grad` and the module's `#loom.training`: the gradients of
    `micro-batches` slices of the batch are accumulated (the tokens argument
    holds all of them, `@forward_grad` sees one; the count is the option's
    when given, else the `micro_batches` of the module's `#loom.plan`, else
    1, and the micro-batches must make up the training batch), the global
    gradient norm is computed, gradients are scaled so that it does not exceed
    `grad_clip` (when positive), and each parameter gets one AdamW or SGD
    update. As in GPT-2, weight decay applies to the matrices (rank 2 and
    more: linear weights and embedding tables) and not to biases or
    layer-norm weights. Results that replace an argument carry
    `loom.updates` = the argument's index.
  }];
  let options = [
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "Micro-batches accumulated per step (default: the plan's)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // LOOM_TRANSFORMS_PASSES_TD
