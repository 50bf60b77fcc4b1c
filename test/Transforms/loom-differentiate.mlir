// RUN: loom-opt %s --loom-differentiate --split-input-file --verify-diagnostics | FileCheck %s
// RUN: loom-opt %s --loom-differentiate --split-input-file --verify-diagnostics --mlir-print-debuginfo | FileCheck %s --check-prefix=PHASE

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
// CHECK: %[[ONE:.*]] = loom.seed : tensor<f32>
// CHECK: %[[DL:.*]] = loom.cross_entropy_grad %[[ONE]]
// CHECK: %[[DR:.*]], %[[DW:.*]] = loom.linear_grad %[[DL]]
// CHECK: %[[DG:.*]] = loom.gelu_grad %[[DR]], %[[X]]
// CHECK: %[[DX:.*]] = loom.add %[[DR]], %[[DG]]
// CHECK: %[[DWTE:.*]], %[[DWPE:.*]] = loom.embedding_grad %[[DX]], %{{.*}}
// CHECK: return %[[LOSS]], %[[DWTE]], %[[DWPE]], %[[DW]]

// Each op of the gradient function records its pass in its location: the
// ops the loss is made from are the forward pass, the rest the backward.
// PHASE-LABEL: func.func @forward_grad(
// PHASE: loom.embedding {{.*}} loc(#[[EMB:loc[0-9]+]])
// PHASE: loom.cross_entropy {{.*}} loc(#[[LOSS:loc[0-9]+]])
// PHASE: loom.seed {{.*}} loc(#[[SEED:loc[0-9]+]])
// PHASE: loom.embedding_grad {{.*}} loc(#[[EMBGRAD:loc[0-9]+]])
// PHASE-DAG: #[[EMB]] = loc(fused<"loom.forward">[
// PHASE-DAG: #[[LOSS]] = loc(fused<"loom.forward">[
// PHASE-DAG: #[[SEED]] = loc(fused<"loom.backward">[
// PHASE-DAG: #[[EMBGRAD]] = loc(fused<"loom.backward">[

// -----

func.func @forward(%x: tensor<2xf32> {loom.param = "x"}) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
// expected-error@-3 {{expected one block returning a single 0-d loss tensor to differentiate}}

// -----

// expected-error@+1 {{expected a function @forward to differentiate}}
module {
}

// -----

