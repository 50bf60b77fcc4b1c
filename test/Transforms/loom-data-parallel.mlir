// RUN: loom-opt %s --loom-build-train-step --loom-data-parallel=bucket-bytes=0 --split-input-file --verify-diagnostics | FileCheck %s
// RUN: loom-opt %s --loom-build-train-step --loom-data-parallel --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=BUCKET

// Two replicas of two micro-batches: the loop that accumulates the
// micro-batches' loss and gradients is followed by their sum over the
// replicas (grid axis 1), which everything after it reads; the step divides
// by dp x micro_batches = 4.
module attributes {loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 0, micro_batches = 2, schedule = gpipe, recompute = none, sequence_parallel = false>, loom.training = #loom.training<batch = 8, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, grad_clip = 1.0, precision = fp32>} {
  func.func @forward_grad(%w: tensor<8x4xf32> {loom.param = "w"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32>, tensor<8x4xf32>) {
    %l = arith.constant dense<1.0> : tensor<f32>
    return %l, %w : tensor<f32>, tensor<8x4xf32>
  }
}
// CHECK: shard.grid @loom_grid(shape = 1x2x1) {sym_visibility = "private"}
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: tensor<4x3xi32> {loom.input = "tokens"}
// CHECK: %[[SUMS:.*]]:2 = scf.for
// CHECK: call @forward_grad
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[LOSS:.*]] = shard.all_reduce %[[SUMS]]#0 on @loom_grid grid_axes = [1] : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[GRAD:.*]] = shard.all_reduce %[[SUMS]]#1 on @loom_grid grid_axes = [1] : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK-NOT: %[[SUMS]]
// CHECK: arith.constant 2.500000e-01 : f32
// CHECK: tensor.extract %[[LOSS]]
// CHECK: loom.sum_squares %[[GRAD]]
// CHECK: loom.sgd %{{.*}}, %[[GRAD]]

// With buckets (25 MiB by default), the loss and the gradient are packed
// into one flat tensor, summed by one collective and taken apart as slices.
// BUCKET-LABEL: func.func @train_step(
// BUCKET: %[[SUMS:.*]]:2 = scf.for
// BUCKET: %[[FLAT:.*]] = tensor.empty() : tensor<33xf32>
// BUCKET: %[[L:.*]] = tensor.expand_shape %[[SUMS]]#0 [] output_shape [1] : tensor<f32> into tensor<1xf32>
// BUCKET: %[[P0:.*]] = tensor.insert_slice %[[L]] into %[[FLAT]][0] [1] [1]
// BUCKET: %[[G:.*]] = tensor.collapse_shape %[[SUMS]]#1 {{\[\[}}0, 1]] : tensor<8x4xf32> into tensor<32xf32>
// BUCKET: %[[P1:.*]] = tensor.insert_slice %[[G]] into %[[P0]][1] [32] [1]
// BUCKET: %[[R:.*]] = shard.all_reduce %[[P1]] on @loom_grid grid_axes = [1] : tensor<33xf32> -> tensor<33xf32>
// BUCKET: %[[RL:.*]] = tensor.extract_slice %[[R]][0] [1] [1]
// BUCKET: %[[LOSS:.*]] = tensor.collapse_shape %[[RL]] [] : tensor<1xf32> into tensor<f32>
// BUCKET: %[[RG:.*]] = tensor.extract_slice %[[R]][1] [32] [1]
// BUCKET: %[[GRAD:.*]] = tensor.expand_shape %[[RG]] {{\[\[}}0, 1]] output_shape [8, 4]
// BUCKET-NOT: shard.all_reduce
// BUCKET: tensor.extract %[[LOSS]]
// BUCKET: loom.sgd %{{.*}}, %[[GRAD]]

// -----

// One micro-batch: the call's results are summed.
module attributes {loom.plan = #loom.plan<dp = 4, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>, loom.training = #loom.training<batch = 8, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, precision = fp32>} {
  func.func @forward_grad(%w: tensor<8x4xf32> {loom.param = "w"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32>, tensor<8x4xf32>) {
    %l = arith.constant dense<1.0> : tensor<f32>
    return %l, %w : tensor<f32>, tensor<8x4xf32>
  }
}
// CHECK: shard.grid @loom_grid(shape = 1x4x1)
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[G:.*]]:2 = call @forward_grad
// CHECK-NEXT: shard.all_reduce %[[G]]#0 on @loom_grid grid_axes = [1]
// CHECK-NEXT: shard.all_reduce %[[G]]#1 on @loom_grid grid_axes = [1]

// -----

// One replica: nothing to do.
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, precision = fp32>} {
  func.func @forward_grad(%w: tensor<8x4xf32> {loom.param = "w"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32>, tensor<8x4xf32>) {
    %l = arith.constant dense<1.0> : tensor<f32>
    return %l, %w : tensor<f32>, tensor<8x4xf32>
  }
}
// CHECK-NOT: shard.
// CHECK-LABEL: func.func @train_step(
// CHECK-NOT: shard.

// -----

// ZeRO's sharded optimizer is not compiled yet.
// expected-error @+1 {{ZeRO-1 is not compiled yet: data parallelism runs with zero=0}}
module attributes {loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 1, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>, loom.training = #loom.training<batch = 4, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, precision = fp32>} {
  func.func @forward_grad(%w: tensor<8x4xf32> {loom.param = "w"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32>, tensor<8x4xf32>) {
    %l = arith.constant dense<1.0> : tensor<f32>
    return %l, %w : tensor<f32>, tensor<8x4xf32>
  }
}

