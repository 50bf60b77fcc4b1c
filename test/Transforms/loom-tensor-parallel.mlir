// RUN: loomc %S/Inputs/auto-plan.json --plan tp=2 --emit=loom | loom-opt --loom-tensor-parallel | FileCheck %s
// RUN: loomc %S/Inputs/auto-plan.json --plan tp=2 --emit=loom | loom-opt --loom-tensor-parallel --loom-differentiate | FileCheck %s --check-prefix=GRAD
// RUN: loomc %S/Inputs/auto-plan.json --plan tp=2,sp=1 --emit=loom | loom-opt --loom-tensor-parallel | FileCheck %s --check-prefix=SP
// RUN: loom-opt %s --loom-tensor-parallel --split-input-file --verify-diagnostics
// RUN: loomc %examples/llama-tiny.json --plan tp=2 --emit=loom | loom-opt --loom-tensor-parallel | FileCheck %s --check-prefix=LLAMA
// RUN: loomc %examples/llama-tiny.json --plan tp=4 --emit=loom | loom-opt --loom-tensor-parallel | FileCheck %s --check-prefix=TEAMS
// RUN: loomc %examples/llama-tiny.json --plan tp=4 --emit=loom | loom-opt --loom-tensor-parallel --loom-differentiate | FileCheck %s --check-prefix=TEAMVJP

// Megatron over two ranks. The token table is divided by rows (the padded
// vocabulary of 16, 8 rows each): each rank looks up its part's tokens,
// the first part adds the positions, and the parts are summed.
// CHECK: shard.grid @loom_grid(shape = 1x1x2) {sym_visibility = "private"}
// CHECK: func.func @forward(%[[WTE:[^:]*]]: tensor<8x8xf32> {loom.param = "wte", loom.tp_split = array<i64: 0, 1>}, %[[WPE:[^:]*]]: tensor<4x8xf32> {loom.param = "wpe"}
// CHECK-SAME: tensor<2x12x8xf32> {loom.param = "h.*.attn.c_attn.weight", loom.tp_split = array<i64: 1, 3>}
// CHECK-SAME: tensor<2x12xf32> {loom.param = "h.*.attn.c_attn.bias", loom.tp_split = array<i64: 1, 3>}
// CHECK-SAME: tensor<2x8x4xf32> {loom.param = "h.*.attn.c_proj.weight", loom.tp_split = array<i64: 2, 1>}
// CHECK-SAME: tensor<2x8xf32> {loom.param = "h.*.attn.c_proj.bias"}
// CHECK-SAME: tensor<2x16x8xf32> {loom.param = "h.*.mlp.c_fc.weight", loom.tp_split = array<i64: 1, 1>}
// CHECK-SAME: tensor<2x8x16xf32> {loom.param = "h.*.mlp.c_proj.weight", loom.tp_split = array<i64: 2, 1>}
// CHECK: %[[POS:.*]] = loom.fan_out %[[WPE]] on @loom_grid axes = [2] : tensor<4x8xf32>
// CHECK: %[[RANK:.*]] = shard.process_multi_index on @loom_grid axes = [2] : index
// CHECK: %[[START:.*]] = arith.muli %[[RANK]], %{{.*}} : index
// CHECK: %[[PART:.*]] = loom.embedding %{{.*}}, %[[WTE]], %[[POS]] vocab_start %[[START]]
// CHECK: %[[X:.*]] = shard.all_reduce %[[PART]] on @loom_grid grid_axes = [2] : tensor<4x4x8xf32>

