// RUN: loom-opt %s --loom-approximate-math | FileCheck %s

// The f32 transcendental functions of softmax, GELU and the loss become
// arithmetic; square roots stay, since LLVM vectorizes them already.
// CHECK-LABEL: func.func @f(
// CHECK-NOT: math.exp
// CHECK-NOT: math.tanh
// CHECK-NOT: math.log
// CHECK: math.sqrt
// CHECK: return
func.func @f(%x: f32) -> (f32, f32, f32, f32) {
  %a = math.exp %x : f32
  %b = math.tanh %x : f32
  %c = math.log %x : f32
  %d = math.sqrt %x : f32
  return %a, %b, %c, %d : f32, f32, f32, f32
}
