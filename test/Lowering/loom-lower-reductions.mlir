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

// -----

// A reduction into a buffer of the arena that a fill just wrote starts from
// the fill's value, and the fill goes: the reduction overwrites every
// element. A write in between to other bytes of the arena (here the buffer
// that alternates between two places from one iteration to the next, at
// bytes 64 to 96) does not stop it.
#all = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @forwarded_fill(
// CHECK-SAME: %[[X:.*]]: memref<4x8xf32>, %[[V:.*]]: f32, %[[I:.*]]: index)
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[S:.*]] = memref.view %{{.*}}[%c0][] : memref<1024xi8> to memref<4xf32>
// CHECK-NOT: linalg.fill
// CHECK: memref.store %[[V]]
// CHECK: scf.parallel (%[[R:.*]]) = (%c0) to (%c4) step (%c1) {
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c8 step %c1 iter_args(%{{.*}} = %[[ONE]]) -> (f32) {
// CHECK-NOT: memref.load %[[S]]
// CHECK: memref.store %{{.*}}, %[[S]][%[[R]]]
func.func @forwarded_fill(%x: memref<4x8xf32>, %v: f32, %i: index) {
  %arena = memref.alloc() : memref<1024xi8>
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %s = memref.view %arena[%c0][] : memref<1024xi8> to memref<4xf32>
  %parity = arith.remui %i, %c2 : index
  %step = arith.muli %parity, %c16 : index
  %shift = arith.addi %step, %c64 : index
  %other = memref.view %arena[%shift][] : memref<1024xi8> to memref<4xf32>
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%one : f32) outs(%s : memref<4xf32>)
  memref.store %v, %other[%c0] : memref<4xf32>
  linalg.generic {indexing_maps = [#all, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %n = arith.addf %acc, %a : f32
    linalg.yield %n : f32
  }
  return
}

// -----

// The fill stays, and the reduction reads it, where something in between
// may write the filled bytes (a view of them at an unknown shift), where
// the reduction reads the buffer as an input too, or where its output
// leaves out a parallel dimension.
#all = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#first = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#out = affine_map<(d0, d1, d2) -> (d0)>
// CHECK-LABEL: func.func @kept_fills(
// CHECK: %[[S:.*]] = memref.view %{{.*}}[%c0][]
// CHECK: linalg.fill {{.*}} outs(%[[S]]
// CHECK: scf.parallel
// CHECK-NEXT: memref.load %[[S]][
// CHECK: linalg.fill {{.*}} outs(%[[S]]
// CHECK: scf.parallel
// CHECK-NEXT: memref.load %[[S]][
// CHECK: linalg.fill {{.*}} outs(%[[S]]
// CHECK: scf.parallel
// CHECK-NEXT: memref.load %[[S]][
func.func @kept_fills(%x: memref<4x8xf32>, %y: memref<4x2x8xf32>, %v: f32, %shift: index) {
  %arena = memref.alloc() : memref<1024xi8>
  %c0 = arith.constant 0 : index
  %s = memref.view %arena[%c0][] : memref<1024xi8> to memref<4xf32>
  %other = memref.view %arena[%shift][] : memref<1024xi8> to memref<4xf32>
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%s : memref<4xf32>)
  memref.store %v, %other[%c0] : memref<4xf32>
  linalg.generic {indexing_maps = [#all, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %n = arith.addf %acc, %a : f32
    linalg.yield %n : f32
  }
  linalg.fill ins(%zero : f32) outs(%s : memref<4xf32>)
  linalg.generic {indexing_maps = [#all, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %s : memref<4x8xf32>, memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %n = arith.addf %acc, %m : f32
    linalg.yield %n : f32
  }
  linalg.fill ins(%zero : f32) outs(%s : memref<4xf32>)
  linalg.generic {indexing_maps = [#first, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%y : memref<4x2x8xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %n = arith.addf %acc, %a : f32
    linalg.yield %n : f32
  }
  return
}
