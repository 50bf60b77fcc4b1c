// RUN: loom-opt %s --loom-build-logits --split-input-file --verify-diagnostics | FileCheck %s

// @logits is @forward up to the loss's operand: the same ops on the same
// parameters and tokens, without the targets, the scores returned.
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, precision = fp32>, loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  func.func @forward(%wte: tensor<8x4xf32> {loom.param = "wte"}, %wpe: tensor<3x4xf32> {loom.param = "wpe"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32> {loom.output = "loss"}) {
    %x = loom.embedding %tokens, %wte, %wpe : (tensor<2x3xi32>, tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
    %logits = loom.linear %x, %wte : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
    %loss = loom.cross_entropy %logits, %targets {num_classes = 7 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @forward(
// CHECK: loom.cross_entropy
// CHECK-LABEL: func.func @logits(
// CHECK-SAME: %{{.*}}: tensor<8x4xf32> {loom.param = "wte"}, %{{.*}}: tensor<3x4xf32> {loom.param = "wpe"}, %{{.*}}: tensor<2x3xi32> {loom.input = "tokens"})
// CHECK-SAME: -> (tensor<2x3x8xf32> {loom.output = "logits"})
// CHECK: loom.embedding
// CHECK: %[[SCORES:.*]] = loom.linear
// CHECK-NOT: loom.cross_entropy
// CHECK: return %[[SCORES]] : tensor<2x3x8xf32>

// -----

// Mixed precision's logits come back in f32.
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, precision = bf16>, loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 1, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  func.func @forward(%wte: tensor<8x4xf32> {loom.param = "wte"}, %tokens: tensor<1x3xi32> {loom.input = "tokens"}, %targets: tensor<1x3xi32> {loom.input = "targets"}) -> (tensor<f32> {loom.output = "loss"}) {
    %w = loom.convert %wte : tensor<8x4xf32> to tensor<8x4xbf16>
    %x = loom.embedding %tokens, %w : (tensor<1x3xi32>, tensor<8x4xbf16>) -> tensor<1x3x4xbf16>
    %logits = loom.linear %x, %w : (tensor<1x3x4xbf16>, tensor<8x4xbf16>) -> tensor<1x3x8xbf16>
    %loss = loom.cross_entropy %logits, %targets {num_classes = 8 : i64} : (tensor<1x3x8xbf16>, tensor<1x3xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @logits(
// CHECK-SAME: -> (tensor<1x3x8xf32> {loom.output = "logits"})
// CHECK: %[[NARROW:.*]] = loom.linear {{.*}} -> tensor<1x3x8xbf16>
// CHECK: %[[WIDE:.*]] = loom.convert %[[NARROW]] : tensor<1x3x8xbf16> to tensor<1x3x8xf32>
// CHECK: return %[[WIDE]]

// -----

// Vocabulary parallelism (tp = 2): each rank's block of columns of the
// scores, gathered into whole rows, in rank order.
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, precision = fp32>, loom.plan = #loom.plan<dp = 1, tp = 2, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  shard.grid @loom_grid(shape = 1x1x2)
  func.func @forward(%w: tensor<4x4xf32> {loom.param = "w"}, %x: tensor<2x3x4xf32> {loom.input = "x"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32> {loom.output = "loss"}) {
    %start = arith.constant 0 : index
    %logits = loom.linear %x, %w : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
    %loss = loom.cross_entropy %logits, %targets vocab_start %start {grid = @loom_grid, grid_axes = array<i16: 2>, num_classes = 7 : i64} : (tensor<2x3x4xf32>, tensor<2x3xi32>, index) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @logits(
// CHECK-SAME: -> (tensor<2x3x8xf32> {loom.output = "logits"})
// CHECK: %[[BLOCK:.*]] = loom.linear
// CHECK: %[[ROWS:.*]] = shard.all_gather %[[BLOCK]] on @loom_grid grid_axes = [2] gather_axis = 2 : tensor<2x3x4xf32> -> tensor<2x3x8xf32>
// CHECK: return %[[ROWS]] : tensor<2x3x8xf32>

// -----

// expected-error @below {{loom-build-logits: sampling needs the whole model on each rank, and pipeline parallelism splits its layers (pp = 2)}}
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, precision = fp32>, loom.plan = #loom.plan<dp = 1, tp = 1, pp = 2, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  func.func @forward(%tokens: tensor<2x3xi32> {loom.input = "tokens"}) -> (tensor<f32> {loom.output = "loss"}) {
    %zero = arith.constant dense<0.0> : tensor<f32>
    return %zero : tensor<f32>
  }
}

// -----

module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, precision = fp32>, loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  // expected-error @below {{loom-build-logits: expected @forward to return the loom.cross_entropy of the model's logits}}
  func.func @forward(%tokens: tensor<2x3xi32> {loom.input = "tokens"}) -> (tensor<f32> {loom.output = "loss"}) {
    %zero = arith.constant dense<0.0> : tensor<f32>
    return %zero : tensor<f32>
  }
}
