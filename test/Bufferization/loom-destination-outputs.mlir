// RUN: loom-opt %s --loom-destination-outputs --split-input-file --verify-diagnostics | FileCheck %s

// Updated values go back into their argument; outputs get a new argument.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[P:.*]]: tensor<4xf32> {loom.param = "p"}, %[[OUT:.*]]: tensor<f32> {loom.output = "loss"})
// CHECK: %[[A:.*]] = bufferization.materialize_in_destination %{{.*}} in %[[OUT]]
// CHECK: %[[B:.*]] = bufferization.materialize_in_destination %{{.*}} in %[[P]]
// CHECK: return %[[A]], %[[B]]
func.func @step(%p: tensor<4xf32> {loom.param = "p"}) -> (tensor<f32> {loom.output = "loss"}, tensor<4xf32> {loom.updates = 0 : i64}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  %n = arith.constant dense<1.0> : tensor<4xf32>
  return %l, %n : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{result #0 has neither 'loom.updates', 'loom.output' nor 'loom.grad'}}
func.func @anonymous(%p: tensor<4xf32> {loom.param = "p"}) -> tensor<4xf32> {
  return %p : tensor<4xf32>
}

// -----

// Each value goes into its destination as soon as it is made and the
// destination last read, so that its own buffer is free for what follows:
// %a after the read of %p it follows, %b before %c is made.
// CHECK-LABEL: func.func @early(
// CHECK-SAME: %[[P:[^:]*]]: tensor<4xf32> {loom.param = "p"}, %[[Q:[^:]*]]: tensor<4xf32> {loom.param = "q"}
// CHECK: %[[A:.*]] = arith.negf %[[Q]]
// CHECK: %[[X:.*]] = arith.addf %[[P]], %[[P]]
// CHECK: %[[MA:.*]] = bufferization.materialize_in_destination %[[A]] in %[[P]]
// CHECK: %[[B:.*]] = arith.mulf %[[X]], %[[X]]
// CHECK: %[[MB:.*]] = bufferization.materialize_in_destination %[[B]] in %[[Q]]
// CHECK: %[[C:.*]] = arith.subf %[[X]], %[[B]]
// CHECK: %[[MC:.*]] = bufferization.materialize_in_destination %[[C]] in
// CHECK: return %[[MA]], %[[MB]], %[[MC]]
func.func @early(%p: tensor<4xf32> {loom.param = "p"}, %q: tensor<4xf32> {loom.param = "q"}) -> (tensor<4xf32> {loom.updates = 0 : i64}, tensor<4xf32> {loom.updates = 1 : i64}, tensor<4xf32> {loom.output = "c"}) {
  %a = arith.negf %q : tensor<4xf32>
  %x = arith.addf %p, %p : tensor<4xf32>
  %b = arith.mulf %x, %x : tensor<4xf32>
  %c = arith.subf %x, %b : tensor<4xf32>
  return %a, %b, %c : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
