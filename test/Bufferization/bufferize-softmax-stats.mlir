// loom.softmax_stats on buffers: a call of the runtime that reads the
// logits and writes the maxima and sums into two new buffers.
// RUN: loom-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --split-input-file | FileCheck %s

// 6 rows of 8 bf16 logits (dtype 1), their first 7 columns.
// CHECK-LABEL: func.func @stats(
// CHECK-SAME: %[[LOGITS:[a-z0-9]+]]: memref<6x8xbf16>)
// CHECK-DAG: %[[MAX:.*]] = memref.alloc() {{.*}} : memref<6xf32>
// CHECK-DAG: %[[SUM:.*]] = memref.alloc() {{.*}} : memref<6xf32>
// CHECK-DAG: %[[BF16:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[COLS:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[CLASSES:.*]] = arith.constant 7 : i64
// CHECK: memref.extract_aligned_pointer_as_index %[[LOGITS]]
// CHECK: %[[PL:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[MAX]]
// CHECK: %[[PM:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[SUM]]
// CHECK: %[[PS:.*]] = llvm.inttoptr
// CHECK: call @loom_rt_softmax_stats(%[[BF16]], %[[ROWS]], %[[COLS]], %[[CLASSES]], %[[PL]], %[[PM]], %[[PS]])
// CHECK: return %[[MAX]], %[[SUM]]
// CHECK: func.func private @loom_rt_softmax_stats(i32, i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr)
func.func @stats(%logits: tensor<6x8xbf16>) -> (tensor<6xf32>, tensor<6xf32>) {
  %max, %sum = loom.softmax_stats %logits {classes = 7 : i64} : tensor<6x8xbf16> -> tensor<6xf32>
  return %max, %sum : tensor<6xf32>, tensor<6xf32>
}

// -----

// A strided view of logits (a slice of a larger buffer) is read through a
// contiguous copy.
// CHECK-LABEL: func.func @strided(
// CHECK: %[[COPY:.*]] = memref.alloc() {{.*}} : memref<6x8xf32>
// CHECK: memref.copy %{{.*}}, %[[COPY]]
// CHECK: memref.extract_aligned_pointer_as_index %[[COPY]]
// CHECK: call @loom_rt_softmax_stats(
func.func @strided(%all: tensor<6x16xf32>) -> (tensor<6xf32>, tensor<6xf32>) {
  %logits = tensor.extract_slice %all[0, 4] [6, 8] [1, 1] : tensor<6x16xf32> to tensor<6x8xf32>
  %max, %sum = loom.softmax_stats %logits {classes = 8 : i64} : tensor<6x8xf32> -> tensor<6xf32>
  return %max, %sum : tensor<6xf32>, tensor<6xf32>
}
