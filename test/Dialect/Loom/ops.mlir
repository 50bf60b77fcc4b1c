// RUN: loom-opt %s | FileCheck %s
// RUN: loom-opt %s | loom-opt | FileCheck %s
// RUN: loom-opt %s --mlir-print-op-generic | loom-opt | FileCheck %s

// Every op and attribute of the dialect prints in its custom form and parses
// back to the same IR.

// CHECK: module attributes
// CHECK-SAME: loom.cluster = #loom.cluster<gpu = "H100-SXM", gpus_per_node = 2, nodes = 2, inter_node_bandwidth = 50.0>
// CHECK-SAME: loom.model = #loom.model<name = "tiny", layers = 1, width = 8, heads = 2, hidden = 32, vocab = 11, padded_vocab = 16, positions = 6, tied = false, epsilon = 1.0e-05>
// CHECK-SAME: loom.plan = #loom.plan<dp = 2, tp = 2, pp = 1, zero = 1, micro_batches = 2, schedule = one_f_one_b, recompute = selective, sequence_parallel = true>
// CHECK-SAME: loom.training = #loom.training<batch = 4, sequence = 6, optimizer = adamw, lr = 0.0003, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = bf16>
module attributes {
  loom.model = #loom.model<name = "tiny", layers = 1, width = 8, heads = 2,
      hidden = 32, vocab = 11, padded_vocab = 16, positions = 6, tied = false,
      epsilon = 1.0e-5>,
  loom.training = #loom.training<batch = 4, sequence = 6, optimizer = adamw,
      lr = 3.0e-4, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8,
      weight_decay = 0.1, grad_clip = 1.0, precision = bf16>,
  loom.plan = #loom.plan<dp = 2, tp = 2, pp = 1, zero = 1, micro_batches = 2,
      schedule = one_f_one_b, recompute = selective, sequence_parallel = true>,
  loom.cluster = #loom.cluster<gpu = "H100-SXM", gpus_per_node = 2, nodes = 2,
      inter_node_bandwidth = 50.0>
} {
  // CHECK-LABEL: func.func @forward(
  // CHECK-SAME: {loom.param = "wte"}
  // CHECK-SAME: {loom.input = "tokens"}
  func.func @forward(%wte: tensor<16x8xf32> {loom.param = "wte"},
                     %wpe: tensor<6x8xf32> {loom.param = "wpe"},
                     %lnw: tensor<8xf32> {loom.param = "ln_f.weight"},
                     %lnb: tensor<8xf32> {loom.param = "ln_f.bias"},
                     %qkvw: tensor<24x8xf32> {loom.param = "h.0.attn.c_attn.weight"},
                     %qkvb: tensor<24xf32> {loom.param = "h.0.attn.c_attn.bias"},
                     %head: tensor<16x8xf32> {loom.param = "lm_head.weight"},
                     %tokens: tensor<4x6xi32> {loom.input = "tokens"},
                     %targets: tensor<4x6xi32> {loom.input = "targets"})
      -> tensor<f32> {
    // CHECK: %[[X:.*]] = loom.embedding %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x6xi32>, tensor<16x8xf32>, tensor<6x8xf32>) -> tensor<4x6x8xf32>
    %x = loom.embedding %tokens, %wte, %wpe
        : (tensor<4x6xi32>, tensor<16x8xf32>, tensor<6x8xf32>) -> tensor<4x6x8xf32>
    // CHECK: %[[H:[^,]*]], %{{[^,]*}}, %{{[^ ]*}} = loom.layer_norm %[[X]], %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : (tensor<4x6x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x6x8xf32>, tensor<4x6xf32>, tensor<4x6xf32>)
    %h, %mean, %rstd = loom.layer_norm %x, %lnw, %lnb {epsilon = 1.0e-5 : f64}
        : (tensor<4x6x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x6x8xf32>, tensor<4x6xf32>, tensor<4x6xf32>)
    // CHECK: %[[QKV:.*]] = loom.linear %[[H]], %{{.*}}, %{{.*}} : (tensor<4x6x8xf32>, tensor<24x8xf32>, tensor<24xf32>) -> tensor<4x6x24xf32>
    %qkv = loom.linear %h, %qkvw, %qkvb
        : (tensor<4x6x8xf32>, tensor<24x8xf32>, tensor<24xf32>) -> tensor<4x6x24xf32>
    // CHECK: %[[A:[^,]*]], %[[LSE:[^ ]*]] = loom.causal_attention %[[QKV]] {num_heads = 2 : i64} : tensor<4x6x24xf32> -> tensor<4x6x8xf32>, tensor<4x2x6xf32>
    %a, %lse = loom.causal_attention %qkv {num_heads = 2 : i64}
        : tensor<4x6x24xf32> -> tensor<4x6x8xf32>, tensor<4x2x6xf32>
    // CHECK: %[[G:.*]] = loom.gelu %[[A]] : tensor<4x6x8xf32>
    %g = loom.gelu %a : tensor<4x6x8xf32>
    // CHECK: %[[R:.*]] = loom.add %[[X]], %[[G]] : tensor<4x6x8xf32>
    %r = loom.add %x, %g : tensor<4x6x8xf32>
    // CHECK: %[[L:.*]] = loom.linear %[[R]], %{{.*}} : (tensor<4x6x8xf32>, tensor<16x8xf32>) -> tensor<4x6x16xf32>
    %logits = loom.linear %r, %head
        : (tensor<4x6x8xf32>, tensor<16x8xf32>) -> tensor<4x6x16xf32>
    // CHECK: loom.cross_entropy %[[L]], %{{.*}} {num_classes = 11 : i64} : (tensor<4x6x16xf32>, tensor<4x6xi32>) -> tensor<f32>
    %loss = loom.cross_entropy %logits, %targets {num_classes = 11 : i64}
        : (tensor<4x6x16xf32>, tensor<4x6xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }

  // Reduced precisions are accepted when operands agree.
  // CHECK-LABEL: func.func @bf16
  // CHECK: loom.linear {{.*}} : (tensor<2x8xbf16>, tensor<4x8xbf16>) -> tensor<2x4xbf16>
  func.func @bf16(%x: tensor<2x8xbf16>, %w: tensor<4x8xbf16>) -> tensor<2x4xbf16> {
    %y = loom.linear %x, %w : (tensor<2x8xbf16>, tensor<4x8xbf16>) -> tensor<2x4xbf16>
    return %y : tensor<2x4xbf16>
  }

  // A layer loop: the carried value, then each stacked operand's slice;
  // the body yields the next carried value and one value stacked over the
  // iterations. The body is isolated: it names only its arguments.
  // CHECK-LABEL: func.func @layers
  // CHECK: %[[S:.*]]:2 = loom.scan carry(%{{.*}} : tensor<2x8xf32>) over(%{{.*}}, %{{.*}} : tensor<3x8x8xf32>, tensor<3x8xf32>) length = 3 reverse -> (tensor<2x8xf32>, tensor<3x2x8xf32>) {
  // CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<2x8xf32>, %[[W:.*]]: tensor<8x8xf32>, %[[B:.*]]: tensor<8xf32>):
  // CHECK-NEXT: %[[Y:.*]] = loom.linear %[[X]], %[[W]], %[[B]] {loom.recompute}
  // CHECK-NEXT: loom.yield %[[Y]], %[[X]] : tensor<2x8xf32>, tensor<2x8xf32>
  func.func @layers(%x: tensor<2x8xf32>, %w: tensor<3x8x8xf32>, %b: tensor<3x8xf32>) -> (tensor<2x8xf32>, tensor<3x2x8xf32>) {
    %y:2 = loom.scan carry(%x : tensor<2x8xf32>) over(%w, %b : tensor<3x8x8xf32>, tensor<3x8xf32>) length = 3 reverse -> (tensor<2x8xf32>, tensor<3x2x8xf32>) {
    ^bb0(%xl: tensor<2x8xf32>, %wl: tensor<8x8xf32>, %bl: tensor<8xf32>):
      %z = loom.linear %xl, %wl, %bl {loom.recompute} : (tensor<2x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
      loom.yield %z, %xl : tensor<2x8xf32>, tensor<2x8xf32>
    }
    return %y#0, %y#1 : tensor<2x8xf32>, tensor<3x2x8xf32>
  }

  // The token table's gradient may start from another gradient of it.
  // CHECK-LABEL: func.func @embedding_grad_into
  // CHECK: loom.embedding_grad %{{.*}}, %{{.*}} into %{{.*}} : (tensor<2x3x4xf32>, tensor<2x3xi32>, tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<5x4xf32>)
  func.func @embedding_grad_into(%dy: tensor<2x3x4xf32>, %tokens: tensor<2x3xi32>, %head: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<5x4xf32>) {
    %a, %b = loom.embedding_grad %dy, %tokens into %head : (tensor<2x3x4xf32>, tensor<2x3xi32>, tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<5x4xf32>)
    return %a, %b : tensor<8x4xf32>, tensor<5x4xf32>
  }

  // CHECK-LABEL: func.func @scatter_add_rows
  // CHECK: loom.scatter_add_rows %{{.*}}, %{{.*}} into %{{.*}} : tensor<6x4xf32>, tensor<6xi32> -> tensor<8x4xf32>
  // CHECK: loom.scatter_add_rows %{{.*}}, %{{.*}} into %{{.*}} row_start %{{.*}} : tensor<6x4xbf16>, tensor<6xi32> -> tensor<8x4xf32>
  func.func @scatter_add_rows(%u: tensor<6x4xf32>, %ids: tensor<6xi32>, %init: tensor<8x4xf32>, %start: index, %n: tensor<6x4xbf16>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
    %a = loom.scatter_add_rows %u, %ids into %init : tensor<6x4xf32>, tensor<6xi32> -> tensor<8x4xf32>
    %b = loom.scatter_add_rows %n, %ids into %init row_start %start : tensor<6x4xbf16>, tensor<6xi32> -> tensor<8x4xf32>
    return %a, %b : tensor<8x4xf32>, tensor<8x4xf32>
  }

  // CHECK-LABEL: func.func @softmax_stats
  // CHECK: loom.softmax_stats %{{.*}} {classes = 5 : i64} : tensor<6x8xbf16> -> tensor<6xf32>
  func.func @softmax_stats(%logits: tensor<6x8xbf16>) -> (tensor<6xf32>, tensor<6xf32>) {
    %max, %sum = loom.softmax_stats %logits {classes = 5 : i64} : tensor<6x8xbf16> -> tensor<6xf32>
    return %max, %sum : tensor<6xf32>, tensor<6xf32>
  }

  // CHECK-LABEL: func.func @pipeline
  // CHECK: loom.send %{{.*}} to 1 tag 0 : tensor<2x3x4xf32>
  // CHECK: loom.recv from 1 tag 1 : tensor<2x3x4xf32>
  func.func @pipeline(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
    loom.send %x to 1 tag 0 : tensor<2x3x4xf32>
    %g = loom.recv from 1 tag 1 : tensor<2x3x4xf32>
    return %g : tensor<2x3x4xf32>
  }

  // CHECK-LABEL: func.func @trace
  // CHECK: loom.trace_begin backward micro_batch 2 chunk 0
  // CHECK: loom.trace_end backward
  // CHECK: loom.trace_begin optimizer micro_batch -1 chunk -1
  // CHECK: loom.trace_end optimizer
  func.func @trace() {
    loom.trace_begin backward micro_batch 2 chunk 0
    loom.trace_end backward
    loom.trace_begin optimizer micro_batch -1 chunk -1
    loom.trace_end optimizer
    return
  }

  // CHECK-LABEL: func.func @scalar_functions
  // CHECK: %[[Y:.*]] = loom.scalar.gelu %{{.*}} : f32
  // CHECK: loom.scalar.gelu_grad %{{.*}}, %[[Y]] : f32
  func.func @scalar_functions(%x: f32, %g: f32) -> f32 {
    %y = loom.scalar.gelu %x : f32
    %d = loom.scalar.gelu_grad %g, %y : f32
    return %d : f32
  }

  // A Llama's parts print; GPT-2's (the defaults) are left out above.
  // CHECK: module @llama attributes {loom.model = #loom.model<name = "tiny-llama", layers = 1, width = 8, heads = 2, hidden = 24, vocab = 11, padded_vocab = 16, positions = 6, tied = false, epsilon = 1.0e-06, norm = rmsnorm, position = rope, rope_theta = 500000.0, mlp = swiglu, biases = qkv, kv_heads = 1, rope_factor = 8.0, rope_original_context = 8192>}
  module @llama attributes {
    loom.model = #loom.model<name = "tiny-llama", layers = 1, width = 8,
        heads = 2, hidden = 24, vocab = 11, padded_vocab = 16, positions = 6,
        tied = false, epsilon = 1.0e-6, norm = rmsnorm, position = rope,
        rope_theta = 500000.0, mlp = swiglu, biases = qkv, kv_heads = 1,
      rope_factor = 8.0, rope_original_context = 8192>} {}

  // The ops of Llama's block, and an embedding without a position table.
  // CHECK-LABEL: func.func @llama_block
  // CHECK: loom.embedding %{{.*}}, %{{.*}} : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: loom.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
  // CHECK: loom.rms_norm %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  // CHECK: loom.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  // CHECK: loom.rotary %{{.*}} {num_heads = 2 : i64, theta = 1.000000e+04 : f64} : tensor<2x4x24xf32>
  // CHECK: loom.rotary %{{.*}} {inverse, num_heads = 2 : i64, theta = 1.000000e+04 : f64} : tensor<2x4x24xf32>
  // CHECK: loom.rotary %{{.*}} {llama3_scaling = array<f64: 8.000000e+00, 1.000000e+00, 4.000000e+00, 6.400000e+01>, num_heads = 2 : i64, theta = 5.000000e+05 : f64} : tensor<2x4x24xf32>
  // CHECK: loom.group_qkv %{{.*}} {kv_heads = 1 : i64, num_heads = 2 : i64} : tensor<2x4x16xf32> -> tensor<2x4x24xf32>
  // CHECK: loom.group_qkv_grad %{{.*}} {kv_heads = 1 : i64, num_heads = 2 : i64} : tensor<2x4x24xf32> -> tensor<2x4x16xf32>
  // Grouped-query attention on the grouped layout: 2 query heads of 4
  // channels in one group, (2 + 2) x 4 channels a token.
  // CHECK: loom.rotary %{{.*}} {kv_heads = 1 : i64, num_heads = 2 : i64, theta = 1.000000e+04 : f64} : tensor<2x4x16xf32>
  // CHECK: loom.causal_attention %{{.*}} {kv_heads = 1 : i64, num_heads = 2 : i64} : tensor<2x4x16xf32> -> tensor<2x4x8xf32>, tensor<2x2x4xf32>
  // CHECK: loom.causal_attention_grad %{{.*}} {kv_heads = 1 : i64, num_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x2x4xf32>) -> tensor<2x4x16xf32>
  // CHECK: loom.swiglu %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
  // CHECK: loom.swiglu_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
  func.func @llama_block(%t: tensor<2x4xi32>, %wte: tensor<16x8xf32>,
                         %w: tensor<8xf32>, %qkv: tensor<2x4x24xf32>,
                         %grouped: tensor<2x4x16xf32>) {
    %x = loom.embedding %t, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
    %dwte = loom.embedding_grad %x, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
    %h, %rstd = loom.rms_norm %x, %w {epsilon = 1.0e-5 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
    %dx, %dw = loom.rms_norm_grad %h, %x, %w, %rstd : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
    %r = loom.rotary %qkv {num_heads = 2 : i64, theta = 10000.0 : f64} : tensor<2x4x24xf32>
    %back = loom.rotary %r {num_heads = 2 : i64, theta = 10000.0 : f64, inverse} : tensor<2x4x24xf32>
    %scaled = loom.rotary %qkv {num_heads = 2 : i64, theta = 500000.0 : f64, llama3_scaling = array<f64: 8.0, 1.0, 4.0, 64.0>} : tensor<2x4x24xf32>
    %all = loom.group_qkv %grouped {num_heads = 2 : i64, kv_heads = 1 : i64} : tensor<2x4x16xf32> -> tensor<2x4x24xf32>
    %dgrouped = loom.group_qkv_grad %all {num_heads = 2 : i64, kv_heads = 1 : i64} : tensor<2x4x24xf32> -> tensor<2x4x16xf32>
    %gr = loom.rotary %grouped {num_heads = 2 : i64, kv_heads = 1 : i64, theta = 10000.0 : f64} : tensor<2x4x16xf32>
    %go, %glse = loom.causal_attention %gr {num_heads = 2 : i64, kv_heads = 1 : i64} : tensor<2x4x16xf32> -> tensor<2x4x8xf32>, tensor<2x2x4xf32>
    %gd = loom.causal_attention_grad %go, %gr, %go, %glse {num_heads = 2 : i64, kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x2x4xf32>) -> tensor<2x4x16xf32>
    %s = loom.swiglu %h, %x : tensor<2x4x8xf32>
    %dg, %du = loom.swiglu_grad %s, %h, %x : tensor<2x4x8xf32>
    return
  }
  // CHECK-LABEL: func.func @fan_outs
  // CHECK: loom.fan_out %{{.*}} on @loom_grid axes = [2] : tensor<4x8xf32>
  // CHECK: loom.fan_out_shared %{{.*}} on @loom_grid axes = [2] dim = 0 teams = 2 team_size = 2 shared = 16 : tensor<24x8xf32>
  func.func @fan_outs(%x: tensor<4x8xf32>, %w: tensor<24x8xf32> {loom.param = "w", loom.tp_split = array<i64: 0, 2, 16>}) {
    %y = loom.fan_out %x on @loom_grid axes = [2] : tensor<4x8xf32>
    %p = loom.fan_out_shared %w on @loom_grid axes = [2] dim = 0 teams = 2 team_size = 2 shared = 16 : tensor<24x8xf32>
    return
  }
}
