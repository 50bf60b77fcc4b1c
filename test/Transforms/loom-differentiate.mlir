// RUN: loom-opt %s --loom-differentiate --split-input-file --verify-diagnostics | FileCheck %s

// Each op contributes its VJP; the residual's two uses sum their cotangents,
// and the token ids get none.
module attributes {loom.model = #loom.model<name = "t", layers = 1, width = 4, heads = 1, hidden = 16, vocab = 8, padded_vocab = 8, positions = 3, tied = true, epsilon = 1.0e-05>} {
  func.func @forward(%wte: tensor<8x4xf32> {loom.param = "wte"}, %wpe: tensor<3x4xf32> {loom.param = "wpe"}, %w: tensor<8x4xf32> {loom.param = "w"}, %tokens: tensor<2x3xi32> {loom.input = "tokens"}, %targets: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32> {loom.output = "loss"}) {
    %x = loom.embedding %tokens, %wte, %wpe : (tensor<2x3xi32>, tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
    %g = loom.gelu %x : tensor<2x3x4xf32>
    %r = loom.add %x, %g : tensor<2x3x4xf32>
    %logits = loom.linear %r, %w : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
    %loss = loom.cross_entropy %logits, %targets {num_classes = 8 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @forward(
// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: -> (tensor<f32> {loom.output = "loss"}, tensor<8x4xf32> {loom.grad = "wte"}, tensor<3x4xf32> {loom.grad = "wpe"}, tensor<8x4xf32> {loom.grad = "w"})
// CHECK: %[[X:.*]] = loom.embedding
// CHECK: %[[G:.*]] = loom.gelu %[[X]]
// CHECK: %[[LOSS:.*]] = loom.cross_entropy
// CHECK: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DL:.*]] = loom.cross_entropy_grad %[[ONE]]
// CHECK: %[[DR:.*]], %[[DW:.*]] = loom.linear_grad %[[DL]]
// CHECK: %[[DG:.*]] = loom.gelu_grad %[[DR]], %[[X]]
// CHECK: %[[DX:.*]] = loom.add %[[DR]], %[[DG]]
// CHECK: %[[DWTE:.*]], %[[DWPE:.*]] = loom.embedding_grad %[[DX]], %{{.*}}
// CHECK: return %[[LOSS]], %[[DWTE]], %[[DWPE]], %[[DW]]

// -----

func.func @forward(%x: tensor<2xf32> {loom.param = "x"}) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
// expected-error@-3 {{expected one block returning a single 0-d loss tensor to differentiate}}

// -----

// expected-error@+1 {{expected a function @forward to differentiate}}
module {
}