// One layer body: the column-parallel projections read the whole input
// through a fan-out (Megatron's f) and compute their heads' and features'
// part; the row-parallel ones give partial sums, all-reduced (Megatron's g)
// before their bias.
// CHECK: loom.scan carry(%[[X]] : tensor<4x4x8xf32>)
// CHECK: ^bb0(%[[H:[^:]*]]: tensor<4x4x8xf32>, %{{.*}}: tensor<8xf32>, %{{.*}}: tensor<8xf32>, %[[QKVW:[^:]*]]: tensor<12x8xf32>, %[[QKVB:[^:]*]]: tensor<12xf32>, %[[PROJW:[^:]*]]: tensor<8x4xf32>, %[[PROJB:[^:]*]]: tensor<8xf32>
// CHECK: %[[LN1:[^,]*]], %{{[^,]*}}, %{{[^ ]*}} = loom.layer_norm %[[H]]
// CHECK: %[[F1:.*]] = loom.fan_out %[[LN1]] on @loom_grid axes = [2] {loom.recompute} : tensor<4x4x8xf32>
// CHECK: %[[QKV:.*]] = loom.linear %[[F1]], %[[QKVW]], %[[QKVB]] {split = #loom<split column>} : (tensor<4x4x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<4x4x12xf32>
// CHECK: %[[ATT:[^,]*]], %{{[^ ]*}} = loom.causal_attention %[[QKV]] {num_heads = 1 : i64} : tensor<4x4x12xf32> -> tensor<4x4x4xf32>, tensor<4x1x4xf32>
// CHECK: %[[P1:.*]] = loom.linear %[[ATT]], %[[PROJW]] {split = #loom<split row>} : (tensor<4x4x4xf32>, tensor<8x4xf32>) -> tensor<4x4x8xf32>
// CHECK: %[[S1:.*]] = shard.all_reduce %[[P1]] on @loom_grid grid_axes = [2] : tensor<4x4x8xf32> -> tensor<4x4x8xf32>
// CHECK: %[[B1:.*]] = loom.bias_add %[[S1]], %[[PROJB]]
// CHECK: %[[R1:.*]] = loom.add %[[H]], %[[B1]]
// CHECK: %[[LN2:[^,]*]], %{{[^,]*}}, %{{[^ ]*}} = loom.layer_norm %[[R1]]
// CHECK: %[[F2:.*]] = loom.fan_out %[[LN2]]
// CHECK: %[[FC:.*]] = loom.linear %[[F2]], {{.*}} -> tensor<4x4x16xf32>
// CHECK: %[[G:.*]] = loom.gelu %[[FC]] : tensor<4x4x16xf32>
// CHECK: %[[P2:.*]] = loom.linear %[[G]], {{.*}} -> tensor<4x4x8xf32>
// CHECK: %[[S2:.*]] = shard.all_reduce %[[P2]]
// CHECK: loom.bias_add %[[S2]]

// The tied head is column parallel on the same part of the table, and the
// loss reduces its statistics over the group itself.
// CHECK: %[[LNF:[^,]*]], %{{[^,]*}}, %{{[^ ]*}} = loom.layer_norm
// CHECK: %[[FF:.*]] = loom.fan_out %[[LNF]] on @loom_grid axes = [2] : tensor<4x4x8xf32>
// CHECK: %[[LOGITS:.*]] = loom.linear %[[FF]], %[[WTE]] {split = #loom<split column>} : (tensor<4x4x8xf32>, tensor<8x8xf32>) -> tensor<4x4x8xf32>
// CHECK: loom.cross_entropy %[[LOGITS]], %{{.*}} vocab_start %{{.*}} {grid = @loom_grid, grid_axes = array<i16: 2>, num_classes = 11 : i64}

