// RUN: loomc %S/Inputs/auto-plan.json --plan dp=2,recompute=full --emit=loom | loom-opt --loom-recompute | FileCheck %s
// RUN: loomc %S/Inputs/auto-plan.json --plan dp=2,recompute=full --emit=loom | loom-opt --loom-recompute --loom-differentiate | FileCheck %s --check-prefix=GRAD
// RUN: loomc %S/Inputs/auto-plan.json --plan tp=2,sp=1,recompute=full --emit=loom | loom-opt --loom-tensor-parallel --loom-recompute | FileCheck %s --check-prefix=TP
// RUN: loomc %S/Inputs/auto-plan.json --plan dp=2,recompute=selective --emit=loom | loom-opt --loom-recompute | FileCheck %s --check-prefix=SELECTIVE
// RUN: loom-opt %s --loom-recompute --split-input-file --verify-diagnostics

// Full recomputation marks every op of the layer body; the embedding and
// the head are left alone.
// CHECK: loom.scan
// CHECK: loom.layer_norm {{.*}}loom.recompute
// CHECK: loom.linear {{.*}}loom.recompute
// CHECK: loom.causal_attention {{.*}}loom.recompute
// CHECK: loom.linear {{.*}}loom.recompute
// CHECK: loom.add {{.*}}loom.recompute
// CHECK: loom.layer_norm {{.*}}loom.recompute
// CHECK: loom.linear {{.*}}loom.recompute
// CHECK: loom.gelu {{.*}}loom.recompute
// CHECK: loom.linear {{.*}}loom.recompute
// CHECK: loom.add {{.*}}loom.recompute
// CHECK: loom.yield
// CHECK-NOT: loom.recompute
// CHECK: return

// So the forward scan saves only each layer's input, and the backward body
// runs the layer's forward again before its VJP.
// GRAD-LABEL: func.func @forward_grad
// GRAD: %[[FWD:.*]]:2 = loom.scan carry
// GRAD: loom.yield %{{.*}}, %[[IN:[^ ]*]] : tensor<4x4x8xf32>, tensor<4x4x8xf32>
// GRAD: loom.scan carry({{.*}}) over({{.*}}, %[[FWD]]#1 : {{.*}}) length = 2 reverse
// GRAD: loom.layer_norm
// GRAD: loom.causal_attention
// GRAD: loom.gelu
// GRAD: loom.linear_grad
// GRAD: loom.gelu_grad

// Tensor-parallel collectives are recomputed with the rest (under SP the
// layer input is the rank's part of the sequence).
// TP: loom.scan carry(%{{.*}} : tensor<4x2x8xf32>)
// TP: shard.all_gather {{.*}}loom.recompute
// TP: shard.reduce_scatter {{.*}}loom.recompute

// Selective: attention's VJP recomputes its core from QKV already.
// SELECTIVE-NOT: loom.recompute

// -----

module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = full, sequence_parallel = false>} {
  // expected-error @+1 {{recompute=full recomputes the layers, and @forward has no layer loop (loom.scan)}}
  func.func @forward(%x: tensor<2x3xf32> {loom.param = "x"}) -> (tensor<2x3xf32> {loom.output = "loss"}) {
    return %x : tensor<2x3xf32>
  }
}
