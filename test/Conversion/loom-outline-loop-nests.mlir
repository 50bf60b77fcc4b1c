// RUN: loom-opt %s --loom-outline-loop-nests | FileCheck %s

// Each top-level nest becomes a private, non-inlinable function of the
// buffers and scalars it uses; the constants it uses move in with it.
// CHECK-LABEL: func.func private @f_loop0(
// CHECK-SAME: %[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<4xf32>) attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]} {
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[C4]]
// CHECK: arith.mulf %{{.*}}, %[[TWO]]
// CHECK-LABEL: func.func private @f_loop1(
// CHECK-SAME: %{{.*}}: memref<4xf32>, %{{.*}}: f32, %{{.*}}: memref<4xf32>) attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]} {
// CHECK-LABEL: func.func @f(
// CHECK-SAME: %[[X:.*]]: memref<4xf32>, %[[Y:.*]]: memref<4xf32>, %[[S:.*]]: f32)
// CHECK: call @f_loop0(%[[X]], %[[Y]])
// CHECK-NEXT: call @f_loop1(%[[Y]], %[[S]], %[[X]])
// CHECK-NEXT: return
func.func @f(%a: memref<4xf32>, %b: memref<4xf32>, %s: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %two = arith.constant 2.0 : f32
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %a[%i] : memref<4xf32>
    %y = arith.mulf %x, %two : f32
    memref.store %y, %b[%i] : memref<4xf32>
  }
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %b[%i] : memref<4xf32>
    %y = arith.addf %x, %s : f32
    memref.store %y, %a[%i] : memref<4xf32>
  }
  return
}

// A name already taken gets a suffix.
// CHECK-LABEL: func.func @g_loop0(
// CHECK-LABEL: func.func private @g_loop0_0(
// CHECK-LABEL: func.func @g(
// CHECK: call @g_loop0_0(
func.func @g_loop0() {
  return
}
func.func @g(%a: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c4 step %c1 {
    memref.store %zero, %a[%i] : memref<4xf32>
  }
  return
}
