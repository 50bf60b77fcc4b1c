// RUN: loom-opt %s --loom-reshape-destinations --split-input-file | FileCheck %s
// RUN: loom-opt %s --loom-reshape-destinations --eliminate-empty-tensors --split-input-file | FileCheck %s --check-prefix=ELIM

// A layer loop saves a [tokens, features] value into its [layers, batch,
// sequence, features] stack: the stack is collapsed once, where the loop
// receives it, the value goes into the collapsed slice and the result is
// expanded back.
// CHECK-LABEL: func.func @save_expanded(
// CHECK-SAME: %[[STACK:.*]]: tensor<4x2x3x5xf32>, %[[X:.*]]: tensor<6x5xf32>, %[[L:.*]]: index)
// CHECK-NEXT: %[[FLAT:.*]] = tensor.collapse_shape %[[STACK]] {{\[\[}}0], [1, 2], [3]] : tensor<4x2x3x5xf32> into tensor<4x6x5xf32>
// CHECK-NEXT: %[[IN:.*]] = tensor.insert_slice %[[X]] into %[[FLAT]][%[[L]], 0, 0] [1, 6, 5] [1, 1, 1] : tensor<6x5xf32> into tensor<4x6x5xf32>
// CHECK-NEXT: %[[OUT:.*]] = tensor.expand_shape %[[IN]] {{\[\[}}0], [1, 2], [3]] output_shape [4, 2, 3, 5] : tensor<4x6x5xf32> into tensor<4x2x3x5xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @save_expanded(%stack: tensor<4x2x3x5xf32>, %x: tensor<6x5xf32>, %l: index) -> tensor<4x2x3x5xf32> {
  %e = tensor.expand_shape %x [[0, 1], [2]] output_shape [2, 3, 5] : tensor<6x5xf32> into tensor<2x3x5xf32>
  %r = tensor.insert_slice %e into %stack[%l, 0, 0, 0] [1, 2, 3, 5] [1, 1, 1, 1] : tensor<2x3x5xf32> into tensor<4x2x3x5xf32>
  return %r : tensor<4x2x3x5xf32>
}

// -----

// The same for a collapsed value (attention's heads merged): the stack is
// expanded instead.
// CHECK-LABEL: func.func @save_collapsed(
// CHECK-SAME: %[[STACK:.*]]: tensor<4x3x8xf32>, %[[X:.*]]: tensor<3x2x4xf32>, %[[L:.*]]: index)
// CHECK-NEXT: %[[HEADS:.*]] = tensor.expand_shape %[[STACK]] {{\[\[}}0], [1], [2, 3]] output_shape [4, 3, 2, 4] : tensor<4x3x8xf32> into tensor<4x3x2x4xf32>
// CHECK-NEXT: %[[IN:.*]] = tensor.insert_slice %[[X]] into %[[HEADS]][%[[L]], 0, 0, 0] [1, 3, 2, 4] [1, 1, 1, 1]
// CHECK-NEXT: %[[OUT:.*]] = tensor.collapse_shape %[[IN]] {{\[\[}}0], [1], [2, 3]] : tensor<4x3x2x4xf32> into tensor<4x3x8xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @save_collapsed(%stack: tensor<4x3x8xf32>, %x: tensor<3x2x4xf32>, %l: index) -> tensor<4x3x8xf32> {
  %c = tensor.collapse_shape %x [[0], [1, 2]] : tensor<3x2x4xf32> into tensor<3x8xf32>
  %r = tensor.insert_slice %c into %stack[%l, 0, 0] [1, 3, 8] [1, 1, 1] : tensor<3x8xf32> into tensor<4x3x8xf32>
  return %r : tensor<4x3x8xf32>
}

// -----

// A slice that covers part of a trailing dimension stays as it is: the
// reshaped value would not be a slice of the reshaped stack.
// CHECK-LABEL: func.func @partial(
// CHECK: tensor.expand_shape
// CHECK-NEXT: tensor.insert_slice
// CHECK-NEXT: return
func.func @partial(%stack: tensor<4x2x3x10xf32>, %x: tensor<6x5xf32>, %l: index) -> tensor<4x2x3x10xf32> {
  %e = tensor.expand_shape %x [[0, 1], [2]] output_shape [2, 3, 5] : tensor<6x5xf32> into tensor<2x3x5xf32>
  %r = tensor.insert_slice %e into %stack[%l, 0, 0, 0] [1, 2, 3, 5] [1, 1, 1, 1] : tensor<2x3x5xf32> into tensor<4x2x3x10xf32>
  return %r : tensor<4x2x3x10xf32>
}

// -----

// Inside a layer loop the destination is the loop's argument: its reshape
// goes to the top of the body, before the producer of the value, so that
// empty-tensor elimination can compute the value in the slice.
// CHECK-LABEL: func.func @in_loop(
// CHECK: scf.for %[[L:.*]] = {{.*}} iter_args(%[[S:.*]] = %{{.*}})
// CHECK-NEXT: %[[FLAT:.*]] = tensor.collapse_shape %[[S]]
// CHECK-NEXT: tensor.empty
// CHECK: linalg.fill
// CHECK: tensor.insert_slice %{{.*}} into %[[FLAT]][%[[L]], 0, 0]
// ELIM-LABEL: func.func @in_loop(
// ELIM: %[[FLAT:.*]] = tensor.collapse_shape
// ELIM-NEXT: %[[SLICE:.*]] = tensor.extract_slice %[[FLAT]]
// ELIM: %[[X:.*]] = linalg.fill {{.*}} outs(%[[SLICE]] : tensor<6x5xf32>)
// ELIM-NEXT: tensor.insert_slice %[[X]] into %[[FLAT]]
func.func @in_loop(%stack: tensor<4x2x3x5xf32>) -> tensor<4x2x3x5xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f = arith.constant 1.0 : f32
  %r = scf.for %l = %c0 to %c4 step %c1 iter_args(%s = %stack) -> tensor<4x2x3x5xf32> {
    %empty = tensor.empty() : tensor<6x5xf32>
    %x = linalg.fill ins(%f : f32) outs(%empty : tensor<6x5xf32>) -> tensor<6x5xf32>
    %e = tensor.expand_shape %x [[0, 1], [2]] output_shape [2, 3, 5] : tensor<6x5xf32> into tensor<2x3x5xf32>
    %n = tensor.insert_slice %e into %s[%l, 0, 0, 0] [1, 2, 3, 5] [1, 1, 1, 1] : tensor<2x3x5xf32> into tensor<4x2x3x5xf32>
    scf.yield %n : tensor<4x2x3x5xf32>
  }
  return %r : tensor<4x2x3x5xf32>
}
