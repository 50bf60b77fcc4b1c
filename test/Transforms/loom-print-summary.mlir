// RUN: loom-opt %s -split-input-file -verify-diagnostics --loom-print-summary=to-stdout=1 | FileCheck %s
// RUN: loom-opt %s -split-input-file -verify-diagnostics --loom-print-summary 2>&1 >/dev/null | FileCheck %s --check-prefix=STDERR

// The parameter count comes from the parameters' types: a padded token table
// and an untied head count in full.

// CHECK: model: m: 1 layers, width 8, 2 heads, MLP width 32, vocabulary 11 (padded to 16), 6 positions, untied embeddings
// CHECK-NEXT: parameters: 504 in 5 tensors (200 per block x 1, 304 outside the blocks)
// CHECK-NEXT: training: batch 4 x sequence 6 = 24 tokens per step, sgd (lr 0.1, momentum 0.9, weight decay 0.0), fp32
// CHECK-NEXT: plan: dp=2 tp=1 pp=1 zero=1 mb=2 schedule=1f1b recompute=full sp=0 (2 ranks)
// CHECK-NEXT: cluster: 1 x 2 V100-32GB
// CHECK: module attributes
// STDERR: parameters: 504 in 5 tensors
module attributes {
  loom.model = #loom.model<name = "m", layers = 1, width = 8, heads = 2,
      hidden = 32, vocab = 11, padded_vocab = 16, positions = 6, tied = false,
      epsilon = 1.0e-5>,
  loom.training = #loom.training<batch = 4, sequence = 6, optimizer = sgd,
      lr = 0.1, momentum = 0.9, precision = fp32>,
  loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 1, micro_batches = 2,
      schedule = one_f_one_b, recompute = full, sequence_parallel = false>,
  loom.cluster = #loom.cluster<gpu = "V100-32GB", gpus_per_node = 2, nodes = 1>
} {
  func.func @forward(%wte: tensor<16x8xf32> {loom.param = "wte"},
                     %wpe: tensor<6x8xf32> {loom.param = "wpe"},
                     %fc: tensor<1x24x8xf32> {loom.param = "h.*.mlp.c_fc.weight"},
                     %fcb: tensor<1x8xf32> {loom.param = "h.*.mlp.c_fc.bias"},
                     %head: tensor<16x8xf32> {loom.param = "lm_head.weight"},
                     %tokens: tensor<4x6xi32> {loom.input = "tokens"}) {
    return
  }
}

// -----

// A module without the model function cannot be summarized.
// expected-error @+1 {{expected a model function @forward}}
module {
  func.func @other() {
    return
  }
}

// -----

module {
  // expected-error @+1 {{argument #1 is neither a parameter ('loom.param') nor an input ('loom.input')}}
  func.func @forward(%wte: tensor<16x8xf32> {loom.param = "wte"}, %x: tensor<4xf32>) {
    return
  }
}
