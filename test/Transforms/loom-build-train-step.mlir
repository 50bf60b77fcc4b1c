// RUN: loom-opt %s --loom-build-train-step --split-input-file --verify-diagnostics | FileCheck %s
// RUN: loomc %S/Inputs/auto-plan.json --plan pp=2,mb=2,schedule=1f1b --emit=loom | loom-opt --loom-plan --loom-micro-batches --loom-pipeline-stages --loom-differentiate --loom-build-train-step | FileCheck %s --check-prefix=PIPE
// The split of a stage keeps the block's order: two compiles agree.
// RUN: loomc %S/Inputs/auto-plan.json --plan pp=2,mb=4,schedule=1f1b --emit=step > %t.first
// RUN: loomc %S/Inputs/auto-plan.json --plan pp=2,mb=4,schedule=1f1b --emit=step > %t.second
// RUN: diff %t.first %t.second
// RUN: loomc %S/Inputs/auto-plan.json --plan pp=2,mb=2,schedule=gpipe --emit=loom | loom-opt --loom-plan --loom-micro-batches --loom-pipeline-stages --loom-differentiate --loom-build-train-step | FileCheck %s --check-prefix=GPIPE
// RUN: loomc %S/Inputs/auto-plan.json --plan pp=2,mb=2,schedule=gpipe,recompute=stage --emit=loom | loom-opt --loom-plan --loom-micro-batches --loom-pipeline-stages --loom-differentiate --loom-build-train-step | FileCheck %s --check-prefix=STAGE

