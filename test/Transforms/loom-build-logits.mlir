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

// Pipeline parallelism (pp = 2, two micro-batches): each rank's
// @logits_stage<r> is its @eval_stage<r> on the first micro-batch, the
// last stage ending in its scores, which go to the other rank (tag 3).
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, precision = fp32>, loom.plan = #loom.plan<dp = 1, tp = 1, pp = 2, zero = 0, micro_batches = 2, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  func.func private @forward_stage0(%wte: tensor<8x4xf32> {loom.param = "wte"}, %tokens: tensor<1x3xi32> {loom.input = "tokens"}) -> tensor<1x3x4xf32> attributes {loom.stage = 0 : i64} {
    %x = loom.embedding %tokens, %wte : (tensor<1x3xi32>, tensor<8x4xf32>) -> tensor<1x3x4xf32>
    return %x : tensor<1x3x4xf32>
  }
  func.func private @forward_stage1(%head: tensor<8x4xf32> {loom.param = "lm_head.weight"}, %targets: tensor<1x3xi32> {loom.input = "targets"}, %x: tensor<1x3x4xf32> {loom.input = "activations"}) -> tensor<f32> attributes {loom.stage = 1 : i64} {
    %logits = loom.linear %x, %head : (tensor<1x3x4xf32>, tensor<8x4xf32>) -> tensor<1x3x8xf32>
    %loss = loom.cross_entropy %logits, %targets {num_classes = 8 : i64} : (tensor<1x3x8xf32>, tensor<1x3xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
  func.func @eval_stage0(%wte: tensor<8x4xf32> {loom.param = "wte"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32> {loom.output = "loss"}) {
    %zero = arith.constant dense<0.0> : tensor<f32>
    %t0 = tensor.extract_slice %tokens[0, 0] [1, 3] [1, 1] : tensor<2x3xi32> to tensor<1x3xi32>
    %a0 = call @forward_stage0(%wte, %t0) : (tensor<8x4xf32>, tensor<1x3xi32>) -> tensor<1x3x4xf32>
    loom.send %a0 to 1 tag 0 : tensor<1x3x4xf32>
    %t1 = tensor.extract_slice %tokens[1, 0] [1, 3] [1, 1] : tensor<2x3xi32> to tensor<1x3xi32>
    %a1 = call @forward_stage0(%wte, %t1) : (tensor<8x4xf32>, tensor<1x3xi32>) -> tensor<1x3x4xf32>
    loom.send %a1 to 1 tag 0 : tensor<1x3x4xf32>
    return %zero : tensor<f32>
  }
  func.func @eval_stage1(%head: tensor<8x4xf32> {loom.param = "lm_head.weight"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32> {loom.output = "loss"}) {
    %zero = arith.constant dense<0.0> : tensor<f32>
    %y0 = tensor.extract_slice %targets[0, 0] [1, 3] [1, 1] : tensor<2x3xi32> to tensor<1x3xi32>
    %a0 = loom.recv from 0 tag 0 : tensor<1x3x4xf32>
    %l0 = call @forward_stage1(%head, %y0, %a0) : (tensor<8x4xf32>, tensor<1x3xi32>, tensor<1x3x4xf32>) -> tensor<f32>
    %s0 = loom.add %l0, %zero : tensor<f32>
    %y1 = tensor.extract_slice %targets[1, 0] [1, 3] [1, 1] : tensor<2x3xi32> to tensor<1x3xi32>
    %a1 = loom.recv from 0 tag 0 : tensor<1x3x4xf32>
    %l1 = call @forward_stage1(%head, %y1, %a1) : (tensor<8x4xf32>, tensor<1x3xi32>, tensor<1x3x4xf32>) -> tensor<f32>
    %s1 = loom.add %s0, %l1 : tensor<f32>
    return %s1 : tensor<f32>
  }
}

// CHECK-LABEL: func.func private @forward_stage1_scores(
// CHECK-SAME: %{{.*}}: tensor<8x4xf32> {loom.param = "lm_head.weight"}, %{{.*}}: tensor<1x3x4xf32> {loom.input = "activations"}) -> tensor<1x3x8xf32>
// CHECK-NOT: loom.stage
// CHECK: %[[S:.*]] = loom.linear
// CHECK-NOT: loom.cross_entropy
// CHECK: return %[[S]]
// CHECK-LABEL: func.func @logits_stage0(
// CHECK-SAME: %{{.*}}: tensor<8x4xf32> {loom.param = "wte"}, %[[TOKENS:.*]]: tensor<1x3xi32> {loom.input = "tokens"})
// CHECK-SAME: -> (tensor<1x3x8xf32> {loom.output = "logits"})
// CHECK: %[[A:.*]] = call @forward_stage0(%{{.*}}, %[[TOKENS]])
// CHECK-NEXT: loom.send %[[A]] to 1 tag 0
// CHECK-NEXT: %[[GOT:.*]] = loom.recv from 1 tag 3 : tensor<1x3x8xf32>
// CHECK-NEXT: return %[[GOT]]
// CHECK-LABEL: func.func @logits_stage1(
// CHECK-SAME: %{{.*}}: tensor<8x4xf32> {loom.param = "lm_head.weight"}, %{{.*}}: tensor<1x3xi32> {loom.input = "tokens"})
// CHECK: %[[X:.*]] = loom.recv from 0 tag 0
// CHECK-NEXT: %[[SCORES:.*]] = call @forward_stage1_scores(%{{.*}}, %[[X]])
// CHECK-NEXT: loom.send %[[SCORES]] to 0 tag 3
// CHECK-NEXT: return %[[SCORES]]

// -----

module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, precision = fp32>, loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  // expected-error @below {{loom-build-logits: expected @forward to return the loom.cross_entropy of the model's logits}}
  func.func @forward(%tokens: tensor<2x3xi32> {loom.input = "tokens"}) -> (tensor<f32> {loom.output = "loss"}) {
    %zero = arith.constant dense<0.0> : tensor<f32>
    return %zero : tensor<f32>
  }
}

// -----

// expected-error @below {{loom-build-logits: expected @eval_stage1 to call the last pipeline stage's forward pass, which returns the loom.cross_entropy of the model's logits (run loom-build-train-step first)}}
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, precision = fp32>, loom.plan = #loom.plan<dp = 1, tp = 1, pp = 2, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  func.func @forward(%tokens: tensor<2x3xi32> {loom.input = "tokens"}) -> (tensor<f32> {loom.output = "loss"}) {
    %zero = arith.constant dense<0.0> : tensor<f32>
    return %zero : tensor<f32>
  }
}
