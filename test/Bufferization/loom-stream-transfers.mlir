// RUN: loom-opt %s --loom-stream-transfers --split-input-file | FileCheck %s

// A layer loop stacks each iteration's gradient; the stack crosses to the
// host after the loop. The loop builds its stack in the host buffer
// instead, each iteration's slice crossing into its place as soon as it
// exists.
// CHECK-LABEL: func.func @stream(
// CHECK-SAME: %[[X:.*]]: tensor<8xf32>, %[[HOST:.*]]: tensor<4x8xf32>)
// CHECK-NOT: tensor.empty() : tensor<4x8xf32>
// CHECK: %[[R:.*]] = scf.for %[[L:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %[[HOST]]) -> (tensor<4x8xf32>)
// CHECK: %[[Y:.*]] = loom.add %[[X]], %[[X]] : tensor<8xf32>
// CHECK-NEXT: %[[SLOT:.*]] = tensor.extract_slice %[[ACC]][%[[L]], 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
// CHECK-NEXT: %[[SENT:.*]] = loom.transfer %[[Y]] into %[[SLOT]] to host : tensor<8xf32>
// CHECK-NEXT: %[[IN:.*]] = tensor.insert_slice %[[SENT]] into %[[ACC]][%[[L]], 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
// CHECK-NEXT: scf.yield %[[IN]]
// CHECK-NOT: loom.transfer
// CHECK: return %[[R]]
func.func @stream(%x: tensor<8xf32>, %host: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %empty = tensor.empty() : tensor<4x8xf32>
  %stack = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %empty) -> (tensor<4x8xf32>) {
    %y = loom.add %x, %x : tensor<8xf32>
    %in = tensor.insert_slice %y into %acc[%l, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
    scf.yield %in : tensor<4x8xf32>
  }
  %sent = loom.transfer %stack into %host to host : tensor<4x8xf32>
  return %sent : tensor<4x8xf32>
}

// -----

// The device reads the stack besides (a norm it sums over ranks): the whole
// stack stays, and crosses after the loop.
// CHECK-LABEL: func.func @read_besides(
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<4x8xf32>)
// CHECK-NOT: loom.transfer
// CHECK: scf.yield
// CHECK: loom.transfer %{{.*}} into %{{.*}} to host : tensor<4x8xf32>
func.func @read_besides(%x: tensor<8xf32>, %host: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %empty = tensor.empty() : tensor<4x8xf32>
  %stack = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %empty) -> (tensor<4x8xf32>) {
    %y = loom.add %x, %x : tensor<8xf32>
    %in = tensor.insert_slice %y into %acc[%l, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
    scf.yield %in : tensor<4x8xf32>
  }
  %sq = loom.sum_squares %stack : tensor<4x8xf32> -> tensor<f32>
  %sent = loom.transfer %stack into %host to host : tensor<4x8xf32>
  return %sent, %sq : tensor<4x8xf32>, tensor<f32>
}

// -----

// A loop that carries its value from one iteration to the next (a sum over
// micro-batches) is not a stack: it crosses whole, after the loop.
// CHECK-LABEL: func.func @carried(
// CHECK: scf.for
// CHECK-NOT: loom.transfer
// CHECK: scf.yield
// CHECK: loom.transfer %{{.*}} into %{{.*}} to host : tensor<8xf32>
func.func @carried(%x: tensor<8xf32>, %host: tensor<8xf32>) -> tensor<8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %empty = tensor.empty() : tensor<8xf32>
  %sum = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %empty) -> (tensor<8xf32>) {
    %y = loom.add %acc, %x : tensor<8xf32>
    scf.yield %y : tensor<8xf32>
  }
  %sent = loom.transfer %sum into %host to host : tensor<8xf32>
  return %sent : tensor<8xf32>
}

// -----

// The destination is made after the loop (it does not dominate it), is read
// besides, or the loop stacks along another dimension, whose slices are not
// contiguous: each stack crosses whole, after the loop.
// CHECK-LABEL: func.func @not_streamed(
// CHECK: scf.for
// CHECK-NOT: loom.transfer
// CHECK: scf.yield
// CHECK-COUNT-3: loom.transfer %{{.*}} into %{{.*}} to host : tensor<4x8xf32>
func.func @not_streamed(%x: tensor<8xf32>, %host: tensor<4x8xf32>, %col: tensor<4xf32>, %cols: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %empty = tensor.empty() : tensor<4x8xf32>
  %stack = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %empty) -> (tensor<4x8xf32>) {
    %y = loom.add %x, %x : tensor<8xf32>
    %in = tensor.insert_slice %y into %acc[%l, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
    scf.yield %in : tensor<4x8xf32>
  }
  %later = tensor.empty() : tensor<4x8xf32>
  %late = loom.transfer %stack into %later to host : tensor<4x8xf32>
  %empty2 = tensor.empty() : tensor<4x8xf32>
  %stack2 = scf.for %l = %c0 to %c4 step %c1 iter_args(%acc = %empty2) -> (tensor<4x8xf32>) {
    %y = loom.add %x, %x : tensor<8xf32>
    %in = tensor.insert_slice %y into %acc[%l, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
    scf.yield %in : tensor<4x8xf32>
  }
  %read = loom.transfer %stack2 into %host to host : tensor<4x8xf32>
  %empty3 = tensor.empty() : tensor<4x8xf32>
  %stack3 = scf.for %l = %c0 to %c8 step %c1 iter_args(%acc = %empty3) -> (tensor<4x8xf32>) {
    %y = loom.add %col, %col : tensor<4xf32>
    %in = tensor.insert_slice %y into %acc[0, %l] [4, 1] [1, 1] : tensor<4xf32> into tensor<4x8xf32>
    scf.yield %in : tensor<4x8xf32>
  }
  %sent = loom.transfer %stack3 into %cols to host : tensor<4x8xf32>
  return %late, %read, %sent, %host : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
