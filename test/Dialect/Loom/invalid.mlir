// RUN: loom-opt %s -split-input-file -verify-diagnostics

// Every diagnostic of the loom dialect's verifiers, once.

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

func.func @embedding_element_type(%t: tensor<2x4xi32>, %wte: tensor<8x6xf32>, %wpe: tensor<4x6xbf16>) {
  // expected-error @+2 {{expected all float operands and results to have element type 'f32', got 'bf16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = loom.embedding %t, %wte, %wpe : (tensor<2x4xi32>, tensor<8x6xf32>, tensor<4x6xbf16>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @embedding_tokens_rank(%t: tensor<8xi32>, %wte: tensor<8x6xf32>, %wpe: tensor<4x6xf32>) {
  // expected-error @+2 {{expected tokens of rank 2 [batch, sequence], got shape [8]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = loom.embedding %t, %wte, %wpe : (tensor<8xi32>, tensor<8x6xf32>, tensor<4x6xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @embedding_wpe_width(%t: tensor<2x4xi32>, %wte: tensor<8x6xf32>, %wpe: tensor<4x5xf32>) {
  // expected-error @+2 {{expected wpe of width 6 to match wte [8, 6], got [4, 5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = loom.embedding %t, %wte, %wpe : (tensor<2x4xi32>, tensor<8x6xf32>, tensor<4x5xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @embedding_positions(%t: tensor<2x5xi32>, %wte: tensor<8x6xf32>, %wpe: tensor<4x6xf32>) {
  // expected-error @+2 {{sequence length 5 exceeds the 4 positions of wpe}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = loom.embedding %t, %wte, %wpe : (tensor<2x5xi32>, tensor<8x6xf32>, tensor<4x6xf32>) -> tensor<2x5x6xf32>
  return
}

// -----

