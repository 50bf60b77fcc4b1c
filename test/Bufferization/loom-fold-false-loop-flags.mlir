// RUN: loom-opt %s --loom-fold-false-loop-flags | FileCheck %s

// Flags that start false and yield an OR of each other and false are false;
// one that a loop sets from elsewhere, and those it feeds, are not.
// CHECK-LABEL: func.func @flags
// CHECK-SAME: (%[[COND:.*]]: i1)
// CHECK: %[[FALSE:.*]] = arith.constant false
// CHECK: %[[R:.*]]:4 = scf.for {{.*}} iter_args(%[[A:.*]] = %[[FALSE]], %[[B:.*]] = %[[FALSE]], %[[C:.*]] = %[[FALSE]], %[[D:.*]] = %[[FALSE]])
// CHECK:   %[[AB:.*]] = arith.ori %[[FALSE]], %[[FALSE]] : i1
// CHECK:   %[[CD:.*]] = arith.ori %[[COND]], %[[D]] : i1
// CHECK:   %[[DC:.*]] = arith.ori %[[D]], %[[C]] : i1
// CHECK:   scf.yield %[[AB]], %[[FALSE]], %[[CD]], %[[DC]]
// CHECK: return %[[FALSE]], %[[FALSE]], %[[R]]#2, %[[R]]#3
func.func @flags(%cond: i1) -> (i1, i1, i1, i1) {
  %false = arith.constant false
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r:4 = scf.for %i = %c0 to %c4 step %c1
      iter_args(%a = %false, %b = %false, %c = %false, %d = %false)
      -> (i1, i1, i1, i1) {
    %ab = arith.ori %a, %b : i1
    %cd = arith.ori %cond, %d : i1
    %dc = arith.ori %d, %c : i1
    scf.yield %ab, %false, %cd, %dc : i1, i1, i1, i1
  }
  return %r#0, %r#1, %r#2, %r#3 : i1, i1, i1, i1
}

// A flag that starts true is left alone.
// CHECK-LABEL: func.func @starts_true
// CHECK: scf.for {{.*}} iter_args(%[[A:.*]] = %true)
// CHECK: scf.yield %[[A]]
func.func @starts_true() -> i1 {
  %true = arith.constant true
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%a = %true) -> (i1) {
    scf.yield %a : i1
  }
  return %r : i1
}
