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
    error. `report=memory` prints the cost model's per-rank bytes of
    parameters, gradients and optimizer state for the plan, and of the
    activations one micro-batch keeps for the backward pass (per layer,
    with the part that is attention's softmax statistics, and outside the
    layers), which `loom-memory-report` sets next to the compiled step's;
    these do not
    depend on the GPU, and a module without a cluster is priced on one
    node of A100-80GB GPUs as large as the plan.
  }];
  let options = [
    Option<"report", "report", "std::string", /*default=*/"\"\"",
           "Print the cost model's report (plan, cost or memory) or the "
           "pipeline schedule's diagram (schedule)">,
    Option<"materializedAttention", "materialized-attention", "bool",
           /*default=*/"false",
           "Price attention as separate kernels that keep the score matrix "
           "(as eager PyTorch runs it) instead of one fused kernel">,
    Option<"framework", "framework", "::mlir::loom::Framework",
           /*default=*/"::mlir::loom::Framework::pytorch",
           "Whose memory and overheads the cost model prices: pytorch (a "
           "DeepSpeed, Megatron-LM or FSDP trainer) or loom (Loom's "
           "compiled step); report=memory always prices Loom's",
           "::mlir::loom::getFrameworkValues()">
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
    gradient norm is computed (one `loom.sum_squares` over all gradients,
    so that the sum is one value to read), gradients are scaled so that it
    does not exceed
    `grad_clip` (when positive), and each parameter gets one AdamW or SGD
    update. As in GPT-2, weight decay applies to the matrices (linear
    weights and embedding tables, stacked over layers or not) and not to
    biases or layer-norm weights. Results that replace an argument carry
    `loom.updates` = the argument's index. Parameters that tensor
    parallelism divides (`loom.tp_split`) keep the mark; their sums of
    squares are added over the tensor-parallel group (a `shard.all_reduce`
    over grid axis 2) before the norm, so that every rank clips with the
    norm of the whole model.

    For a pipeline plan (pp > 1) each rank r gets `@train_step_stage<r>`
    instead, its chunks' passes in the schedule's order (docs/pipeline.md),
    and `@eval_stage<r>(params, tokens, targets) -> loss`, the forward
    passes alone for validation: each micro-batch in turn through the
    stages in stage order, the last stage's mean loss summed over grid axis
    0 so that every rank returns it.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::loom::LoomDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::shard::ShardDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::func::FuncDialect"];
}