func.func @embedding_result(%t: tensor<2x4xi32>, %wte: tensor<8x6xf32>, %wpe: tensor<4x6xf32>) {
  // expected-error @+2 {{'loom.embedding' op inferred type(s) 'tensor<2x4x6xf32>' are incompatible with return type(s) of operation 'tensor<2x4x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = loom.embedding %t, %wte, %wpe : (tensor<2x4xi32>, tensor<8x6xf32>, tensor<4x6xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @embedding_dynamic(%t: tensor<2x?xi32>, %wte: tensor<8x6xf32>, %wpe: tensor<4x6xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit signless integer values}}
  %0 = loom.embedding %t, %wte, %wpe : (tensor<2x?xi32>, tensor<8x6xf32>, tensor<4x6xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @layer_norm_rank(%x: tensor<f32>, %w: tensor<6xf32>, %b: tensor<6xf32>) {
  // expected-error @+2 {{expected an input of rank at least 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = loom.layer_norm %x, %w, %b {epsilon = 1.0e-5 : f64} : (tensor<f32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @layer_norm_weight(%x: tensor<2x6xf32>, %w: tensor<5xf32>, %b: tensor<6xf32>) {
  // expected-error @+2 {{expected weight of shape [6] (the input's last dimension), got [5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = loom.layer_norm %x, %w, %b {epsilon = 1.0e-5 : f64} : (tensor<2x6xf32>, tensor<5xf32>, tensor<6xf32>) -> (tensor<2x6xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @layer_norm_epsilon(%x: tensor<2x6xf32>, %w: tensor<6xf32>, %b: tensor<6xf32>) {
  // expected-error @+1 {{attribute 'epsilon' failed to satisfy constraint: 64-bit float attribute whose value is finite and positive}}
  %0:3 = loom.layer_norm %x, %w, %b {epsilon = 0.0 : f64} : (tensor<2x6xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<2x6xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @linear_rank(%x: tensor<f32>, %w: tensor<4x6xf32>) {
  // expected-error @+2 {{expected an input of rank at least 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = loom.linear %x, %w : (tensor<f32>, tensor<4x6xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @linear_weight_rank(%x: tensor<2x6xf32>, %w: tensor<24xf32>) {
  // expected-error @+2 {{expected weight of rank 2 [out, in], got shape [24]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = loom.linear %x, %w : (tensor<2x6xf32>, tensor<24xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_weight_layout(%x: tensor<2x6xf32>, %w: tensor<6x4xf32>) {
  // expected-error @+2 {{expected weight of shape [N, 6] ((out, in) layout, in = the input's last dimension), got [6, 4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = loom.linear %x, %w : (tensor<2x6xf32>, tensor<6x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_bias(%x: tensor<2x6xf32>, %w: tensor<4x6xf32>, %b: tensor<6xf32>) {
  // expected-error @+2 {{expected bias of shape [4] (the weight's out dimension), got [6]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = loom.linear %x, %w, %b : (tensor<2x6xf32>, tensor<4x6xf32>, tensor<6xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_result(%x: tensor<3x2x6xf32>, %w: tensor<4x6xf32>) {
  // expected-error @+2 {{'loom.linear' op inferred type(s) 'tensor<3x2x4xf32>' are incompatible with return type(s) of operation 'tensor<6x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = loom.linear %x, %w : (tensor<3x2x6xf32>, tensor<4x6xf32>) -> tensor<6x4xf32>
  return
}

// -----

func.func @attention_rank(%qkv: tensor<8x24xf32>) {
  // expected-error @+2 {{expected qkv of rank 3 [batch, sequence, 3 * width], got shape [8, 24]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = loom.causal_attention %qkv {num_heads = 2 : i64} : tensor<8x24xf32> -> tensor<8x8xf32>, tensor<8x2xf32>
  return
}

// -----

func.func @attention_qkv(%qkv: tensor<2x4x25xf32>) {
  // expected-error @+2 {{expected the last dimension of qkv (25) to be 3 * width}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = loom.causal_attention %qkv {num_heads = 2 : i64} : tensor<2x4x25xf32> -> tensor<2x4x8xf32>, tensor<2x2x4xf32>
  return
}

// -----

func.func @attention_heads(%qkv: tensor<2x4x24xf32>) {
  // expected-error @+2 {{expected num_heads (3) to divide the width (8)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = loom.causal_attention %qkv {num_heads = 3 : i64} : tensor<2x4x24xf32> -> tensor<2x4x8xf32>, tensor<2x3x4xf32>
  return
}

// -----

func.func @attention_heads_positive(%qkv: tensor<2x4x24xf32>) {
  // expected-error @+1 {{attribute 'num_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0:2 = loom.causal_attention %qkv {num_heads = 0 : i64} : tensor<2x4x24xf32> -> tensor<2x4x8xf32>, tensor<2x1x4xf32>
  return
}

// -----

func.func @attention_result(%qkv: tensor<2x4x24xf32>) {
  // expected-error @+2 {{'loom.causal_attention' op inferred type(s) 'tensor<2x4x8xf32>', 'tensor<2x2x4xf32>' are incompatible with return type(s) of operation 'tensor<2x4x24xf32>', 'tensor<2x2x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = loom.causal_attention %qkv {num_heads = 2 : i64} : tensor<2x4x24xf32> -> tensor<2x4x24xf32>, tensor<2x2x4xf32>
  return
}

// -----

func.func @gelu_type(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "loom.gelu"(%x) : (tensor<2x4xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @add_type(%a: tensor<2x4xf32>, %b: tensor<2x5xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "loom.add"(%a, %b) : (tensor<2x4xf32>, tensor<2x5xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @cross_entropy_rank(%l: tensor<8x11xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+2 {{expected logits of rank 3 [batch, sequence, vocab], got shape [8, 11]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = loom.cross_entropy %l, %t {num_classes = 11 : i64} : (tensor<8x11xf32>, tensor<2x4xi32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_targets(%l: tensor<2x4x11xf32>, %t: tensor<4x2xi32>) {
  // expected-error @+2 {{expected targets of shape [2, 4] (the batch and sequence of the logits), got [4, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = loom.cross_entropy %l, %t {num_classes = 11 : i64} : (tensor<2x4x11xf32>, tensor<4x2xi32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_classes(%l: tensor<2x4x11xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+2 {{num_classes (12) exceeds the logits' vocabulary dimension (11)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = loom.cross_entropy %l, %t {num_classes = 12 : i64} : (tensor<2x4x11xf32>, tensor<2x4xi32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_result(%l: tensor<2x4x11xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+1 {{result #0 must be 0D tensor of 32-bit float values}}
  %0 = loom.cross_entropy %l, %t {num_classes = 11 : i64} : (tensor<2x4x11xf32>, tensor<2x4xi32>) -> tensor<2x4xf32>
  return
}

//===----------------------------------------------------------------------===//
// Argument attributes
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{argument #0: 'loom.param' must be a non-empty string}}
func.func @param_name(%w: tensor<4xf32> {loom.param = 3 : i64}) {
  return
}

// -----

// expected-error @+1 {{argument #0: unknown loom argument attribute 'loom.weight'}}
func.func @param_unknown(%w: tensor<4xf32> {loom.weight = "w"}) {
  return
}

// -----

// expected-error @+1 {{argument #0 ('loom.param = "w"') must be a tensor or memref of static shape}}
func.func @param_scalar(%w: f32 {loom.param = "w"}) {
  return
}

// -----

// expected-error @+1 {{argument #1 ('loom.input = "tokens"') must hold integer ids of shape [batch, sequence]}}
func.func @tokens_flat(%w: tensor<4xf32> {loom.param = "w"}, %t: tensor<8xi32> {loom.input = "tokens"}) {
  return
}

//===----------------------------------------------------------------------===//
// Module attributes
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{attribute 'loom.model' must be a #loom.model, got "gpt2"}}
module attributes {loom.model = "gpt2"} {}

// -----

// expected-error @+1 {{attribute 'loom.training' must be a #loom.training, got 1 : i64}}
module attributes {loom.training = 1} {}

// -----

// expected-error @+1 {{attribute 'loom.plan' must be a #loom.plan or "auto", got "dp=2"}}
module attributes {loom.plan = "dp=2"} {}

// -----

// expected-error @+1 {{attribute 'loom.cluster' must be a #loom.cluster, got "A100"}}
module attributes {loom.cluster = "A100"} {}

// -----

// expected-error @+1 {{unknown loom attribute 'loom.shape'}}
module attributes {loom.shape = 1} {}

// -----

// expected-error @+1 {{'heads' must be positive, got 0}}
module attributes {loom.model = #loom.model<name = "m", layers = 2, width = 8, heads = 0, hidden = 32, vocab = 10, padded_vocab = 10, positions = 4, tied = true, epsilon = 1.0e-5>} {}

// -----

// expected-error @+1 {{'width' (8) must be divisible by 'heads' (3)}}
module attributes {loom.model = #loom.model<name = "m", layers = 2, width = 8, heads = 3, hidden = 32, vocab = 10, padded_vocab = 10, positions = 4, tied = true, epsilon = 1.0e-5>} {}

// -----

// expected-error @+1 {{'padded_vocab' (9) must be at least 'vocab' (10)}}
module attributes {loom.model = #loom.model<name = "m", layers = 2, width = 8, heads = 2, hidden = 32, vocab = 10, padded_vocab = 9, positions = 4, tied = true, epsilon = 1.0e-5>} {}

// -----

// expected-error @+1 {{'epsilon' must be finite and positive, got -1.0}}
module attributes {loom.model = #loom.model<name = "m", layers = 2, width = 8, heads = 2, hidden = 32, vocab = 10, padded_vocab = 10, positions = 4, tied = true, epsilon = -1.0>} {}

// -----

// expected-error @+1 {{'sequence' must be positive, got 0}}
module attributes {loom.training = #loom.training<batch = 4, sequence = 0, optimizer = sgd, lr = 0.1, precision = fp32>} {}

// -----

// expected-error @+1 {{'lr' must be positive, got 0.0}}
module attributes {loom.training = #loom.training<batch = 4, sequence = 8, optimizer = sgd, lr = 0.0, precision = fp32>} {}

// -----

// expected-error @+1 {{AdamW betas must lie in [0, 1), got beta1 = 0.9, beta2 = 1.0}}
module attributes {loom.training = #loom.training<batch = 4, sequence = 8, optimizer = adamw, lr = 0.1, beta1 = 0.9, beta2 = 1.0, eps = 1.0e-8, precision = fp32>} {}

// -----

// expected-error @+1 {{'eps' must be positive for AdamW, got 0.0}}
module attributes {loom.training = #loom.training<batch = 4, sequence = 8, optimizer = adamw, lr = 0.1, beta1 = 0.9, beta2 = 0.95, precision = fp32>} {}

// -----

// expected-error @+1 {{'momentum' must lie in [0, 1), got 1.5}}
module attributes {loom.training = #loom.training<batch = 4, sequence = 8, optimizer = sgd, lr = 0.1, momentum = 1.5, precision = fp32>} {}

// -----

// expected-error @+1 {{'weight_decay' must not be negative, got -0.1}}
module attributes {loom.training = #loom.training<batch = 4, sequence = 8, optimizer = sgd, lr = 0.1, weight_decay = -0.1, precision = fp32>} {}

// -----

// expected-error @+1 {{'grad_clip' must not be negative, got -1.0}}
module attributes {loom.training = #loom.training<batch = 4, sequence = 8, optimizer = sgd, lr = 0.1, grad_clip = -1.0, precision = fp32>} {}

// -----

// expected-error @+1 {{'dp' must be positive, got 0}}
module attributes {loom.plan = #loom.plan<dp = 0, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {}

// -----

// expected-error @+1 {{'zero' must be a ZeRO stage from 0 to 3, got 4}}
module attributes {loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 4, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {}

// -----

// expected-error @+1 {{'sequence_parallel' needs tensor parallelism (tp > 1)}}
module attributes {loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = true>} {}

// -----

// expected-error @+1 {{'stage_layers' must give the layers of pp * virtual_stages = 2 stages, got 3}}
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 2, zero = 0, micro_batches = 2, schedule = gpipe, recompute = none, sequence_parallel = false, stage_layers = [1, 1, 2]>} {}

// -----

// expected-error @+1 {{'stage_layers' must be positive, got 0}}
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 2, zero = 0, micro_batches = 2, schedule = gpipe, recompute = none, sequence_parallel = false, stage_layers = [0, 2]>} {}

// -----

// expected-error @+1 {{'gpu' must name a GPU kind}}
module attributes {loom.cluster = #loom.cluster<gpu = "", gpus_per_node = 8, nodes = 1>} {}

// -----

// expected-error @+1 {{'nodes' must be positive, got 0}}
module attributes {loom.cluster = #loom.cluster<gpu = "A100-80GB", gpus_per_node = 8, nodes = 0>} {}

// -----

// expected-error @+1 {{link bandwidths must not be negative}}
module attributes {loom.cluster = #loom.cluster<gpu = "A100-80GB", gpus_per_node = 8, nodes = 1, intra_node_bandwidth = -1.0>} {}

//===----------------------------------------------------------------------===//
// A plan against the model, the training setup and the cluster
//===----------------------------------------------------------------------===//

// -----

// expected-error @+2 {{plan.tp: tensor parallelism 4 does not divide the 6 heads (model.n_head)}}
// expected-note @+1 {{plan.tp: tensor parallelism 4 does not divide the token table's 10 rows (model.padded_vocab_size; pad the vocabulary, e.g. with loomc --pad-vocab)}}
module attributes {
  loom.model = #loom.model<name = "m", layers = 2, width = 12, heads = 6, hidden = 48, vocab = 10, padded_vocab = 10, positions = 4, tied = true, epsilon = 1.0e-5>,
  loom.plan = #loom.plan<dp = 1, tp = 4, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {}

// -----

// expected-error @+1 {{plan.tp: tensor parallelism 4 does not divide the MLP width 30}}
module attributes {
  loom.model = #loom.model<name = "m", layers = 2, width = 8, heads = 4, hidden = 30, vocab = 10, padded_vocab = 12, positions = 4, tied = true, epsilon = 1.0e-5>,
  loom.plan = #loom.plan<dp = 1, tp = 4, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {}

// -----

// expected-error @+1 {{plan.pp: 3 pipeline stages exceed the 2 layers (model.n_layer)}}
module attributes {
  loom.model = #loom.model<name = "m", layers = 2, width = 8, heads = 4, hidden = 32, vocab = 10, padded_vocab = 10, positions = 4, tied = true, epsilon = 1.0e-5>,
  loom.plan = #loom.plan<dp = 1, tp = 1, pp = 3, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {}

// -----

// expected-error @+1 {{plan.stage_layers: the stages' layers add up to 3, the model has 2 (model.n_layer)}}
module attributes {
  loom.model = #loom.model<name = "m", layers = 2, width = 8, heads = 4, hidden = 32, vocab = 10, padded_vocab = 10, positions = 4, tied = true, epsilon = 1.0e-5>,
  loom.plan = #loom.plan<dp = 1, tp = 1, pp = 2, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false, stage_layers = [1, 2]>} {}

// -----

// expected-error @+1 {{plan.mb: dp * micro_batches = 2 * 3 does not divide the batch of 8 sequences (training.batch_size)}}
module attributes {
  loom.training = #loom.training<batch = 8, sequence = 6, optimizer = sgd, lr = 0.1, precision = fp32>,
  loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 0, micro_batches = 3, schedule = gpipe, recompute = none, sequence_parallel = false>} {}

// -----

// expected-error @+1 {{plan.sp: tensor parallelism 4 does not divide the sequence length 6 (training.sequence_length)}}
module attributes {
  loom.training = #loom.training<batch = 8, sequence = 6, optimizer = sgd, lr = 0.1, precision = fp32>,
  loom.plan = #loom.plan<dp = 1, tp = 4, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = true>} {}

// -----

// expected-error @+1 {{plan: dp * tp * pp = 2 * 1 * 1 = 2 ranks, but the cluster has 8 GPUs (cluster.nodes * cluster.gpus_per_node)}}
module attributes {
  loom.cluster = #loom.cluster<gpu = "A100-80GB", gpus_per_node = 8, nodes = 1>,
  loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {}

// -----

// The padded vocabulary is split over tensor-parallel ranks too.
// expected-error @+1 {{plan.tp: tensor parallelism 2 does not divide the token table's 11 rows}}
module attributes {
  loom.model = #loom.model<name = "m", layers = 2, width = 8, heads = 4, hidden = 32, vocab = 11, padded_vocab = 11, positions = 4, tied = true, epsilon = 1.0e-5>,
  loom.plan = #loom.plan<dp = 1, tp = 2, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {}

// -----

// expected-error @+1 {{'gpu' must name a GPU kind of the catalogue (V100-16GB, V100-32GB, A100-40GB, A100-80GB, H100-SXM, H200), got "A100"}}
module attributes {loom.cluster = #loom.cluster<gpu = "A100", gpus_per_node = 8, nodes = 1>} {}

// -----

// A plan left to the planner.
module attributes {loom.plan = "auto"} {}

//===----------------------------------------------------------------------===//
// Layer loops
//===----------------------------------------------------------------------===//

// -----

func.func @scan_leading(%x: tensor<2xf32>, %w: tensor<4x2xf32>) {
  // expected-error @+1 {{expected stacked operand #0 to have a leading dimension of the length 3, got shape [4, 2]}}
  %y = loom.scan carry(%x : tensor<2xf32>) over(%w : tensor<4x2xf32>) length = 3 -> (tensor<2xf32>) {
  ^bb0(%xl: tensor<2xf32>, %wl: tensor<2xf32>):
    loom.yield %xl : tensor<2xf32>
  }
  return
}

// -----

func.func @scan_arguments(%x: tensor<2xf32>, %w: tensor<3x2xf32>) {
  // expected-error @+1 {{expected the body's arguments to be the carried values' types then one slice per stacked operand, got 'tensor<2xf32>', 'tensor<3x2xf32>'}}
  %y = loom.scan carry(%x : tensor<2xf32>) over(%w : tensor<3x2xf32>) length = 3 -> (tensor<2xf32>) {
  ^bb0(%xl: tensor<2xf32>, %wl: tensor<3x2xf32>):
    loom.yield %xl : tensor<2xf32>
  }
  return
}

// -----

func.func @scan_yield_count(%x: tensor<2xf32>) {
  // expected-error @+1 {{yields 2 values for 1 results, of which 1 are carried}}
  %y = loom.scan carry(%x : tensor<2xf32>) length = 3 -> (tensor<2xf32>) {
  ^bb0(%xl: tensor<2xf32>):
    loom.yield %xl, %xl : tensor<2xf32>, tensor<2xf32>
  }
  return
}

// -----

func.func @scan_carry_type(%x: tensor<2xf32>, %z: tensor<3xf32>) {
  // expected-error @+1 {{carried value #0 has type 'tensor<2xf32>' but the body yields 'tensor<3xf32>' and the op returns 'tensor<2xf32>'}}
  %y = loom.scan carry(%x : tensor<2xf32>) length = 3 -> (tensor<2xf32>) {
  ^bb0(%xl: tensor<2xf32>):
    %c = arith.constant dense<0.0> : tensor<3xf32>
    loom.yield %c : tensor<3xf32>
  }
  return
}

// -----

func.func @scan_stacked_result(%x: tensor<2xf32>) {
  // expected-error @+1 {{result #1 must stack the yielded 'tensor<2xf32>' over 3 iterations, got 'tensor<2x2xf32>'}}
  %y:2 = loom.scan carry(%x : tensor<2xf32>) length = 3 -> (tensor<2xf32>, tensor<2x2xf32>) {
  ^bb0(%xl: tensor<2xf32>):
    loom.yield %xl, %xl : tensor<2xf32>, tensor<2xf32>
  }
  return
}

// -----

func.func @scan_isolated(%x: tensor<2xf32>, %w: tensor<2xf32>) {
  // expected-note @+1 {{required by region isolation constraints}}
  %y = loom.scan carry(%x : tensor<2xf32>) length = 3 -> (tensor<2xf32>) {
  ^bb0(%xl: tensor<2xf32>):
    // expected-error @+1 {{using value defined outside the region}}
    %z = loom.add %xl, %w : tensor<2xf32>
    loom.yield %z : tensor<2xf32>
  }
  return
}

// -----

func.func @recompute_outside(%x: tensor<2xf32>) {
  // expected-error @+1 {{attribute 'loom.recompute' must be a unit attribute on an op inside a loom.scan body}}
  %y = loom.gelu %x {loom.recompute} : tensor<2xf32>
  return
}

// -----

func.func @embedding_grad_init(%dy: tensor<2x3x4xf32>, %tokens: tensor<2x3xi32>, %head: tensor<9x4xf32>) {
  // expected-error @+1 {{expected wte_init of the type of wte_grad ('tensor<8x4xf32>'), got 'tensor<9x4xf32>'}}
  %a, %b = loom.embedding_grad %dy, %tokens into %head : (tensor<2x3x4xf32>, tensor<2x3xi32>, tensor<9x4xf32>) -> (tensor<8x4xf32>, tensor<5x4xf32>)
  return
}

// -----

// expected-error @+1 {{argument #0: 'loom.layers' must be [first, count, ...]: runs of layers whose counts add up to the argument's leading dimension}}
func.func private @stage(%w: tensor<2x4xf32> {loom.param = "h.*.w", loom.layers = array<i64: 0, 3>})

// -----

// expected-error @+1 {{attribute 'loom.stage' must be a non-negative integer on a function, got -1}}
func.func private @stage(%w: tensor<2x4xf32>) attributes {loom.stage = -1 : i64}

// -----

// Infinities and NaNs (here as their bit patterns, the only way MLIR's float
// syntax writes them) are refused like any other out-of-range value.

// expected-error @+1 {{'lr' must be finite, got inf}}
module attributes {loom.training = #loom.training<batch = 4, sequence = 8, optimizer = adamw, lr = 0x7FF0000000000000, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, precision = fp32>} {}

// -----

// expected-error @+1 {{'lr' must be finite, got -inf}}
module attributes {loom.training = #loom.training<batch = 4, sequence = 8, optimizer = adamw, lr = 0xFFF0000000000000, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-8, precision = fp32>} {}

// -----

// expected-error @+1 {{'eps' must be positive for AdamW, got nan}}
module attributes {loom.training = #loom.training<batch = 4, sequence = 8, optimizer = adamw, lr = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 0x7FF8000000000000, precision = fp32>} {}

// -----

// expected-error @+1 {{'epsilon' must be finite and positive, got nan}}
module attributes {loom.model = #loom.model<name = "m", layers = 2, width = 8, heads = 2, hidden = 32, vocab = 10, padded_vocab = 10, positions = 4, tied = true, epsilon = 0x7FF8000000000000>} {}

// -----

func.func @adamw_beta(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{attribute 'beta1' failed to satisfy constraint: 64-bit float attribute whose value lies in [0, 1)}}
  %0:3 = loom.adamw %p, %p, %p, %p, %s, %s, %s {beta1 = -1.0 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return
}

// -----

func.func @adamw_epsilon(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{attribute 'epsilon' failed to satisfy constraint: 64-bit float attribute whose value is finite and positive}}
  %0:3 = loom.adamw %p, %p, %p, %p, %s, %s, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 0x7FF8000000000000 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return
}

// -----

func.func @sgd_weight_decay(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{attribute 'weight_decay' failed to satisfy constraint: 64-bit float attribute whose value is finite and not negative}}
  %0:2 = loom.sgd %p, %p, %p, %s, %s {momentum = 0.9 : f64, weight_decay = 0x7FF0000000000000 : f64} : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{a cluster has at most 1048576 GPUs, got 1099511627776 nodes of 8}}
module attributes {loom.cluster = #loom.cluster<gpu = "A100-80GB", gpus_per_node = 8, nodes = 1099511627776>} {
}

// -----

// expected-error @+1 {{attribute 'loom.plan_does_not_fit' must be a unit attribute on a module, got 1 : i64}}
module attributes {loom.plan_does_not_fit = 1 : i64} {
}

// -----

// expected-error @+1 {{attribute 'loom.arena' must be a dictionary of byte counts (bytes, live, communication, kept, gradients, and scalars where bytes are reserved for them) on a function}}
func.func @arena() attributes {loom.arena = {bytes = 64 : i64, live = -1 : i64, communication = 0 : i64}} {
  return
}

// -----

// expected-error @+1 {{attribute 'loom.communication' must be a unit attribute on a function}}
func.func private @send() attributes {loom.communication = 1 : i64}

// -----

func.func @no_squares() -> tensor<f32> {
  // expected-error @+1 {{'loom.sum_squares' op expects at least one input}}
  %s = "loom.sum_squares"() : () -> tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @attention_grad_lse(%dy: tensor<2x4x8xf32>, %qkv: tensor<2x4x24xf32>, %out: tensor<2x4x8xf32>, %lse: tensor<2x4x2xf32>) {
  // expected-error @+1 {{expected lse of shape [2, 2, 4] ([batch, num_heads, sequence]), got [2, 4, 2]}}
  %0 = loom.causal_attention_grad %dy, %qkv, %out, %lse {num_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>, tensor<2x4x8xf32>, tensor<2x4x2xf32>) -> tensor<2x4x24xf32>
  return
}

// -----

func.func @attention_grad_lse_f32(%dy: tensor<2x4x8xbf16>, %qkv: tensor<2x4x24xbf16>, %out: tensor<2x4x8xbf16>, %lse: tensor<2x2x4xbf16>) {
  // expected-error @+1 {{operand #3 must be statically shaped tensor of 32-bit float values}}
  %0 = loom.causal_attention_grad %dy, %qkv, %out, %lse {num_heads = 2 : i64} : (tensor<2x4x8xbf16>, tensor<2x4x24xbf16>, tensor<2x4x8xbf16>, tensor<2x2x4xbf16>) -> tensor<2x4x24xbf16>
  return
}

// -----

func.func @scatter_add_rows_width(%u: tensor<6x4xf32>, %ids: tensor<6xi32>, %init: tensor<8x5xf32>) {
  // expected-error @+1 {{expected init's width to be updates' (4), got 5}}
  %a = loom.scatter_add_rows %u, %ids into %init : tensor<6x4xf32>, tensor<6xi32> -> tensor<8x5xf32>
  return
}

// -----

func.func @scatter_add_rows_indices(%u: tensor<6x4xf32>, %ids: tensor<5xi32>, %init: tensor<8x4xf32>) {
  // expected-error @+1 {{expected indices of shape [6] (the rows of updates), got [5]}}
  %a = loom.scatter_add_rows %u, %ids into %init : tensor<6x4xf32>, tensor<5xi32> -> tensor<8x4xf32>
  return
}

// -----

func.func @softmax_stats_classes(%logits: tensor<6x8xf32>) {
  // expected-error @+1 {{expected classes in [1, 8] (the logits' columns), got 9}}
  %max, %sum = loom.softmax_stats %logits {classes = 9 : i64} : tensor<6x8xf32> -> tensor<6xf32>
  return
}

// -----

func.func @softmax_stats_rows(%logits: tensor<6x8xf32>) {
  // expected-error @+1 {{expected max of shape [6] (the rows of the logits), got [5]}}
  %max, %sum = loom.softmax_stats %logits {classes = 8 : i64} : tensor<6x8xf32> -> tensor<5xf32>
  return
}

// -----

func.func @scatter_add_rows_rank(%u: tensor<2x3x4xf32>, %ids: tensor<6xi32>, %init: tensor<8x4xf32>) {
  // expected-error @+1 {{expected updates of rank 2 [indices, width], got shape [2, 3, 4]}}
  %a = loom.scatter_add_rows %u, %ids into %init : tensor<2x3x4xf32>, tensor<6xi32> -> tensor<8x4xf32>
  return
}

// -----

func.func @scatter_add_rows_bf16(%u: tensor<6x4xf32>, %ids: tensor<6xi32>, %init: tensor<8x4xbf16>) {
  // expected-error @+1 {{must be statically shaped tensor of 32-bit float values}}
  %a = loom.scatter_add_rows %u, %ids into %init : tensor<6x4xf32>, tensor<6xi32> -> tensor<8x4xbf16>
  return
}

// -----

func.func @scalar_gelu_f16(%x: f16) -> f16 {
  // expected-error@+1 {{operand #0 must be 32-bit float}}
  %y = loom.scalar.gelu %x : f16
  return %y : f16
}

// -----

// expected-error @+1 {{a tensor needs a non-empty 'name' and an 'init' of normal, zeros or ones}}
module attributes {loom.tensors = [{name = "wte", init = "uniform"}]} {
}

// -----

// expected-error @+1 {{tensor 'wte': a non-negative 'std' goes with init normal, and only with it}}
module attributes {loom.tensors = [{name = "wte", shape = array<i64: 4, 2>, init = "normal"}]} {
}

// -----

// expected-error @+1 {{tensor 'b' is listed twice in 'loom.tensors'}}
module attributes {loom.tensors = [{name = "b", shape = array<i64: 2>, init = "zeros"}, {name = "b", shape = array<i64: 2>, init = "ones"}]} {
}

// -----

// expected-error @+1 {{tensor 'b': unknown field 'scale'}}
module attributes {loom.tensors = [{name = "b", shape = array<i64: 2>, init = "zeros", scale = 2.0 : f64}]} {
}

// -----

// expected-error @+1 {{tensor 'b': 'shape' must be an array of positive sizes}}
module attributes {loom.tensors = [{name = "b", shape = array<i64: 0>, init = "zeros"}]} {
}

// -----

func.func @rms_norm_weight(%x: tensor<2x6xf32>, %w: tensor<5xf32>) {
  // expected-error @+2 {{expected weight of shape [6] (the input's last dimension), got [5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = loom.rms_norm %x, %w {epsilon = 1.0e-5 : f64} : (tensor<2x6xf32>, tensor<5xf32>) -> (tensor<2x6xf32>, tensor<2xf32>)
  return
}

// -----

func.func @rms_norm_grad_rstd(%dy: tensor<2x6xf32>, %x: tensor<2x6xf32>, %w: tensor<6xf32>, %rstd: tensor<3xf32>) {
  // expected-error @+1 {{expected rstd of shape [2] (the input's rows), got [3]}}
  %0:2 = loom.rms_norm_grad %dy, %x, %w, %rstd : (tensor<2x6xf32>, tensor<2x6xf32>, tensor<6xf32>, tensor<3xf32>) -> (tensor<2x6xf32>, tensor<6xf32>)
  return
}

// -----

func.func @rotary_heads(%qkv: tensor<2x4x24xf32>) {
  // expected-error @+1 {{expected 3 * num_heads (15) to divide qkv's last dimension (24)}}
  %0 = loom.rotary %qkv {num_heads = 5 : i64, theta = 10000.0 : f64} : tensor<2x4x24xf32>
  return
}

// -----

func.func @rotary_odd_head(%qkv: tensor<2x4x18xf32>) {
  // expected-error @+1 {{expected an even head width, got 3}}
  %0 = loom.rotary %qkv {num_heads = 2 : i64, theta = 10000.0 : f64} : tensor<2x4x18xf32>
  return
}

// -----

func.func @rotary_theta(%qkv: tensor<2x4x24xf32>) {
  // expected-error @+1 {{expected theta above 1, got 1}}
  %0 = loom.rotary %qkv {num_heads = 2 : i64, theta = 1.0 : f64} : tensor<2x4x24xf32>
  return
}

// -----

func.func @swiglu_types(%g: tensor<2x8xf32>, %u: tensor<2x4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "loom.swiglu"(%g, %u) : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// expected-error @+1 {{'rope_theta' must be finite and above 1, got 0.5}}
module attributes {loom.model = #loom.model<name = "m", layers = 1, width = 8, heads = 2, hidden = 8, vocab = 4, padded_vocab = 4, positions = 4, tied = true, epsilon = 1.0e-5, position = rope, rope_theta = 0.5>} {}

// -----

func.func @rotary_scaling(%qkv: tensor<2x4x24xf32>) {
  // expected-error @+1 {{expected llama3_scaling = [factor >= 1, 0 < low_freq_factor < high_freq_factor, original_context > 0, an integer]}}
  %0 = loom.rotary %qkv {num_heads = 2 : i64, theta = 10000.0 : f64, llama3_scaling = array<f64: 8.0, 4.0, 1.0, 64.0>} : tensor<2x4x24xf32>
  return
}

// -----

func.func @group_qkv_width(%qkv: tensor<2x4x18xf32>) {
  // expected-error @+1 {{expected kv_heads * (num_heads / kv_heads + 2) (4) to divide the grouped tensor's last dimension (18)}}
  %0 = "loom.group_qkv"(%qkv) {num_heads = 2 : i64, kv_heads = 1 : i64} : (tensor<2x4x18xf32>) -> tensor<2x4x24xf32>
  return
}

// -----

func.func @group_qkv_heads(%qkv: tensor<2x4x16xf32>) {
  // expected-error @+1 {{expected kv_heads (2) to divide num_heads (3)}}
  %0 = "loom.group_qkv"(%qkv) {num_heads = 3 : i64, kv_heads = 2 : i64} : (tensor<2x4x16xf32>) -> tensor<2x4x24xf32>
  return
}

// -----

func.func @grouped_attention_width(%qkv: tensor<2x4x18xf32>) {
  // expected-error @+2 {{expected kv_heads * (num_heads / kv_heads + 2) (4) to divide qkv's last dimension (18)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = loom.causal_attention %qkv {num_heads = 2 : i64, kv_heads = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x8xf32>, tensor<2x2x4xf32>
  return
}

// -----

func.func @grouped_attention_heads(%qkv: tensor<2x4x16xf32>) {
  // expected-error @+2 {{expected kv_heads (2) to divide num_heads (3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = loom.causal_attention %qkv {num_heads = 3 : i64, kv_heads = 2 : i64} : tensor<2x4x16xf32> -> tensor<2x4x8xf32>, tensor<2x3x4xf32>
  return
}

// -----

func.func @grouped_attention_grad(%dy: tensor<2x4x8xf32>, %qkv: tensor<2x4x18xf32>, %lse: tensor<2x2x4xf32>) {
  // expected-error @+1 {{expected kv_heads * (num_heads / kv_heads + 2) (4) to divide qkv's last dimension (18)}}
  %0 = loom.causal_attention_grad %dy, %qkv, %dy, %lse {num_heads = 2 : i64, kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x18xf32>, tensor<2x4x8xf32>, tensor<2x2x4xf32>) -> tensor<2x4x18xf32>
  return
}

// -----

func.func @grouped_rotary_heads(%qkv: tensor<2x4x16xf32>) {
  // expected-error @+1 {{expected kv_heads (3) to divide num_heads (2)}}
  %0 = loom.rotary %qkv {num_heads = 2 : i64, kv_heads = 3 : i64, theta = 10000.0 : f64} : tensor<2x4x16xf32>
  return
}

// -----

// expected-error @+1 {{'kv_heads' (3) must divide 'heads' (2)}}
module attributes {loom.model = #loom.model<name = "m", layers = 1, width = 8, heads = 2, hidden = 8, vocab = 4, padded_vocab = 4, positions = 4, tied = true, epsilon = 1.0e-5, kv_heads = 3>} {}


// -----

func.func @fan_out_shared_all(%w: tensor<24x8xf32>) {
  // expected-error @+1 {{'loom.fan_out_shared' op expected 0 < shared (24) < the extent of dimension 0 (24)}}
  %p = loom.fan_out_shared %w on @loom_grid axes = [2] dim = 0 teams = 2 team_size = 2 shared = 24 : tensor<24x8xf32>
  return
}

// -----

func.func @fan_out_shared_alone(%w: tensor<24x8xf32>) {
  // expected-error @+1 {{'loom.fan_out_shared' op expected teams of at least two ranks on one grid axis}}
  %p = loom.fan_out_shared %w on @loom_grid axes = [2] dim = 0 teams = 2 team_size = 1 shared = 16 : tensor<24x8xf32>
  return
}

// -----

// expected-error @+1 {{argument #0: 'loom.tp_split' must be [dim, blocks] (a dimension of the argument's shaped type and a positive number of blocks dividing it) or [dim, blocks, shared] (shared smaller than the dimension)}}
func.func @tp_split_shared(%w: tensor<24x8xf32> {loom.tp_split = array<i64: 0, 2, 24>}) {
  return
}

// -----

func.func @accumulate_to_device(%g: tensor<4xf32>, %d: tensor<4xf32>, %more: i1) {
  // expected-error @+1 {{'loom.transfer' op accumulates only into host memory}}
  %s = loom.transfer %g into %d to device accumulate if %more : tensor<4xf32>
  return
}

// -----

func.func @accumulate_bf16(%g: tensor<4xbf16>, %h: tensor<4xbf16>, %more: i1) {
  // expected-error @+1 {{'loom.transfer' op accumulates only f32 elements}}
  %s = loom.transfer %g into %h to host accumulate if %more : tensor<4xbf16>
  return
}