// Sequence parallelism: the layers carry the hidden state split along the
// sequence (the embedding's parts reduce-scattered into it); layer norm
// runs on the rank's positions, its parameters fanned out so that their
// gradients are summed over the group; the column-parallel projections
// read the sequence all-gathered, and the row-parallel ones are
// reduce-scattered back to it. After the loop, the final norm's output is
// gathered for the head.
// SP: %[[PART:.*]] = loom.embedding
// SP: %[[X:.*]] = shard.reduce_scatter %[[PART]] on @loom_grid grid_axes = [2] scatter_axis = 1 : tensor<4x4x8xf32> -> tensor<4x2x8xf32>
// SP: loom.scan carry(%[[X]] : tensor<4x2x8xf32>)
// SP: ^bb0(%[[H:[^:]*]]: tensor<4x2x8xf32>, %[[W1:[^:]*]]: tensor<8xf32>, %[[B1:[^:]*]]: tensor<8xf32>
// SP-DAG: %[[FW1:.*]] = loom.fan_out %[[W1]] on @loom_grid axes = [2] {loom.recompute} : tensor<8xf32>
// SP-DAG: %[[FB1:.*]] = loom.fan_out %[[B1]] on @loom_grid axes = [2] {loom.recompute} : tensor<8xf32>
// SP: %[[LN1:[^,]*]], %{{[^,]*}}, %{{[^ ]*}} = loom.layer_norm %[[H]], %[[FW1]], %[[FB1]] {{.*}} -> (tensor<4x2x8xf32>, tensor<4x2xf32>, tensor<4x2xf32>)
// SP: %[[ALL:.*]] = shard.all_gather %[[LN1]] on @loom_grid grid_axes = [2] gather_axis = 1 : tensor<4x2x8xf32> -> tensor<4x4x8xf32>
// SP: %[[QKV:.*]] = loom.linear %[[ALL]], {{.*}} -> tensor<4x4x12xf32>
// SP: %[[P1:.*]] = loom.linear {{.*}} {split = #loom<split row>} {{.*}} -> tensor<4x4x8xf32>
// SP: %[[S1:.*]] = shard.reduce_scatter %[[P1]] on @loom_grid grid_axes = [2] scatter_axis = 1 : tensor<4x4x8xf32> -> tensor<4x2x8xf32>
// SP: %[[BA:.*]] = loom.bias_add %[[S1]], %{{.*}} : tensor<4x2x8xf32>, tensor<8xf32>
// SP: loom.add %[[H]], %[[BA]] : tensor<4x2x8xf32>
// SP: loom.yield %{{.*}} : tensor<4x2x8xf32>
// SP: %[[LNF:[^,]*]], %{{[^,]*}}, %{{[^ ]*}} = loom.layer_norm {{.*}} -> (tensor<4x2x8xf32>, tensor<4x2xf32>, tensor<4x2xf32>)
// SP: shard.all_gather %[[LNF]] on @loom_grid grid_axes = [2] gather_axis = 1 : tensor<4x2x8xf32> -> tensor<4x4x8xf32>

// Differentiated, the backward pass has the conjugates: the fan-outs'
// cotangents are all-reduced, the sums' pass through; a layer's backward
// body has two all-reduces, of the inputs' cotangents of its two
// column-parallel projections. The position table's gradient, which only
// the first part has, is summed over the group.
// GRAD-LABEL: func.func @forward_grad(
// GRAD: loom.scan
// GRAD: loom.scan
// GRAD-NOT: shard.
// GRAD: {{.*}} = loom.linear_grad
// GRAD-NOT: shard.
// GRAD: %[[DX2:[^,]*]], {{.*}} = loom.linear_grad
// GRAD-NEXT: shard.all_reduce %[[DX2]] on @loom_grid grid_axes = [2]
// GRAD-NOT: shard.
// GRAD: {{.*}} = loom.linear_grad
// GRAD-NOT: shard.
// GRAD: %[[DX1:[^,]*]], {{.*}} = loom.linear_grad
// GRAD-NEXT: shard.all_reduce %[[DX1]] on @loom_grid grid_axes = [2]
// GRAD-NOT: shard.
// GRAD: loom.yield
// GRAD: %{{.*}}, %[[DWPE:.*]] = loom.embedding_grad {{.*}} vocab_start
// GRAD: shard.all_reduce %[[DWPE]] on @loom_grid grid_axes = [2]

// -----