// AdamW with weight decay on the matrix only, the clip factor computed from
// the global norm, and every new value marked with the argument it replaces.
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = fp32>} {
  func.func @forward_grad(%w: tensor<8x4xf32> {loom.param = "w"}, %b: tensor<4xf32> {loom.param = "b"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32>, tensor<8x4xf32>, tensor<4xf32>) {
    %l = arith.constant dense<1.0> : tensor<f32>
    return %l, %w, %b : tensor<f32>, tensor<8x4xf32>, tensor<4xf32>
  }
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<8x4xf32> {loom.param = "w"}, %[[B:[a-z0-9]+]]: tensor<4xf32> {loom.param = "b"},
// CHECK-SAME: {loom.state = "m.w"}, %{{.*}}: tensor<4xf32> {loom.state = "m.b"}, %{{.*}}: tensor<8x4xf32> {loom.state = "v.w"}, %{{.*}}: tensor<4xf32> {loom.state = "v.b"},
// CHECK-SAME: tensor<2x3xi32> {loom.input = "tokens"}, %{{.*}}: tensor<2x3xi32> {loom.input = "targets"}, %{{.*}}: tensor<f32> {loom.input = "lr"}, %{{.*}}: tensor<f32> {loom.input = "step"})
// CHECK-SAME: -> (tensor<f32> {loom.output = "loss"}, tensor<f32> {loom.output = "grad_norm"}, tensor<8x4xf32> {loom.updates = 0 : i64}
// CHECK: %[[G:.*]]:3 = call @forward_grad
// CHECK: loom.sum_squares %[[G]]#1, %[[G]]#2 : tensor<8x4xf32>, tensor<4xf32> -> tensor<f32>
// CHECK: math.sqrt
// CHECK: arith.minimumf
// CHECK: loom.adamw %[[W]], %[[G]]#1, {{.*}} {beta1 = 9.000000e-01 : f64, beta2 = {{.*}} : f64, epsilon = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64}
// CHECK: loom.adamw %[[B]], %[[G]]#2, {{.*}} weight_decay = 0.000000e+00

// -----

// The plan's two micro-batches: @forward_grad sees two of the batch's four
// sequences, the tokens hold both micro-batches, and each call sees one slice.
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 2, schedule = gpipe, recompute = none, sequence_parallel = false>, loom.training = #loom.training<batch = 4, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = fp32>} {
  func.func @forward_grad(%w: tensor<8x4xf32> {loom.param = "w"}, %b: tensor<4xf32> {loom.param = "b"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32>, tensor<8x4xf32>, tensor<4xf32>) {
    %l = arith.constant dense<1.0> : tensor<f32>
    return %l, %w, %b : tensor<f32>, tensor<8x4xf32>, tensor<4xf32>
  }
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: tensor<4x3xi32> {loom.input = "tokens"}
// CHECK: scf.for
// CHECK: tensor.extract_slice %{{.*}}[%{{.*}}, 0] [2, 3] [1, 1] : tensor<4x3xi32> to tensor<2x3xi32>
// CHECK: call @forward_grad
// CHECK: loom.add
// CHECK: scf.yield
// CHECK: arith.constant 5.000000e-01 : f32

// -----

// Micro-batches that do not make up the training batch.
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 2, schedule = gpipe, recompute = none, sequence_parallel = false>, loom.training = #loom.training<batch = 2, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = fp32>} {
  // expected-error@+1 {{takes 2 sequences, and the training batch of 2 is not dp * micro_batches = 1 * 2 micro-batches of them (run loom-micro-batches first)}}
  func.func @forward_grad(%w: tensor<8x4xf32> {loom.param = "w"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32>, tensor<8x4xf32>) {
    %l = arith.constant dense<1.0> : tensor<f32>
    return %l, %w : tensor<f32>, tensor<8x4xf32>
  }
}

// -----

// An argument that is neither a parameter nor data: the step would have
// nothing to pass for it (this once crashed the pass).
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = fp32>} {
  // expected-error@+1 {{argument #1 is neither a model parameter (loom.param) nor a data input (loom.input), as every argument of the forward function must be}}
  func.func @forward_grad(%w: tensor<8x4xf32> {loom.param = "w"}, %x: tensor<8x4xf32>, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32>, tensor<8x4xf32>) {
    %l = arith.constant dense<1.0> : tensor<f32>
    return %l, %w : tensor<f32>, tensor<8x4xf32>
  }
}

// -----

// Buffers: the step is built on tensors, before bufferization.
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = fp32>} {
  // expected-error@+1 {{expected tensor arguments (the training step is built before bufferization)}}
  func.func @forward_grad(%w: memref<8x4xf32> {loom.param = "w"}, %tokens: memref<2x3xi32> {loom.input = "tokens"}, %targets: memref<2x3xi32> {loom.input = "targets"}) {
    return
  }
}

// -----

// Parameters stacked over layers: weight decay follows the rank of each
// layer's slice, so the stacked bias [2, 4] gets none.
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 0.0, precision = fp32>} {
  func.func @forward_grad(%w: tensor<2x4x4xf32> {loom.param = "h.*.w"}, %b: tensor<2x4xf32> {loom.param = "h.*.b"}, %x: tensor<2x3x4xf32> {loom.param = "x"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32>, tensor<2x4x4xf32>, tensor<2x4xf32>, tensor<2x3x4xf32>) {
    %y = loom.scan carry(%x : tensor<2x3x4xf32>) over(%w, %b : tensor<2x4x4xf32>, tensor<2x4xf32>) length = 2 -> (tensor<2x3x4xf32>) {
    ^bb0(%xl: tensor<2x3x4xf32>, %wl: tensor<4x4xf32>, %bl: tensor<4xf32>):
      %z = loom.linear %xl, %wl, %bl : (tensor<2x3x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
      loom.yield %z : tensor<2x3x4xf32>
    }
    %l = arith.constant dense<1.0> : tensor<f32>
    return %l, %w, %b, %y : tensor<f32>, tensor<2x4x4xf32>, tensor<2x4xf32>, tensor<2x3x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step(
// CHECK: loom.adamw %{{.*}} {{.*}} weight_decay = 1.000000e-01 : f64} : tensor<2x4x4xf32>
// CHECK: loom.adamw %{{.*}} {{.*}} weight_decay = 0.000000e+00 : f64} : tensor<2x4xf32>
// CHECK: loom.adamw %{{.*}} {{.*}} weight_decay = 1.000000e-01 : f64} : tensor<2x3x4xf32>

// A pipeline of two stages, one layer each, under 1F1B with two
// micro-batches. Each stage's gradient function is split at its output's
// gradient: the forward half returns what the backward half reads.
// PIPE-LABEL: func.func private @forward_stage0_grad_forward(
// PIPE-SAME: -> (tensor<2x4x8xf32> {loom.output = "activations"},
// PIPE-LABEL: func.func private @forward_stage0_grad_backward(
// PIPE-SAME: tensor<2x4x8xf32> {loom.input = "activations_grad"})
// PIPE-LABEL: func.func private @forward_stage1_grad_forward(
// PIPE-SAME: -> (tensor<f32> {loom.output = "loss"},

// Rank 0 holds the embedding and layer 0: one forward pass of warm-up, then
// one forward and one backward pass in turn. The activations go to rank 1
// (tag 0), their gradients come back (tag 1).
// PIPE-LABEL: func.func @train_step_stage0(
// PIPE-SAME: {loom.param = "wte"}
// PIPE-SAME: {loom.layers = array<i64: 0, 1>, loom.param = "h.*.ln_1.weight"}
// PIPE-SAME: attributes {loom.stage = 0 : i64}
// PIPE: loom.trace_begin forward micro_batch 0 chunk 0
// PIPE-NEXT: %[[F0:.*]]:{{[0-9]+}} = call @forward_stage0_grad_forward
// PIPE-NEXT: loom.trace_end forward
// PIPE-NEXT: loom.send %[[F0]]#0 to 1 tag 0 : tensor<2x4x8xf32>
// PIPE: %[[F1:.*]]:{{[0-9]+}} = call @forward_stage0_grad_forward
// PIPE: loom.send %[[F1]]#0 to 1 tag 0
// PIPE: %[[G0:.*]] = loom.recv from 1 tag 1 : tensor<2x4x8xf32>
// PIPE: loom.trace_begin backward micro_batch 0 chunk 0
// PIPE-NEXT: call @forward_stage0_grad_backward({{.*}}%[[F0]]#1{{.*}}%[[G0]])
// PIPE-NEXT: loom.trace_end backward
// PIPE: %[[G1:.*]] = loom.recv from 1 tag 1
// PIPE: call @forward_stage0_grad_backward({{.*}}%[[F1]]#1{{.*}}%[[G1]])
// The tied table's gradient is exchanged with the last stage and summed.
// PIPE: loom.send %[[WTE:.*]] to 1 tag 2 : tensor<16x8xf32>
// PIPE: %[[OTHER:.*]] = loom.recv from 1 tag 2 : tensor<16x8xf32>
// PIPE: loom.add %[[WTE]], %[[OTHER]]
// The loss and the norm's squares are summed over the pipeline.
// PIPE: shard.all_reduce {{.*}} grid_axes = [0]
// PIPE: shard.all_reduce {{.*}} grid_axes = [0]
// PIPE: loom.trace_begin optimizer micro_batch -1 chunk -1
// PIPE: loom.adamw
// PIPE: loom.trace_end optimizer
// Validation on rank 0: the stage's forward function alone on each
// micro-batch in turn, its activations sent on; the loss comes back from
// the last stage as a sum over the pipeline.
// PIPE-LABEL: func.func @eval_stage0(
// PIPE-SAME: {loom.layers = array<i64: 0, 1>, loom.param = "h.*.ln_1.weight"}
// PIPE-SAME: -> (tensor<f32> {loom.output = "loss"})
// PIPE: %[[E0:.*]] = call @forward_stage0(
// PIPE-NEXT: loom.send %[[E0]] to 1 tag 0
// PIPE: %[[E1:.*]] = call @forward_stage0(
// PIPE-NEXT: loom.send %[[E1]] to 1 tag 0
// PIPE-NEXT: shard.all_reduce {{.*}} grid_axes = [0]
// PIPE-NOT: loom.adamw
// PIPE: return
// Rank 1: no warm-up; each micro-batch's backward pass right after its
// forward pass, seeded with 1.
// PIPE-LABEL: func.func @train_step_stage1(
// PIPE-SAME: {loom.layers = array<i64: 1, 1>, loom.param = "h.*.ln_1.weight"}
// PIPE-SAME: attributes {loom.stage = 1 : i64}
// PIPE: %[[X0:.*]] = loom.recv from 0 tag 0 : tensor<2x4x8xf32>
// PIPE: call @forward_stage1_grad_forward({{.*}}%[[X0]])
// PIPE: %[[B0:.*]]:{{[0-9]+}} = call @forward_stage1_grad_backward
// PIPE: loom.send %[[B0]]#0 to 0 tag 1
// PIPE: loom.recv from 0 tag 0
// PIPE: call @forward_stage1_grad_forward
// PIPE: call @forward_stage1_grad_backward
// PIPE: loom.send {{.*}} to 0 tag 1
// PIPE: loom.send {{.*}} to 0 tag 2
// PIPE: loom.recv from 0 tag 2
// Validation on rank 1: receive, forward, add up the loss; the mean over
// the micro-batches.
// PIPE-LABEL: func.func @eval_stage1(
// PIPE: %[[Y0:.*]] = loom.recv from 0 tag 0 : tensor<2x4x8xf32>
// PIPE-NEXT: %[[L0:.*]] = call @forward_stage1({{.*}}%[[Y0]])
// PIPE-NEXT: %[[S0:.*]] = loom.add %{{.*}}, %[[L0]] : tensor<f32>
// PIPE: %[[Y1:.*]] = loom.recv from 0 tag 0
// PIPE-NEXT: %[[L1:.*]] = call @forward_stage1({{.*}}%[[Y1]])
// PIPE-NEXT: %[[S1:.*]] = loom.add %[[S0]], %[[L1]]
// PIPE-NEXT: shard.all_reduce %[[S1]] on @loom_grid grid_axes = [0]
// PIPE: arith.mulf %{{.*}}, %{{.*}} : f32

// GPipe: every forward pass before the first backward pass.
// GPIPE-LABEL: func.func @train_step_stage1(
// GPIPE: call @forward_stage1_grad_forward
// GPIPE: call @forward_stage1_grad_forward
// GPIPE: call @forward_stage1_grad_backward
// GPIPE: call @forward_stage1_grad_backward

// Stage recomputation: a forward pass runs the stage's forward function
// alone and keeps only its input (the activations received); the backward
// pass reruns the forward half on it, marked, inside its span.
// STAGE-LABEL: func.func @train_step_stage1(
// STAGE: %[[X0:.*]] = loom.recv from 0 tag 0 : tensor<2x4x8xf32>
// STAGE: call @forward_stage1({{.*}}%[[X0]]) : ({{.*}}) -> tensor<f32>
// STAGE: %[[X1:.*]] = loom.recv from 0 tag 0 : tensor<2x4x8xf32>
// STAGE: call @forward_stage1({{.*}}%[[X1]]) : ({{.*}}) -> tensor<f32>
// STAGE-NOT: call @forward_stage1(
// STAGE: loom.trace_begin backward micro_batch 0 chunk 0
// STAGE-NEXT: %[[R0:.*]]:{{[0-9]+}} = call @forward_stage1_grad_forward({{.*}}%[[X0]]) {loom.recompute}
// STAGE-NEXT: call @forward_stage1_grad_backward({{.*}}%[[R0]]#1
// STAGE-NEXT: loom.trace_end backward
// STAGE: call @forward_stage1_grad_forward({{.*}}%[[X1]]) {loom.recompute}
