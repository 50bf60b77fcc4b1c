// RUN: loom-opt %s --loom-build-train-step --loom-data-parallel=bucket-bytes=0 --split-input-file --verify-diagnostics | FileCheck %s
// RUN: loom-opt %s --loom-build-train-step --loom-data-parallel --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=BUCKET
// RUN: loomc %S/Inputs/auto-plan.json --plan dp=2,zero=3 --emit=parallel | FileCheck %s --check-prefix=ZERO3
// RUN: loomc %examples/gpt2-tiny.json --plan pp=2,dp=2,zero=1,mb=2 --emit=parallel | FileCheck %s --check-prefix=PIPE
// RUN: loomc %examples/gpt2-tiny.json --plan dp=2,zero=2 --emit=parallel | FileCheck %s --check-prefix=Z2LAYERS
// RUN: loomc %examples/gpt2-tiny.json --plan dp=2,zero=2,offload=optimizer --emit=parallel | FileCheck %s --check-prefix=Z2LAYERS
// RUN: not loom-opt %S/Inputs/mixed-squares.mlir --loom-data-parallel 2>&1 | FileCheck %s --check-prefix=MIXED
// MIXED: error: 'loom.sum_squares' op sums the squares of sharded gradients and of a tensor that is not one (ZeRO-2 and 3 shard every gradient)

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

// With buckets (25 MiB by default), the loss is summed on its own, so that
// the gradients' buckets hold gradients only; a bucket of one gradient is
// summed in place, without packing.
// BUCKET: func.func @train_step(
// BUCKET: %[[SUMS:.*]]:2 = scf.for
// BUCKET: %[[LOSS:.*]] = shard.all_reduce %[[SUMS]]#0 on @loom_grid grid_axes = [1] : tensor<f32> -> tensor<f32>
// BUCKET-NEXT: %[[GRAD:.*]] = shard.all_reduce %[[SUMS]]#1 on @loom_grid grid_axes = [1] : tensor<8x4xf32> -> tensor<8x4xf32>
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
// CHECK: module attributes {loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 1

// -----

