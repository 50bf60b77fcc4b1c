// RUN: loomc %S/Inputs/auto-plan.json --plan dp=2,zero=3 --emit=loom | loom-opt --loom-shard-parameters | FileCheck %s
// RUN: loomc %S/Inputs/auto-plan.json --plan dp=2,zero=3 --emit=loom | loom-opt --loom-shard-parameters --loom-differentiate | FileCheck %s --check-prefix=GRAD
// RUN: loom-opt %s --loom-shard-parameters --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=OTHER
// RUN: loomc %examples/gpt2-tiny.json --plan pp=2,dp=2,zero=3 --emit=loom | loom-opt --loom-shard-parameters | FileCheck %s --check-prefix=PIPE

// ZeRO-3 over two replicas: each parameter argument is this rank's half of
// its first dimension (of each layer's slice, for the stacked ones) and says
// so; the embedding, the final norm and the tied head are gathered once, at
// the top, each layer's parameters at the top of the loop's body, marked
// for recomputation.
// CHECK: shard.grid @loom_grid(shape = 1x2x1) {sym_visibility = "private"}
// CHECK: func.func @forward(%[[WTE:.*]]: tensor<8x8xf32> {loom.param = "wte", loom.shard = 0 : i64}, %{{.*}}: tensor<2x8xf32> {loom.param = "wpe", loom.shard = 0 : i64}, %{{.*}}: tensor<2x4xf32> {loom.param = "h.*.ln_1.weight", loom.shard = 1 : i64}
// CHECK-SAME: %{{.*}}: tensor<2x12x8xf32> {loom.param = "h.*.attn.c_attn.weight", loom.shard = 1 : i64}
// CHECK: %[[TABLE:.*]] = shard.all_gather %[[WTE]] on @loom_grid grid_axes = [1] gather_axis = 0 : tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK: loom.embedding %{{.*}}, %[[TABLE]]
// CHECK: loom.scan
// CHECK: ^bb0(%{{.*}}: tensor<4x4x8xf32>, %{{.*}}: tensor<4xf32>, %{{.*}}: tensor<4xf32>, %[[QKV:[^:]*]]: tensor<12x8xf32>
// CHECK: %[[W:.*]] = shard.all_gather %[[QKV]] on @loom_grid grid_axes = [1] gather_axis = 0 {loom.recompute} : tensor<12x8xf32> -> tensor<24x8xf32>
// CHECK: loom.linear %{{.*}}, %[[W]]
// CHECK: loom.linear %{{.*}}, %[[TABLE]]

// In a pipeline the ops before the layer loop go to the first stage and
// those after it to the last: each end gathers what it reads, the tied
// token table at both.
// PIPE: func.func @forward(%[[WTE:[^:]*]]: tensor<128x128xf32> {loom.param = "wte", loom.shard = 0 : i64}
// PIPE: %[[FIRST:.*]] = shard.all_gather %[[WTE]] on @loom_grid grid_axes = [1] gather_axis = 0 : tensor<128x128xf32> -> tensor<256x128xf32>
// PIPE: loom.embedding %{{.*}}, %[[FIRST]]
// PIPE: loom.scan
// PIPE: loom.yield
// PIPE: %[[LAST:.*]] = shard.all_gather %[[WTE]] on @loom_grid grid_axes = [1] gather_axis = 0 : tensor<128x128xf32> -> tensor<256x128xf32>
// PIPE: loom.layer_norm
// PIPE: loom.linear %{{.*}}, %[[LAST]]

// Differentiated, the backward pass of the layer loop gathers the weights
// it reads again, and each gradient is reduce-scattered to the shards.
// GRAD-LABEL: func.func @forward_grad(
// GRAD: loom.scan
// GRAD: loom.scan
// GRAD: ^bb0(%{{.*}}: tensor<4x4x8xf32>, %{{.*}}: tensor<4xf32>, %{{.*}}: tensor<4xf32>, %[[QKV:[^:]*]]: tensor<12x8xf32>
// GRAD: %[[W:.*]] = shard.all_gather %[[QKV]] on @loom_grid grid_axes = [1] gather_axis = 0 {loom.recompute} : tensor<12x8xf32> -> tensor<24x8xf32>
// GRAD: %{{.*}}, %[[DW:.*]], %{{.*}} = loom.linear_grad %{{.*}}, %{{.*}}, %[[W]]
// GRAD: shard.reduce_scatter %[[DW]] on @loom_grid grid_axes = [1] scatter_axis = 0 : tensor<24x8xf32> -> tensor<12x8xf32>
// GRAD: %[[DWTE:.*]] = shard.reduce_scatter %{{.*}} on @loom_grid grid_axes = [1] scatter_axis = 0 : tensor<16x8xf32> -> tensor<8x8xf32>
// GRAD: return %{{.*}}, %[[DWTE]]

// A dimension the replicas divide is taken when the first is not.
module attributes {loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 3, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>, loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, precision = fp32>} {
  func.func @forward(%w: tensor<3x4xf32> {loom.param = "w"}) -> tensor<3x4xf32> {
    return %w : tensor<3x4xf32>
  }
}
// OTHER: func.func @forward(%[[W:.*]]: tensor<3x2xf32> {loom.param = "w", loom.shard = 1 : i64})
// OTHER: shard.all_gather %[[W]] on @loom_grid grid_axes = [1] gather_axis = 1 : tensor<3x2xf32> -> tensor<3x4xf32>

// -----

module attributes {loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 3, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>, loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, precision = fp32>} {
  // expected-error @+1 {{cannot shard parameter 'w' of type 'tensor<3x5xf32>' over dp = 2 replicas: ZeRO-3 splits a dimension, and dp divides none}}
  func.func @forward(%w: tensor<3x5xf32> {loom.param = "w"}) -> tensor<3x5xf32> {
    return %w : tensor<3x5xf32>
  }
}

// -----

// Other plans are left as they are.
module attributes {loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 2, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>, loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, precision = fp32>} {
  func.func @forward(%w: tensor<3x4xf32> {loom.param = "w"}) -> tensor<3x4xf32> {
    return %w : tensor<3x4xf32>
  }
}
// OTHER-LABEL: func.func @forward(%{{.*}}: tensor<3x4xf32> {loom.param = "w"})
// OTHER-NOT: shard.