// A layer loop differentiates into a loop in reverse over the body's VJP.
// The forward loop also returns, stacked over the layers, each value the
// backward body reads: here the layer's input (linear_grad needs it) and
// the linear's output (gelu_grad needs it). Weights are not saved: the
// backward loop takes their stacks again. It carries the input's cotangent
// and returns the weights' gradients stacked.
module {
  func.func @forward(%x: tensor<1x2x4xf32> {loom.param = "x"}, %w: tensor<3x4x4xf32> {loom.param = "h.*.w"}, %head: tensor<5x4xf32> {loom.param = "head"}, %targets: tensor<1x2xi32> {loom.input = "targets"}) -> (tensor<f32> {loom.output = "loss"}) {
    %y = loom.scan carry(%x : tensor<1x2x4xf32>) over(%w : tensor<3x4x4xf32>) length = 3 -> (tensor<1x2x4xf32>) {
    ^bb0(%xl: tensor<1x2x4xf32>, %wl: tensor<4x4xf32>):
      %z = loom.linear %xl, %wl : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
      %g = loom.gelu %z : tensor<1x2x4xf32>
      loom.yield %g : tensor<1x2x4xf32>
    }
    %logits = loom.linear %y, %head : (tensor<1x2x4xf32>, tensor<5x4xf32>) -> tensor<1x2x5xf32>
    %loss = loom.cross_entropy %logits, %targets {num_classes = 5 : i64} : (tensor<1x2x5xf32>, tensor<1x2xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<1x2x4xf32> {loom.param = "x"}, %[[W:[a-z0-9]+]]: tensor<3x4x4xf32> {loom.param = "h.*.w"}
// CHECK: %[[FWD:.*]]:3 = loom.scan carry(%[[X]] : tensor<1x2x4xf32>) over(%[[W]] : tensor<3x4x4xf32>) length = 3 -> (tensor<1x2x4xf32>, tensor<3x1x2x4xf32>, tensor<3x1x2x4xf32>) {
// CHECK-NEXT: ^bb0(%[[XL:.*]]: tensor<1x2x4xf32>, %[[WL:.*]]: tensor<4x4xf32>):
// CHECK-NEXT: %[[Z:.*]] = loom.linear %[[XL]], %[[WL]]
// CHECK-NEXT: %[[G:.*]] = loom.gelu %[[Z]]
// CHECK-NEXT: loom.yield %[[G]], %[[XL]], %[[Z]]
// CHECK: %[[DY:.*]], %[[DHEAD:.*]] = loom.linear_grad %{{.*}}, %[[FWD]]#0
// CHECK: %[[BWD:.*]]:2 = loom.scan carry(%[[DY]] : tensor<1x2x4xf32>) over(%[[W]], %[[FWD]]#1, %[[FWD]]#2 : tensor<3x4x4xf32>, tensor<3x1x2x4xf32>, tensor<3x1x2x4xf32>) length = 3 reverse -> (tensor<1x2x4xf32>, tensor<3x4x4xf32>) {
// CHECK-NEXT: ^bb0(%[[DG:.*]]: tensor<1x2x4xf32>, %[[WL2:.*]]: tensor<4x4xf32>, %[[XL2:.*]]: tensor<1x2x4xf32>, %[[Z2:.*]]: tensor<1x2x4xf32>):
// CHECK-NEXT: %[[DZ:.*]] = loom.gelu_grad %[[DG]], %[[Z2]]
// CHECK-NEXT: %[[DXL:.*]], %[[DWL:.*]] = loom.linear_grad %[[DZ]], %[[XL2]], %[[WL2]]
// CHECK-NEXT: loom.yield %[[DXL]], %[[DWL]]
// CHECK: return %{{.*}}, %[[BWD]]#0, %[[BWD]]#1, %[[DHEAD]]

// The forward loop's body is the forward pass; the backward loop's body,
// nested in a backward op, the backward pass.
// PHASE-LABEL: func.func @forward_grad(
// PHASE: loom.gelu {{.*}} loc(#[[GELU:loc[0-9]+]])
// PHASE: loom.gelu_grad {{.*}} loc(#[[GELUGRAD:loc[0-9]+]])
// PHASE-DAG: #[[GELU]] = loc(fused<"loom.forward">[
// PHASE-DAG: #[[GELUGRAD]] = loc(fused<"loom.backward">[

// -----

// An op marked loom.recompute is computed again in the backward body: the
// forward loop saves its operand instead of its result.
module {
  func.func @forward(%x: tensor<1x2x4xf32> {loom.param = "x"}, %w: tensor<3x4x4xf32> {loom.param = "h.*.w"}, %head: tensor<5x4xf32> {loom.param = "head"}, %targets: tensor<1x2xi32> {loom.input = "targets"}) -> (tensor<f32> {loom.output = "loss"}) {
    %y = loom.scan carry(%x : tensor<1x2x4xf32>) over(%w : tensor<3x4x4xf32>) length = 3 -> (tensor<1x2x4xf32>) {
    ^bb0(%xl: tensor<1x2x4xf32>, %wl: tensor<4x4xf32>):
      %z = loom.linear %xl, %wl {loom.recompute} : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
      %g = loom.gelu %z : tensor<1x2x4xf32>
      loom.yield %g : tensor<1x2x4xf32>
    }
    %logits = loom.linear %y, %head : (tensor<1x2x4xf32>, tensor<5x4xf32>) -> tensor<1x2x5xf32>
    %loss = loom.cross_entropy %logits, %targets {num_classes = 5 : i64} : (tensor<1x2x5xf32>, tensor<1x2xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @forward_grad(
// CHECK: loom.scan {{.*}} length = 3 -> (tensor<1x2x4xf32>, tensor<3x1x2x4xf32>) {
// CHECK: loom.yield %{{.*}}, %[[XIN:.*]] : tensor<1x2x4xf32>, tensor<1x2x4xf32>
// CHECK: loom.scan {{.*}} length = 3 reverse
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<1x2x4xf32>, %[[WB:.*]]: tensor<4x4xf32>, %[[XB:.*]]: tensor<1x2x4xf32>):
// CHECK-NEXT: %[[ZB:.*]] = loom.linear %[[XB]], %[[WB]] {loom.recompute}
// CHECK-NEXT: loom.gelu_grad %{{.*}}, %[[ZB]]
