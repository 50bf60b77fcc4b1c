// RUN: loom-opt %s --loom-outline-loop-nests | FileCheck %s
// RUN: loom-opt %s --loom-outline-loop-nests=host-only | FileCheck %s --check-prefix=HOST

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

// A parallel loop with enough work takes the range of its outer iterations
// first and is marked for the runtime's threads; one with little work stays
// serial. Two nests that are the same code share one function.
// CHECK-LABEL: func.func private @p_loop0(
// CHECK-SAME: %[[BEGIN:.*]]: index, %[[END:.*]]: index, %[[A:.*]]: memref<256x256xf32>) attributes {llvm.linkage = #llvm.linkage<internal>, loom.parallel_for, passthrough = ["noinline"]}
// CHECK: %[[UPPER:.*]] = arith.minsi %{{.*}}, %c256
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) = (%{{.*}}, %c0{{.*}}) to (%[[UPPER]], %c256{{.*}})
// CHECK-LABEL: func.func private @p_loop2(
// CHECK-SAME: %{{.*}}: memref<4xf32>) attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
// CHECK-NOT: @p_loop1(
// CHECK-LABEL: func.func @p(
// CHECK: arith.constant 0.0
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[N:.*]] = arith.constant 256 : index
// CHECK-NEXT: call @p_loop0(%[[C0]], %[[N]], %{{.*}})
// CHECK: call @p_loop0(
// CHECK: call @p_loop2(
func.func @p(%a: memref<256x256xf32>, %b: memref<256x256xf32>, %c: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c256 = arith.constant 256 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c256, %c256) step (%c1, %c1) {
    memref.store %zero, %a[%i, %j] : memref<256x256xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c256, %c256) step (%c1, %c1) {
    memref.store %zero, %b[%i, %j] : memref<256x256xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    memref.store %zero, %c[%i] : memref<4xf32>
    scf.reduce
  }
  return
}

// Loops that call and are not parallel (a layer loop calling BLAS) stay,
// and the nests inside them are outlined.
// CHECK-LABEL: func.func private @q_loop0(
// CHECK-LABEL: func.func @q(
// CHECK: scf.for
// CHECK-NEXT: call @blas()
// CHECK-NEXT: call @q_loop0(
func.func private @blas()
func.func @q(%a: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  scf.for %l = %c0 to %c4 step %c1 {
    func.call @blas() : () -> ()
    scf.for %i = %c0 to %c4 step %c1 {
      memref.store %one, %a[%i] : memref<4xf32>
    }
  }
  return
}

// An offload plan's host function (loom.host): its nests are outlined with
// the mark, which tells a GPU target's lowering to leave them to the
// host's threads. With host-only, the other functions' nests stay, for
// the GPU's kernels.
// CHECK-LABEL: func.func private @update_loop0(
// CHECK-SAME: attributes {llvm.linkage = #llvm.linkage<internal>, loom.host, loom.parallel_for, passthrough = ["noinline"]}
// CHECK-LABEL: func.func private @update(
// CHECK: call @update_loop0(
// HOST-LABEL: func.func @q(
// HOST: scf.for
// HOST: scf.for
// HOST-NOT: call @q_loop
// HOST-LABEL: func.func private @update_loop0(
// HOST-SAME: loom.host, loom.parallel_for
// HOST-LABEL: func.func private @update(
// HOST: call @update_loop0(
func.func private @update(%w: memref<65536xf32>, %g: memref<65536xf32>) attributes {loom.host} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 65536 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %x = memref.load %w[%i] : memref<65536xf32>
    %y = memref.load %g[%i] : memref<65536xf32>
    %z = arith.subf %x, %y : f32
    memref.store %z, %w[%i] : memref<65536xf32>
    scf.reduce
  }
  return
}