module attributes {loom.plan = #loom.plan<dp = 1, tp = 2, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  func.func @forward(%x: tensor<2x3x8xf32>, %w: tensor<1x8x8xf32> {loom.param = "h.*.w"}) -> tensor<2x3x8xf32> {
    %y = loom.scan carry(%x : tensor<2x3x8xf32>) over(%w : tensor<1x8x8xf32>) length = 1 -> (tensor<2x3x8xf32>) {
    ^bb0(%h: tensor<2x3x8xf32>, %wl: tensor<8x8xf32>):
      // expected-error @+1 {{is row parallel and needs its input split along its last dimension (the output of a column-parallel op)}}
      %o = loom.linear %h, %wl {split = #loom<split row>} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
      loom.yield %o : tensor<2x3x8xf32>
    }
    return %y : tensor<2x3x8xf32>
  }
}

// -----

module attributes {loom.plan = #loom.plan<dp = 1, tp = 2, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  func.func @forward(%x: tensor<2x3x8xf32>, %w: tensor<1x24x8xf32> {loom.param = "h.*.w"}) -> tensor<2x3x8xf32> {
    %y = loom.scan carry(%x : tensor<2x3x8xf32>) over(%w : tensor<1x24x8xf32>) length = 1 -> (tensor<2x3x8xf32>) {
    ^bb0(%h: tensor<2x3x8xf32>, %wl: tensor<24x8xf32>):
      %qkv = loom.linear %h, %wl {split = #loom<split column>} : (tensor<2x3x8xf32>, tensor<24x8xf32>) -> tensor<2x3x24xf32>
      // expected-error @+1 {{has 1 heads, which tensor parallelism over 2 ranks does not divide}}
      %a, %lse = loom.causal_attention %qkv {num_heads = 1 : i64} : tensor<2x3x24xf32> -> tensor<2x3x8xf32>, tensor<2x1x3xf32>
      loom.yield %a : tensor<2x3x8xf32>
    }
    return %y : tensor<2x3x8xf32>
  }
}

// -----

// The column-parallel output has no row-parallel op to sum it: the loop
// carries values whole.
module attributes {loom.plan = #loom.plan<dp = 1, tp = 2, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  func.func @forward(%x: tensor<2x3x8xf32>, %w: tensor<1x8x8xf32> {loom.param = "h.*.w"}) -> tensor<2x3x8xf32> {
    %y = loom.scan carry(%x : tensor<2x3x8xf32>) over(%w : tensor<1x8x8xf32>) length = 1 -> (tensor<2x3x8xf32>) {
    ^bb0(%h: tensor<2x3x8xf32>, %wl: tensor<8x8xf32>):
      %o = loom.linear %h, %wl {split = #loom<split column>} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
      // expected-error @+1 {{'loom.yield' op needs operand #0 whole on every rank, and tensor parallelism has split it}}
      loom.yield %o : tensor<2x3x8xf32>
    }
    return %y : tensor<2x3x8xf32>
  }
}

// -----

// A carried value that is neither split along the sequence nor a partial
// sum to scatter: sequence parallelism cannot carry it.
module attributes {loom.plan = #loom.plan<dp = 1, tp = 2, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = true>} {
  func.func @forward(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    // expected-error @+1 {{carries operand #0 through the layers, which sequence parallelism needs split along the sequence or as partial sums to scatter}}
    %y = loom.scan carry(%x : tensor<2x4x8xf32>) length = 1 -> (tensor<2x4x8xf32>) {
    ^bb0(%h: tensor<2x4x8xf32>):
      loom.yield %h : tensor<2x4x8xf32>
    }
    return %y : tensor<2x4x8xf32>
  }
}

