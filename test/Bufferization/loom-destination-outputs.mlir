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
