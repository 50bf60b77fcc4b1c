// RUN: loom-opt %s --loom-lower-reductions --split-input-file | FileCheck %s
// RUN: loom-opt %s --loom-lower-reductions=parallel-outside=1 --split-input-file | FileCheck %s --check-prefix=OUTSIDE

// A row sum: parallel rows, and in each row a loop that carries the sum in
// a register (loaded and stored once) and may reassociate the addition.
#all = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @row_sum(
// CHECK-SAME: %[[X:.*]]: memref<4x8xf32>, %[[S:.*]]: memref<4xf32>)
// CHECK: scf.parallel (%[[I:.*]]) = (%c0) to (%c4) step (%c1) {
// CHECK-NEXT: %[[INIT:.*]] = memref.load %[[S]][%[[I]]]
// CHECK-NEXT: %[[SUM:.*]] = scf.for %[[J:.*]] = %c0 to %c8 step %c1 iter_args(%[[ACC:.*]] = %[[INIT]]) -> (f32) {
// CHECK-NEXT: %[[V:.*]] = memref.load %[[X]][%[[I]], %[[J]]]
// CHECK-NEXT: %[[SQ:.*]] = arith.mulf %[[V]], %[[V]] : f32
// CHECK-NEXT: %[[NEXT:.*]] = arith.addf %[[ACC]], %[[SQ]] fastmath<reassoc> : f32
// CHECK-NEXT: scf.yield %[[NEXT]]
// CHECK: memref.store %[[SUM]], %[[S]][%[[I]]]
// CHECK-NOT: linalg.generic
func.func @row_sum(%x: memref<4x8xf32>, %s: memref<4xf32>) {
  linalg.generic {indexing_maps = [#all, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %n = arith.addf %acc, %sq : f32
    linalg.yield %n : f32
  }
  return
}

// -----

// A full reduction: no parallel loop, the accumulator through both loops;
// linalg.index becomes the loop's index.
#all = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>
// CHECK-LABEL: func.func @total(
// CHECK: %[[INIT:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK: scf.for %[[I:.*]] = {{.*}} iter_args(%[[A:.*]] = %[[INIT]]) -> (f32) {
// CHECK: scf.for %[[J:.*]] = {{.*}} iter_args(%[[B:.*]] = %[[A]]) -> (f32) {
// CHECK: arith.index_cast %[[J]]
// CHECK: arith.maximumf %[[B]], %{{.*}} fastmath<reassoc>
// CHECK: memref.store %{{.*}}, %{{.*}}[] : memref<f32>
func.func @total(%x: memref<4x8xf32>, %s: memref<f32>) {
  linalg.generic {indexing_maps = [#all, #scalar], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%s : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i32
    %jf = arith.sitofp %ji : i32 to f32
    %v = arith.addf %a, %jf : f32
    %m = arith.maximumf %acc, %v : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// Column sums (the reduction outermost) and elementwise generics are left
// to upstream's lowering.
#all = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @columns(
// CHECK: linalg.generic
// CHECK-LABEL: func.func @elementwise(
// CHECK: linalg.generic
func.func @columns(%x: memref<4x8xf32>, %s: memref<8xf32>) {
  linalg.generic {indexing_maps = [#all, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%s : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %n = arith.addf %acc, %a : f32
    linalg.yield %n : f32
  }
  return
}
func.func @elementwise(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#all, #all], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %n = arith.addf %a, %a : f32
    linalg.yield %n : f32
  }
  return
}

// With parallel-outside (the GPU's), the column sum is one parallel loop
// over the columns, each summing its rows in a register.
// OUTSIDE-LABEL: func.func @columns(
// OUTSIDE-SAME: %[[X:.*]]: memref<4x8xf32>, %[[S:.*]]: memref<8xf32>)
// OUTSIDE: scf.parallel (%[[J:.*]]) = (%c0) to (%c8) step (%c1) {
// OUTSIDE-NEXT: %[[INIT:.*]] = memref.load %[[S]][%[[J]]]
// OUTSIDE-NEXT: %[[SUM:.*]] = scf.for %[[I:.*]] = %c0 to %c4 step %c1 iter_args(%[[ACC:.*]] = %[[INIT]]) -> (f32) {
// OUTSIDE-NEXT: %[[V:.*]] = memref.load %[[X]][%[[I]], %[[J]]]
// OUTSIDE: memref.store %[[SUM]], %[[S]][%[[J]]]
// OUTSIDE-NOT: linalg.generic
// OUTSIDE-LABEL: func.func @elementwise(
// OUTSIDE: linalg.generic