// ZeRO-1: the gradients are summed whole; each replica updates the
// contiguous 1/dp of each flattened parameter at its index on the replica
// axis, with optimizer state of that size (marked as the rank's part of the
// flattened whole, for the runtime), and the updated shards are
// gathered (one collective per bucket) into the whole parameters.
module attributes {loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 1, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>, loom.training = #loom.training<batch = 4, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, grad_clip = 1.0, precision = fp32>} {
  func.func @forward_grad(%w: tensor<8x4xf32> {loom.param = "w"}, %b: tensor<4xf32> {loom.param = "b"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32>, tensor<8x4xf32>, tensor<4xf32>) {
    %l = arith.constant dense<1.0> : tensor<f32>
    return %l, %w, %b : tensor<f32>, tensor<8x4xf32>, tensor<4xf32>
  }
}
// BUCKET: module attributes {loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 1
// BUCKET: func.func @train_step(
// BUCKET-SAME: %[[W:[^:]*]]: tensor<8x4xf32> {loom.param = "w"}, %[[B:[^:]*]]: tensor<4xf32> {loom.param = "b"}, %[[MW:[^:]*]]: tensor<16xf32> {loom.shard = 0 : i64, loom.state = "momentum.w"}, %[[MB:[^:]*]]: tensor<2xf32> {loom.shard = 0 : i64, loom.state = "momentum.b"}
// BUCKET: %[[G:.*]]:3 = call @forward_grad
// BUCKET: shard.all_reduce %[[G]]#0 on @loom_grid grid_axes = [1] : tensor<f32> -> tensor<f32>
// BUCKET: %[[SUMS:.*]] = shard.all_reduce %{{.*}} on @loom_grid grid_axes = [1] : tensor<36xf32> -> tensor<36xf32>
// BUCKET: %[[GWS:.*]] = tensor.extract_slice %[[SUMS]][0] [32] [1]
// BUCKET: %[[GW:.*]] = tensor.expand_shape %[[GWS]]
// BUCKET: %[[GB:.*]] = tensor.extract_slice %[[SUMS]][32] [4] [1]
// BUCKET: %[[R:.*]] = shard.process_multi_index on @loom_grid axes = [1] : index
// The global norm is the whole gradients'.
// BUCKET: loom.sum_squares %[[GW]], %[[GB]] : tensor<8x4xf32>, tensor<4xf32>
// BUCKET: %[[FW:.*]] = tensor.collapse_shape %[[W]]
// BUCKET: %[[OW:.*]] = arith.muli %[[R]], %c16
// BUCKET: %[[SW:.*]] = tensor.extract_slice %[[FW]][%[[OW]]] [16] [1]
// BUCKET: %[[FGW:.*]] = tensor.collapse_shape %[[GW]]
// BUCKET: %[[SGW:.*]] = tensor.extract_slice %[[FGW]][%{{.*}}] [16] [1]
// BUCKET: %[[NW:.*]], %[[NMW:.*]] = loom.sgd %[[SW]], %[[SGW]], %[[MW]], {{.*}} : tensor<16xf32>
// BUCKET: %[[NB:.*]], %[[NMB:.*]] = loom.sgd %{{.*}}, %{{.*}}, %[[MB]], {{.*}} : tensor<2xf32>
// BUCKET: %[[ROW:.*]] = tensor.insert_slice %{{.*}} into %{{.*}}[0, 16] [1, 2] [1, 1] : tensor<1x2xf32> into tensor<1x18xf32>
// BUCKET: %[[ALL:.*]] = shard.all_gather %[[ROW]] on @loom_grid grid_axes = [1] gather_axis = 0 : tensor<1x18xf32> -> tensor<2x18xf32>
// BUCKET: tensor.extract_slice %[[ALL]][0, 0] [2, 16] [1, 1]
// BUCKET: %[[NEWW:.*]] = tensor.expand_shape %{{.*}} output_shape [8, 4]
// BUCKET: tensor.extract_slice %[[ALL]][0, 16] [2, 2] [1, 1]
// BUCKET: %[[NEWB:.*]] = tensor.collapse_shape
// BUCKET: return %{{.*}}, %{{.*}}, %[[NEWW]], %[[NEWB]], %[[NMW]], %[[NMB]]

// -----

// ZeRO-2: the gradients are reduce-scattered instead, row r of the bucket
// holding rank r's shard of each; the global norm sums each rank's squares
// over the replicas with one more collective.
module attributes {loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 2, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>, loom.training = #loom.training<batch = 4, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, grad_clip = 1.0, precision = fp32>} {
  func.func @forward_grad(%w: tensor<8x4xf32> {loom.param = "w"}, %b: tensor<4xf32> {loom.param = "b"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32>, tensor<8x4xf32>, tensor<4xf32>) {
    %l = arith.constant dense<1.0> : tensor<f32>
    return %l, %w, %b : tensor<f32>, tensor<8x4xf32>, tensor<4xf32>
  }
}
// BUCKET: module attributes {loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 2
// BUCKET: func.func @train_step(
// BUCKET: %[[G:.*]]:3 = call @forward_grad
// BUCKET: %[[RW:.*]] = tensor.expand_shape %{{.*}} output_shape [2, 16] : tensor<32xf32> into tensor<2x16xf32>
// BUCKET: %[[P:.*]] = tensor.insert_slice %[[RW]] into %{{.*}}[0, 0] [2, 16] [1, 1]
// BUCKET: %[[RB:.*]] = tensor.expand_shape %[[G]]#2 {{\[\[}}0, 1]] output_shape [2, 2]
// BUCKET: %[[P2:.*]] = tensor.insert_slice %[[RB]] into %[[P]][0, 16] [2, 2] [1, 1]
// BUCKET: %[[MINE:.*]] = shard.reduce_scatter %[[P2]] on @loom_grid grid_axes = [1] scatter_axis = 0 : tensor<2x18xf32> -> tensor<1x18xf32>
// BUCKET: tensor.extract_slice %[[MINE]][0, 0] [1, 16] [1, 1]
// BUCKET: %[[GW:.*]] = tensor.collapse_shape
// BUCKET: tensor.extract_slice %[[MINE]][0, 16] [1, 2] [1, 1]
// BUCKET: %[[GB:.*]] = tensor.collapse_shape
// BUCKET: %[[MINE2:.*]] = loom.sum_squares %[[GW]], %[[GB]] : tensor<16xf32>, tensor<2xf32>
// BUCKET: shard.all_reduce %[[MINE2]] on @loom_grid grid_axes = [1] : tensor<f32> -> tensor<f32>
// BUCKET: loom.sgd %{{.*}}, %[[GW]], {{.*}} : tensor<16xf32>
// BUCKET: loom.sgd %{{.*}}, %[[GB]], {{.*}} : tensor<2xf32>
// BUCKET: shard.all_gather %{{.*}} on @loom_grid grid_axes = [1] gather_axis = 0 : tensor<1x18xf32> -> tensor<2x18xf32>

// ZeRO-2, offloaded or not: each stack the layer loop returns is
// reduce-scattered alone, along its 4 layers (rank r's 1/dp of the
// flattened stack is layers 2r and 2r + 1, the shard a bucket would give),
// for loom-stream-transfers; the bucket keeps the other gradients.
// Z2LAYERS: %[[G:.*]]:17 = call @forward_grad
// Z2LAYERS: %[[L:.*]] = shard.reduce_scatter %[[G]]#5 on @loom_grid grid_axes = [1] scatter_axis = 0 : tensor<4x384x128xf32> -> tensor<2x384x128xf32>
// Z2LAYERS-NEXT: tensor.collapse_shape %[[L]] {{\[\[}}0, 1, 2]] : tensor<2x384x128xf32> into tensor<98304xf32>
// Z2LAYERS: shard.reduce_scatter %{{.*}} on @loom_grid grid_axes = [1] scatter_axis = 0 : tensor<2x20608xf32> -> tensor<1x20608xf32>

// -----

// ZeRO-1 needs each parameter's elements to divide among the replicas.
// expected-error @+2 {{reads a tensor of 6 elements, which the 4 replicas cannot share equally}}
module attributes {loom.plan = #loom.plan<dp = 4, tp = 1, pp = 1, zero = 1, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>, loom.training = #loom.training<batch = 8, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, precision = fp32>} {
  func.func @forward_grad(%w: tensor<3x2xf32> {loom.param = "w"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32>, tensor<3x2xf32>) {
    %l = arith.constant dense<1.0> : tensor<f32>
    return %l, %w : tensor<f32>, tensor<3x2xf32>
  }
}

// ZeRO-3: the shards' gathers and the gradients' reduce-scatters that
// loom-shard-parameters and differentiation made one tensor at a time
// become one collective per bucket in each block: each layer's 12 shards
// (436 elements) gathered at once, in the forward pass and again in the
// backward pass, and its 12 gradients reduce-scattered at once.
// ZERO3-LABEL: func.func @forward_grad(
// ZERO3: shard.all_gather %{{.*}} on @loom_grid grid_axes = [1] gather_axis = 0 : tensor<1x88xf32> -> tensor<2x88xf32>
// ZERO3: loom.scan
// ZERO3: shard.all_gather %{{.*}} on @loom_grid grid_axes = [1] gather_axis = 0 : tensor<1x436xf32> -> tensor<2x436xf32>
// ZERO3-NOT: shard.all_gather
// ZERO3: loom.scan
// ZERO3: shard.all_gather %{{.*}} on @loom_grid grid_axes = [1] gather_axis = 0 : tensor<1x392xf32> -> tensor<2x392xf32>
// ZERO3-NOT: shard.all_gather
// ZERO3: shard.reduce_scatter %{{.*}} on @loom_grid grid_axes = [1] scatter_axis = 0 : tensor<2x436xf32> -> tensor<1x436xf32>
// ZERO3-NOT: shard.reduce_scatter
// ZERO3: loom.yield
// ZERO3: shard.reduce_scatter %{{.*}} on @loom_grid grid_axes = [1] scatter_axis = 0 : tensor<2x88xf32> -> tensor<1x88xf32>
// ZERO3-NOT: shard.reduce_scatter
// ZERO3: return

// Inside a pipeline, each rank's step sums its gradients over its replicas
// (grid axis 1) after its last backward pass, before the norm; ZeRO-1
// updates the rank's shard and gathers the parameters; the loss, summed
// over the pipeline, is summed over the replicas too.
// PIPE-LABEL: func.func @train_step_stage0(
// PIPE: loom.trace_end backward
// PIPE: shard.all_reduce {{.*}} grid_axes = [1] : tensor<437504xf32>
// PIPE: loom.sum_squares
// PIPE: loom.adamw
// PIPE: shard.all_reduce {{.*}} grid_axes = [1] : tensor<f32>
// PIPE: shard.all_gather {{.*}} grid_axes = [1] gather_axis = 0
// PIPE: return
// PIPE-LABEL: func.func @train_step_stage1(
// PIPE: shard.all_reduce {{.*}} grid_axes = [1]
