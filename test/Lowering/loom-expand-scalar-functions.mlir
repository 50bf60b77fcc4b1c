// RUN: loom-opt %s --loom-expand-scalar-functions | FileCheck %s

// Each scalar function becomes its arithmetic where it stood, in a loop's
// body as anywhere: GPT-2's GELU, 0.5 x (1 + tanh(sqrt(2 / pi) (x +
// 0.044715 x^3))), ...
// CHECK-LABEL: func.func @gelu(
// CHECK-SAME: %[[X:[^:]*]]: f32)
// CHECK-NOT: loom.scalar
// CHECK: %[[X2:.*]] = arith.mulf %[[X]], %[[X]] : f32
// CHECK: %[[X3:.*]] = arith.mulf %[[X]], %[[X2]] : f32
// CHECK: %[[C:.*]] = arith.constant 4.471500e-02 : f32
// CHECK: %[[CX3:.*]] = arith.mulf %[[X3]], %[[C]] : f32
// CHECK: %[[U:.*]] = arith.addf %[[X]], %[[CX3]] : f32
// CHECK: %[[S:.*]] = arith.constant 0.797884583 : f32
// CHECK: %[[SU:.*]] = arith.mulf %[[U]], %[[S]] : f32
// CHECK: %[[T:.*]] = math.tanh %[[SU]] : f32
// CHECK: %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK: %[[HX:.*]] = arith.mulf %[[X]], %[[HALF]] : f32
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[T1:.*]] = arith.addf %[[T]], %[[ONE]] : f32
// CHECK: %[[Y:.*]] = arith.mulf %[[HX]], %[[T1]] : f32
// CHECK: %[[ROUND:.*]] = arith.truncf %[[Y]] : f32 to bf16
// CHECK: return %[[ROUND]]
func.func @gelu(%x: f32) -> bf16 {
  %y = loom.scalar.gelu %x : f32
  %r = arith.truncf %y : f32 to bf16
  return %r : bf16
}

// ... and the gradient through it, grad times
// 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2 / pi) (1 + 3 * 0.044715 x^2).
// CHECK-LABEL: func.func @gelu_grad(
// CHECK-SAME: %[[G:[^:]*]]: f32, %[[X:[^:]*]]: f32)
// CHECK-NOT: loom.scalar
// CHECK: %[[T:.*]] = math.tanh
// CHECK: %[[X2:.*]] = arith.mulf %[[X]], %[[X]] : f32
// CHECK: %[[C3:.*]] = arith.constant 1.341450e-01 : f32
// CHECK: %[[A:.*]] = arith.mulf %[[X2]], %[[C3]] : f32
// CHECK: %[[TT:.*]] = arith.mulf %[[T]], %[[T]] : f32
// CHECK: %[[R:.*]] = arith.mulf %{{.*}}, %[[G]] : f32
// CHECK-NEXT: return %[[R]]
func.func @gelu_grad(%g: f32, %x: f32) -> f32 {
  %r = loom.scalar.gelu_grad %g, %x : f32
  return %r : f32
}
