// RUN: loom-opt %s --loom-micro-batches --split-input-file --verify-diagnostics | FileCheck %s

// The global batch of 4 in dp * micro_batches = 1 * 2 micro-batches: the
// inputs take 2 sequences, and every type after them follows, inside the
// layer loop too.
module attributes {loom.training = #loom.training<batch = 4, sequence = 3, optimizer = sgd, lr = 0.1, precision = fp32>, loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 2, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  func.func @forward(%wte: tensor<8x4xf32> {loom.param = "wte"}, %wpe: tensor<3x4xf32> {loom.param = "wpe"}, %w: tensor<2x4x4xf32> {loom.param = "h.*.w"}, %tokens: tensor<4x3xi32> {loom.input = "tokens"}, %targets: tensor<4x3xi32> {loom.input = "targets"}) -> (tensor<f32> {loom.output = "loss"}) {
    %x = loom.embedding %tokens, %wte, %wpe : (tensor<4x3xi32>, tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<4x3x4xf32>
    %y = loom.scan carry(%x : tensor<4x3x4xf32>) over(%w : tensor<2x4x4xf32>) length = 2 -> (tensor<4x3x4xf32>) {
    ^bb0(%xl: tensor<4x3x4xf32>, %wl: tensor<4x4xf32>):
      %z = loom.linear %xl, %wl : (tensor<4x3x4xf32>, tensor<4x4xf32>) -> tensor<4x3x4xf32>
      loom.yield %z : tensor<4x3x4xf32>
    }
    %logits = loom.linear %y, %wte : (tensor<4x3x4xf32>, tensor<8x4xf32>) -> tensor<4x3x8xf32>
    %loss = loom.cross_entropy %logits, %targets {num_classes = 8 : i64} : (tensor<4x3x8xf32>, tensor<4x3xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %{{.*}}: tensor<2x3xi32> {loom.input = "tokens"}, %{{.*}}: tensor<2x3xi32> {loom.input = "targets"})
// CHECK: loom.embedding {{.*}} -> tensor<2x3x4xf32>
// CHECK: loom.scan carry(%{{.*}} : tensor<2x3x4xf32>) {{.*}} -> (tensor<2x3x4xf32>)
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<2x3x4xf32>, %{{.*}}: tensor<4x4xf32>):
// CHECK-NEXT: loom.linear {{.*}} -> tensor<2x3x4xf32>
// CHECK: loom.linear {{.*}} -> tensor<2x3x8xf32>
// CHECK: loom.cross_entropy {{.*}} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>

// -----

// Each of dp = 2 replicas takes half of the batch; a module already at that
// size is left as it is.
module attributes {loom.training = #loom.training<batch = 4, sequence = 3, optimizer = sgd, lr = 0.1, precision = fp32>, loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  func.func @forward(%wte: tensor<8x4xf32> {loom.param = "wte"}, %wpe: tensor<3x4xf32> {loom.param = "wpe"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}) -> (tensor<2x3x4xf32>) {
    %x = loom.embedding %tokens, %wte, %wpe : (tensor<2x3xi32>, tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
    return %x : tensor<2x3x4xf32>
  }
}
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: tensor<2x3xi32> {loom.input = "tokens"}) -> tensor<2x3x4xf32>

// -----

// expected-error @+1 {{the plan is still "auto": run loom-plan first}}
module attributes {loom.training = #loom.training<batch = 4, sequence = 3, optimizer = sgd, lr = 0.1, precision = fp32>, loom.plan = "auto"} {
}

// -----

module attributes {loom.training = #loom.training<batch = 4, sequence = 3, optimizer = sgd, lr = 0.1, precision = fp32>, loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 2, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  // expected-error @+1 {{input #2 has 3 sequences: neither the global batch of 4 nor one micro-batch of 2 (dp * micro_batches = 1 * 2)}}
  func.func @forward(%wte: tensor<8x4xf32> {loom.param = "wte"}, %wpe: tensor<3x4xf32> {loom.param = "wpe"}, %tokens: tensor<3x3xi32> {loom.input = "tokens"}) -> (tensor<3x3x4xf32>) {
    %x = loom.embedding %tokens, %wte, %wpe : (tensor<3x3xi32>, tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<3x3x4xf32>
    return %x : tensor<3x3x4xf32>
  }
}