def LoomTensorParallel : Pass<"loom-tensor-parallel", "::mlir::ModuleOp"> {
  let summary = "Megatron-LM tensor and sequence parallelism";
  let description = [{
    For a `#loom.plan` with tp > 1, before differentiation: rewrites
    `@forward` into this rank's part, op by op, through
    TensorParallelOpInterface; the pass keeps every value's layout (whole,
    split, or partial sums) and inserts the collectives over the
    tensor-parallel axis (grid axis 2 of `@loom_grid`) between one op's
    layout and the next's. In the layer loop, the query, key and value
    projection and the MLP's first linear are column parallel, attention
    runs on the rank's heads and GELU on its features, and the output
    projections are row parallel: partial products summed by a
    `shard.all_reduce`, then their bias added by `loom.bias_add`. The input
    of each column-parallel linear passes through `loom.fan_out`, whose
    vector-Jacobian product is that all-reduce, so that differentiation
    gives the backward pass Megatron's conjugate collectives. The token
    table is divided by rows (vocabulary parallel): `loom.embedding` and
    `loom.cross_entropy` get the rank's `vocab_start`, the tied head is
    column parallel on the same part. With sequence parallelism (`sp`), the
    layer loop carries the hidden state split along the sequence: partial
    sums are reduce-scattered into it and gathered (`shard.all_gather`)
    before each column-parallel linear; layer norm runs on the rank's
    positions with its parameters fanned out. Divided parameters become
    this rank's part, marked `loom.tp_split = [dim, blocks]` (the fused
    projection's rows are 3 blocks, queries, keys and values, each divided
    among the ranks). Other plans are left as they are.
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def LoomShardParameters : Pass<"loom-shard-parameters", "::mlir::ModuleOp"> {
  let summary = "ZeRO-3: keep 1/dp of each parameter, gather it where used";
  let description = [{
    For a `#loom.plan` with dp > 1 and zero = 3, before differentiation:
    every `loom.param` argument of `@forward` becomes this rank's shard of
    the parameter, 1/dp of its first dimension that dp divides (of each
    layer's slice, for the parameters stacked over the layers:
    `[L, d0 / dp, ...]`), marked with `loom.shard = <dimension>`, and a
    `shard.all_gather` over the replicas (grid axis 1 of `@loom_grid`)
    rebuilds the whole parameter where it is read: once at the top of the
    function for the embedding, the final norm and the tied head, and in
    the layer loop's body for each layer's parameters. The gathers in the
    body carry `loom.recompute`, so differentiation gathers each layer's
    parameters again in the backward pass instead of saving them, and the
    gathered copies live for one layer only. The vector-Jacobian product
    of an all-gather is a `shard.reduce_scatter` of the cotangent, so the
    gradients leave `@forward_grad` as shards already summed over the
    replicas. Refuses a parameter none of whose dimensions dp divides.
    Other plans are left as they are.
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def LoomBuildLogits : Pass<"loom-build-logits", "::mlir::ModuleOp"> {
  let summary = "Add @logits: the model's next-token scores, to sample from";
  let description = [{
    Clones `@forward`, whose single result is the `loom.cross_entropy` of
    the model's logits, into `@logits`: the same ops up to the loss's
    operand, which it returns (converted to f32 where mixed precision
    stores it narrower) with `loom.output = "logits"`, without the targets
    only the loss read. Run after `loom-lower-precision`, so that it
    computes exactly what training does. Under ZeRO-3, `@logits` gathers
    the replicas' shards as `@forward` does; under vocabulary parallelism
    (tp > 1) an all-gather of the ranks' blocks of columns returns whole
    rows; every rank then calls it.

    Under pipeline parallelism, where `@forward` is gone, each rank gets
    `@logits_stage<r>(params, tokens) -> logits`: what its `@eval_stage<r>`
    runs for the first micro-batch (its chunks' forward passes, with the
    activations' sends and receives), the last stage's forward pass cloned
    to end in its scores, which the last rank sends (`loom.send` tag 3) to
    every other rank of the pipeline, so that all of them return the same
    scores.
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

def LoomHoistConversions
    : Pass<"loom-hoist-conversions", "::mlir::ModuleOp"> {
  let summary = "Convert a value once per step: mixed precision's "
                "conversions out of the loops their inputs do not change in, "
                "and one conversion of each value kept";
  let description = [{
    After inlining, the conversions `loom-lower-precision` made where a
    model function receives its parameters sit in each call's copy: inside
    the step's loop over micro-batches, and once per forward and backward
    pass of a pipeline rank's schedule. A `loom.convert` whose operands are
    defined outside an enclosing loop (`LoopLikeOpInterface`) moves out of
    it, innermost loop first, and a conversion that another of the same
    value, type and scale dominates is replaced by it: each parameter is
    converted once per step. Only conversions move; other loop-invariant
    ops stay where they are (ZeRO-3's gathers, whose results each
    micro-batch releases).
  }];
}

def LoomRecompute : Pass<"loom-recompute", "::mlir::ModuleOp"> {
  let summary = "Activation recomputation: what the backward pass recomputes";
  let description = [{
    Places the plan's recomputation, before differentiation, as the
    `loom.recompute` marks that the layer loop's vector-Jacobian product
    honours (a marked op runs again in the backward body instead of the
    forward pass saving its results). With `recompute=full`, every op of
    the layer body is marked, tensor-parallel collectives and ZeRO-3
    gathers included, so the forward pass keeps only each layer's input and
    the backward pass runs each layer's forward again before its VJP.
    `recompute=selective` recomputes the attention core (scores and
    probabilities) from its input; `loom.causal_attention`'s own VJP always
    does that (from the forward's log-sum-exp), so selective marks nothing
    and keeps what `none` keeps, the log-sum-exp included, which the cost
    model's selective row leaves out. `none` marks nothing. Fails when full recomputation finds no layer loop.
  }];
}

def LoomPipelineStages : Pass<"loom-pipeline-stages", "::mlir::ModuleOp"> {
  let summary = "Pipeline stages: the forward pass split into contiguous "
                "ranges of layers";
  let description = [{
    For a pipeline plan (pp > 1), replaces `@forward` by one function per
    stage, `@forward_stage<k>` in model order (`loom.stage = k`), stage k
    running layers [first, first + count) of the layer loop as the plan's
    `stage_layers` gives them. Its stacked parameters hold those layers
    only (`loom.layers = [first, count]`). The ops before the loop (the
    embedding) go to the first stage, the ops after it (final norm, head,
    loss) to the last; every stage but the first takes the activations
    (`loom.input = "activations"`) and every stage but the last returns
    them (`loom.output = "activations"`). Each stage takes only the
    arguments it reads: a tied embedding is a parameter of the first and
    the last stage. Does nothing for pp = 1. Fails when the plan has no
    stage layers, when the forward pass has not exactly one layer loop
    carrying one value, or when the head reads a value computed before the
    loop.
  }];
}

def LoomMemoryReport : Pass<"loom-memory-report", "::mlir::ModuleOp"> {
  let summary = "Per-rank bytes of parameters, gradients, optimizer state "
                "and kept activations";
  let description = [{
    Reads, from `@train_step` after the parallel passes, what one rank holds
    between steps: its parameter arguments, its optimizer state arguments,
    and the gradients its optimizer updates read slices of (the reduced
    gradients, whole even under ZeRO-1, where each rank updates a shard; the
    rank's shards of them under ZeRO-2 and ZeRO-3). Records them on the
    module as `loom.memory = {parameters, gradients, optimizer}` (bytes),
    which the artifact's manifest carries to the runtime, and with `print`
    prints them to stdout (`loomc --emit=memory`). Under ZeRO-2 the
    gradients are reduce-scattered after the backward pass, so the whole
    gradients exist for a while during the step; they are transient and not
    counted here.

    It also reads, from `@forward_grad`, the activations one micro-batch's
    forward pass keeps for its backward pass: the data arguments
    (`loom.input`) and the values computed from them by the ops the loss
    depends on that an op outside them reads. The layer loop's stacked
    results are counted per layer; values computed from parameters alone
    are not activations. Their sum is `activations` in `loom.memory`.
  }];
  let options = [
    Option<"print", "print", "bool", /*default=*/"false",
           "Print the figures to stdout">
  ];
}

def LoomDataParallel : Pass<"loom-data-parallel", "::mlir::ModuleOp"> {
  let summary = "Sum the step's loss and gradients over the data-parallel "
                "replicas, and shard the optimizer (ZeRO-1/2/3)";
  let description = [{
    For a `#loom.plan` with dp > 1, adds the device grid `shard.grid
    @loom_grid(shape = pp x dp x tp)` (unless `loom-shard-parameters` has)
    and, in `@train_step`, right after the op that produces the loss and
    the gradients from `@forward_grad` (its call, or the loop that
    accumulates the micro-batches), the collectives over grid axis 1, the
    replicas. Each replica has taken its own `batch / dp` sequences;
    `loom-build-train-step` divides by dp x micro_batches, so the step
    sees the gradient of the global batch, as with dp = 1.

    - zero = 0: `shard.all_reduce` of the loss and of every gradient.
    - zero = 1: the same; then each rank updates only its shard, the
      contiguous 1/dp of each flattened parameter at its index on the
      replica axis (`shard.process_multi_index`): the optimizer state
      arguments become those shards, and a `shard.all_gather` of the
      updated shards rebuilds every parameter.
    - zero = 2: as zero = 1, but the gradients are reduce-scattered
      (`shard.reduce_scatter`): each rank receives only the sum of its
      shard. The global norm for clipping sums each rank's squares with one
      more all-reduce. An f32 stack that @forward_grad's layer loop
      returns (with one micro-batch), whose leading dimension dp divides,
      is reduce-scattered alone along it (the same shard: whole layers),
      which `loom-stream-transfers` turns into each layer summed onto its
      rank in the loop.
    - zero = 3: parameters, gradients and optimizer state are shards
      already (`loom-shard-parameters`); the loss and the squares of the
      norm are all-reduced.

    Gradients are reduced, and updated shards gathered, in buckets of at
    most `bucket-bytes`, in the order @forward_grad returns them:
    consecutive small values are packed into one tensor and communicated
    with one collective, then taken apart again; a value as large as a
    bucket is communicated alone. The first dimension of each parameter
    (its flattened size, for zero = 1 and 2) must divide by dp.
    A module without such a plan is left as it is.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t",
           /*default=*/"25 * 1024 * 1024",
           "Largest bucket of values summed by one collective, in bytes">,
  ];
  let dependentDialects = ["::mlir::shard::ShardDialect",
                           "::mlir::tensor::TensorDialect"];
}

def LoomPlaceOffload : Pass<"loom-place-offload", "::mlir::ModuleOp"> {
  let summary = "Place the optimizer's state and update in host memory "
                "under offload=optimizer, with explicit transfers";
  let description = [{
    For a plan with `offload = optimizer` (ZeRO-Offload), splits the
    training step into what the device runs and what the host runs:

    - The optimizer updates, and the views of the parameters and state
      they read, move into a private function `@train_step_host` marked
      `loom.host`, which the step calls last. Its code runs on the host and
      its buffers are host memory (a static arena of its own).
    - The f32 parameters (the master weights) and the optimizer state are
      marked `loom.host`: the runtime keeps them in host memory.
    - The device computes with a copy of each parameter in the step's
      precision, a new argument `loom.param_copy = "<name>"`: bf16 or f16
      where the gradient function converts the parameter to it at once,
      f32 otherwise.
    - Every value the updates read from the device (the reduced gradients,
      the clipping factor) enters the host function through a
      `loom.transfer ... to host` into a host buffer; each updated
      parameter leaves it converted to the copy's type through a
      `loom.transfer ... to device` into the copy, which the step returns
      as that argument's new value.

    Under ZeRO-1/2, where each rank updates a slice of the flattened
    parameter and the step gathers the whole, the host keeps the slice of
    the master weights only: the parameter argument becomes it
    (`loom.shard = 0`), the updated slice goes back to the device, which
    gathers it, and the gathered whole, converted, is the copy's new value.

    A pipeline plan's ranks each keep their own stage's masters and
    state: every `@train_step_stage<r>` is split alike, calling its own
    `@train_step_stage<r>_host`.

    A gradient the device sends and reads no more crosses where a layer
    loop can send it layer by layer (loom-stream-transfers): mixed
    precision's widening moves into the loop, and a sum over micro-batches
    (a loop's from zeros, or a pipeline schedule's over its backward calls)
    becomes one transfer per micro-batch that accumulates on the host
    (`loom.transfer ... accumulate if`), with the device's additions in the
    same order.

    `offload = parameters` also keeps the device's copies in host memory,
    and fetches each where it is read: a layer loop's slice at the top of
    each iteration, anything else whole just before its reader. Plans
    without offload are left as they are.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::tensor::TensorDialect"];
}

def LoomLowerPrecision : Pass<"loom-lower-precision", "::mlir::ModuleOp"> {
  let summary = "Store the layers' tensors in bf16 or f16, keep the master "
                "weights, the optimizer and the loss in f32, scale the loss "
                "under fp16";
  let description = [{
    For the training precision `bf16` or `fp16` (`#loom.training`), rewrites
    the functions that compute the model (those with ops of the
    `MixedPrecision` trait and no optimizer update: `@forward`,
    `@forward_grad`): every tensor of rank 1 or more that such an op reads
    or produces is stored in bf16 or f16, and the op computes in f32 (its
    lowering widens it). A parameter is converted (`loom.convert`) once
    where the function receives it, a stacked one for all its layers at
    once; layer loops carry and save narrow values; an op outside the trait
    (a collective, a reshape) gets its operands back in f32. Statistics
    (`WideStatisticsOpInterface`: attention's log-sum-exp, a layer norm's
    mean and reciprocal deviation) stay f32, and so
    do the layer loops' operands, body arguments and results that carry
    them, in the function that makes them and in one that takes them. The functions'
    signatures do not change (their results, the loss and the gradients,
    are f32, converted where they are returned), but for what one private
    function returns only for another to take (a pipeline stage's forward
    half's kept values for its backward half), which stays narrow between
    them when every call agrees. The step function keeps f32
    throughout: parameters (the master weights), gradient accumulation,
    collectives of gradients, the norm, clipping and the optimizer state.

    For `fp16` it also adds dynamic loss scaling's compiled half: the
    gradient functions and the step take an input `loss_scale` (f32
    scalar, `loom.input = "loss_scale"`), which replaces the loss's seed
    (`loom.seed`, in the gradient function or, for a pipeline, in the
    rank's step), and the gradients are divided by it as they are
    converted back to f32; a pipeline stage's backward half (any function
    returning `loom.grad` results) takes it too and hands the gradient of
    its received activations on still scaled. The step passes its input to the gradient
    functions and skips every optimizer update (`skip if`) when the global
    gradient norm (its `grad_norm` output, which must be computed before
    the updates) is infinite or NaN. The runtime raises and lowers the
    scale between steps.

    A gradient stack that the step reduce-scatters alone along its layers
    (ZeRO-2, `loom-data-parallel`) is widened to f32 in the layer loop's
    body, each layer's as it is made, instead of whole after the loop: the
    same elements, for `loom-stream-transfers` to sum each layer onto its
    owner.

    Does nothing for `fp32`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // LOOM_TRANSFORMS_PASSES_TD
