// RUN: loomc %S/Inputs/auto-plan.json --plan pp=2,mb=2 --emit=loom | loom-opt --loom-plan --loom-micro-batches --loom-pipeline-stages | FileCheck %s
// RUN: loomc %S/Inputs/auto-plan.json --plan pp=2,mb=2 --emit=loom | loom-opt --loom-plan --loom-micro-batches --loom-pipeline-stages --loom-differentiate | FileCheck %s --check-prefix=GRAD
// RUN: loomc %S/Inputs/auto-plan.json --plan dp=2 --emit=loom | loom-opt --loom-pipeline-stages | FileCheck %s --check-prefix=NOPIPE
// RUN: loom-opt %s --loom-pipeline-stages --split-input-file --verify-diagnostics
// RUN: loomc %examples/gpt2-tiny.json --plan pp=2,tp=2,sp=1,mb=2 --emit=loom | loom-opt --loom-plan --loom-micro-batches --loom-tensor-parallel --loom-pipeline-stages | FileCheck %s --check-prefix=SP

// Two stages of one layer each. The first runs the embedding and its
// layer, and gives the activations on; it takes the embedding tables, its
// slice of each stacked parameter, and the tokens.
// CHECK-NOT: func.func @forward(
// CHECK-LABEL: func.func @forward_stage0(
// CHECK-SAME: %{{.*}}: tensor<16x8xf32> {loom.param = "wte"}, %{{.*}}: tensor<4x8xf32> {loom.param = "wpe"},
// CHECK-SAME: tensor<1x8xf32> {loom.layers = array<i64: 0, 1>, loom.param = "h.*.ln_1.weight"}
// CHECK-SAME: tensor<2x4xi32> {loom.input = "tokens"})
// CHECK-SAME: -> (tensor<2x4x8xf32> {loom.output = "activations"}) attributes {loom.stage = 0 : i64}
// CHECK: loom.embedding
// CHECK: loom.scan {{.*}} length = 1
// CHECK-NOT: loom.cross_entropy
// CHECK: return
// The last runs its layer, the final norm, the tied head and the loss: the
// token table is a parameter of both.
// CHECK-LABEL: func.func @forward_stage1(
// CHECK-SAME: %{{.*}}: tensor<16x8xf32> {loom.param = "wte"},
// CHECK-SAME: tensor<1x8xf32> {loom.layers = array<i64: 1, 1>, loom.param = "h.*.ln_1.weight"}
// CHECK-SAME: {loom.param = "ln_f.bias"}, %{{.*}}: tensor<2x4xi32> {loom.input = "targets"}, %{{.*}}: tensor<2x4x8xf32> {loom.input = "activations"})
// CHECK-SAME: -> (tensor<f32> {loom.output = "loss"}) attributes {loom.stage = 1 : i64}
// CHECK-NOT: loom.embedding
// CHECK: loom.scan {{.*}} length = 1
// CHECK: loom.cross_entropy

// Each stage's gradient function takes its output's gradient and returns
// the gradient of the activations it took.
// GRAD-LABEL: func.func @forward_stage0_grad(
// GRAD-SAME: %{{.*}}: tensor<2x4x8xf32> {loom.input = "activations_grad"})
// GRAD-SAME: -> (tensor<2x4x8xf32> {loom.output = "activations"}, tensor<16x8xf32> {loom.grad = "wte"}
// GRAD: loom.embedding_grad
// GRAD-LABEL: func.func @forward_stage1_grad(
// GRAD-SAME: %[[SEED:[^:]*]]: tensor<f32> {loom.input = "loss_grad"})
// GRAD-SAME: -> (tensor<f32> {loom.output = "loss"}, tensor<2x4x8xf32> {loom.output = "activations_grad"}, tensor<16x8xf32> {loom.grad = "wte"}
// GRAD: loom.cross_entropy_grad %[[SEED]],

// Without a pipeline the pass does nothing.
// NOPIPE: func.func @forward(

// -----

// expected-error @+1 {{the plan does not say which layers each pipeline stage runs (stage_layers; run loom-plan first)}}
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 2, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {
}

// -----

module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 2, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false, stage_layers = [1, 1]>} {
  // expected-error @+1 {{expected one layer loop (loom.scan) to split into pipeline stages, found 0}}
  func.func @forward(%x: tensor<2x4xf32> {loom.param = "w"}) -> tensor<f32> {
    %s = loom.sum_squares %x : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 2, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false, stage_layers = [1, 2]>} {
  func.func @forward(%x: tensor<2x4xf32> {loom.input = "x"}, %w: tensor<2x4x4xf32> {loom.param = "h.*.w"}) -> tensor<f32> {
    // expected-error @+1 {{runs 2 layers; the plan's stages hold 3}}
    %y = loom.scan carry(%x : tensor<2x4xf32>) over(%w : tensor<2x4x4xf32>) length = 2 -> (tensor<2x4xf32>) {
    ^bb0(%xl: tensor<2x4xf32>, %wl: tensor<4x4xf32>):
      %z = loom.linear %xl, %wl : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      loom.yield %z : tensor<2x4xf32>
    }
    %s = loom.sum_squares %y : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 2, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false, stage_layers = [1, 1]>} {
  func.func @forward(%x: tensor<2x4xf32> {loom.input = "x"}, %w: tensor<2x4x4xf32> {loom.param = "h.*.w"}) -> tensor<f32> {
    %x2 = loom.add %x, %x : tensor<2x4xf32>
    %y = loom.scan carry(%x2 : tensor<2x4xf32>) over(%w : tensor<2x4x4xf32>) length = 2 -> (tensor<2x4xf32>) {
    ^bb0(%xl: tensor<2x4xf32>, %wl: tensor<4x4xf32>):
      %z = loom.linear %xl, %wl : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      loom.yield %z : tensor<2x4xf32>
    }
    // expected-error @+1 {{after the layer loop reads a value computed before it; the last pipeline stage would not have it}}
    %r = loom.add %y, %x2 : tensor<2x4xf32>
    %s = loom.sum_squares %r : tensor<2x4xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// Sequence parallelism fans the final norm's parameters out before the
// layer loop; computed from parameters alone, they move to the last stage,
// which reads them.
// SP-LABEL: func.func @forward_stage0(
// SP-NOT: loom.fan_out %{{.*}} : tensor<128xf32>
// SP: loom.scan
// SP-LABEL: func.func @forward_stage1(
// SP: loom.scan
// SP: loom.fan_out %{{.*}} on @loom_grid axes = [2] : tensor<128xf32>
// SP: loom.layer_norm