// Llama's block under tp = 2 (4 query heads in 2 key/value groups): each
// rank's fused projection holds one whole group (2 query heads, its key and
// value: 4 x 32 rows), which the rotation and the attention read as one
// group of 2 heads, and SwiGLU half the MLP width.
// LLAMA-LABEL: func.func @forward(
// LLAMA-SAME: tensor<4x128x128xf32> {loom.param = "h.*.self_attn.qkv_proj.weight", loom.tp_split = array<i64: 1, 1>}
// LLAMA: loom.rms_norm {{.*}} -> (tensor<8x64x128xf32>, tensor<8x64xf32>)
// LLAMA: loom.rotary %{{.*}} {kv_heads = 1 : i64, num_heads = 2 : i64, theta = 1.000000e+04 : f64} : tensor<8x64x128xf32>
// LLAMA-NEXT: loom.causal_attention %{{.*}} {kv_heads = 1 : i64, num_heads = 2 : i64} : tensor<8x64x128xf32> -> tensor<8x64x64xf32>, tensor<8x2x64xf32>
// LLAMA: loom.swiglu %{{.*}}, %{{.*}} : tensor<8x64x176xf32>

// Llama's block under tp = 4, more ranks than its 2 key/value heads: teams
// of 2 ranks share a group. Each rank's part of the fused projection is
// its query head (32 rows) and its group's key and value (64 rows, the
// `shared` of loom.tp_split), which the rotation and the attention read as
// one group of one head. The part is read through loom.fan_out_shared ...
// TEAMS-LABEL: func.func @forward(
// TEAMS-SAME: tensor<4x96x128xf32> {loom.param = "h.*.self_attn.qkv_proj.weight", loom.tp_split = array<i64: 1, 2, 64>}
// TEAMS: %[[PART:.*]] = loom.fan_out_shared %{{.*}} on @loom_grid axes = [2] dim = 0 teams = 2 team_size = 2 shared = 64 {loom.recompute} : tensor<96x128xf32>
// TEAMS: %[[QKV:.*]] = loom.linear %{{.*}}, %[[PART]] {split = #loom<split column>} : (tensor<8x64x128xf32>, tensor<96x128xf32>) -> tensor<8x64x96xf32>
// TEAMS-NEXT: loom.rotary %[[QKV]] {kv_heads = 1 : i64, num_heads = 1 : i64, theta = 1.000000e+04 : f64} : tensor<8x64x96xf32>
// TEAMS-NEXT: loom.causal_attention %{{.*}} {kv_heads = 1 : i64, num_heads = 1 : i64} : tensor<8x64x96xf32> -> tensor<8x64x32xf32>, tensor<8x1x64xf32>

// ... whose vector-Jacobian product sums the shared rows' gradient over
// the team: each rank puts them in its team's slot (rank / 2) of one slot
// per team, the group's all-reduce sums the slots, and the rank takes its
// team's back.
// TEAMVJP-LABEL: func.func @forward_grad(
// TEAMVJP: %[[SHARED:.*]] = tensor.extract_slice %[[WGRAD:.*]][32, 0] [64, 128] [1, 1] : tensor<96x128xf32> to tensor<64x128xf32>
// TEAMVJP: %[[ZEROS:.*]] = arith.constant dense<0.000000e+00> : tensor<2x64x128xf32>
// TEAMVJP: %[[RANK:.*]] = shard.process_multi_index on @loom_grid axes = [2] : index
// TEAMVJP: %[[TEAM:.*]] = arith.divui %[[RANK]], %{{.*}} : index
// TEAMVJP: %[[SLOTS:.*]] = tensor.insert_slice %[[SHARED]] into %[[ZEROS]][%[[TEAM]], 0, 0] [1, 64, 128] [1, 1, 1]
// TEAMVJP: %[[SUMS:.*]] = shard.all_reduce %[[SLOTS]] on @loom_grid grid_axes = [2] : tensor<2x64x128xf32>
// TEAMVJP: %[[TOTAL:.*]] = tensor.extract_slice %[[SUMS]][%[[TEAM]], 0, 0] [1, 64, 128] [1, 1, 1] : tensor<2x64x128xf32> to tensor<64x128xf32>
// TEAMVJP: tensor.insert_slice %[[TOTAL]] into %[[WGRAD]][32, 0] [64, 128] [1, 1] : tensor<64x128xf32> into tensor<96x128xf32>
