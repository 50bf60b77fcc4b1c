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

def LoomPlan : Pass<"loom-plan", "::mlir::ModuleOp"> {
  let summary = "Resolve the parallel plan and attach it as #loom.plan";
  let description = [{
    Every later pass reads the plan from the module's `loom.plan`. This pass
    makes sure there is one: a module without a plan gets the single-rank
    plan (dp = tp = pp = 1, one micro-batch); `loom.plan = "auto"` is
    replaced by the cost model's choice for the module's `#loom.cluster`
    (the fastest legal plan that fits in memory, with the precision the GPU
    supports; see docs/cost-model.md); an explicit `#loom.plan` is kept (the
    verifier has checked it against the model, the batch and the cluster
    with the rule the planner uses). With `report`, it also prints the cost
    model's plan report (`plan`: the choice, the best alternatives and the
    rejected ones) or per-op breakdown (`cost`) to stdout, which needs a
    cluster; with `report=plan`, a plan that does not fit in memory is an
    error.
  }];
  let options = [
    Option<"report", "report", "std::string", /*default=*/"\"\"",
           "Print the cost model's report: plan or cost">,
    Option<"materializedAttention", "materialized-attention", "bool",
           /*default=*/"false",
           "Price attention as separate kernels that keep the score matrix "
           "(as eager PyTorch runs it) instead of one fused kernel">
  ];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomMicroBatches : Pass<"loom-micro-batches", "::mlir::ModuleOp"> {
  let summary = "Give @forward one micro-batch of the global batch";
  let description = [{
    The importer builds `@forward` over the global batch. Under the module's
    plan, each of the `dp` replicas takes `batch / dp` sequences in
    `micro_batches` micro-batches, so `@forward` (and everything derived from
    it) works on `batch / (dp * micro_batches)` sequences: this pass changes
    the batch dimension of its token and target inputs and infers the types
    of every op after them (InferTypeOpInterface, and the body of each
    loom.scan). The loop over micro-batches that accumulates gradients is
    built by `loom-build-train-step`. A module already at the micro-batch
    size is left as it is; one without a plan has one micro-batch.
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
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
                           "::mlir::loom::LoomDialect",
                           "::mlir::tensor::TensorDialect"];
}

def LoomBuildTrainStep : Pass<"loom-build-train-step", "::mlir::ModuleOp"> {
  let summary = "Build @train_step: gradients, clipping and the optimizer";
  let description = [{
    Builds `@train_step(params, optimizer state, tokens, targets, lr, step)
    -> (loss, grad_norm, new params, new optimizer state)` from
    `@forward_grad` and the module's `#loom.training`: the gradients of the
    `micro_batches` micro-batches of the module's `#loom.plan` (1 without a
    plan) are accumulated in a loop (the tokens argument holds all of them,
    `@forward_grad` sees one, as `loom-micro-batches` left it), the global
    gradient norm is computed, gradients are scaled so that it does not exceed
    `grad_clip` (when positive), and each parameter gets one AdamW or SGD
    update. As in GPT-2, weight decay applies to the matrices (linear
    weights and embedding tables, stacked over layers or not) and not to
    biases or layer-norm weights. Results that replace an argument carry
    `loom.updates` = the argument's index.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::loom::LoomDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::func::FuncDialect"];
}

def LoomDataParallel : Pass<"loom-data-parallel", "::mlir::ModuleOp"> {
  let summary = "Sum the step's loss and gradients over the data-parallel "
                "replicas";
  let description = [{
    For a `#loom.plan` with dp > 1, adds the device grid `shard.grid
    @loom_grid(shape = pp x dp x tp)` and, in `@train_step`, a
    `shard.all_reduce` (sum over grid axis 1, the replicas) of the loss and
    of every gradient, right after the op that produces them from
    `@forward_grad` (its call, or the loop that accumulates the
    micro-batches), before the norm, the clipping and the optimizer read
    them. Each replica has taken its own `batch / dp` sequences;
    `loom-build-train-step` divides by dp x micro_batches, so the step
    sees the gradient of the global batch, as with dp = 1. Plans with ZeRO
    (zero > 0) are refused: their sharded optimizer is not compiled yet.
    A module without such a plan is left as it is.

    The values are summed in buckets of at most `bucket-bytes`, in the
    order @forward_grad returns them: consecutive small ones (the loss,
    biases, layer-norm parameters) are packed into one flat tensor and
    summed with one collective, then taken apart again; a value as large as
    a bucket is summed alone, in place, without the copy.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t",
           /*default=*/"25 * 1024 * 1024",
           "Largest bucket of values summed by one collective, in bytes">,
  ];
  let dependentDialects = ["::mlir::shard::ShardDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // LOOM_TRANSFORMS_PASSES_TD
