// RUN: loom-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --split-input-file --verify-diagnostics | FileCheck %s

// A sum over the replicas (grid axis 1 of pp x dp x tp) becomes the
// runtime's in-place all-reduce on the data-parallel group (1), f32 (0),
// over the buffer's 32 elements.
shard.grid @grid(shape = 1x2x1) {sym_visibility = "private"}
// CHECK-LABEL: func.func @sum(
// CHECK-SAME: %[[G:.*]]: memref<8x4xf32
// CHECK: %[[BASE:.*]], %[[OFFSET:.*]], %{{.*}}:2, %{{.*}}:2 = memref.extract_strided_metadata %[[G]]
// CHECK: %[[ALIGNED:.*]] = memref.extract_aligned_pointer_as_index %[[G]]
// CHECK: %[[BYTES:.*]] = arith.muli %[[OFFSET]], %c4
// CHECK: %[[SUM:.*]] = arith.addi %[[ALIGNED]], %[[BYTES]]
// CHECK: %[[ADDRESS:.*]] = arith.index_cast %[[SUM]] : index to i64
// CHECK: %[[P:.*]] = llvm.inttoptr %[[ADDRESS]] : i64 to !llvm.ptr
// CHECK: %[[GROUP:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK: llvm.call @loom_rt_group_all_reduce(%[[GROUP]], %[[F32]], %[[P]], %[[N]])
// CHECK: return %[[G]]
// CHECK: llvm.func @loom_rt_group_all_reduce(i32, i32, !llvm.ptr, i64)
func.func @sum(%g: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %r = shard.all_reduce %g on @grid grid_axes = [1] : tensor<8x4xf32> -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}

// -----

// The operand is read again afterwards: the sum goes into a copy.
shard.grid @grid(shape = 2x2x2) {sym_visibility = "private"}
// CHECK-LABEL: func.func @copy(
// CHECK: %[[COPY:.*]] = memref.alloc
// CHECK: memref.copy %{{.*}}, %[[COPY]]
// CHECK: memref.extract_aligned_pointer_as_index %[[COPY]]
// CHECK: llvm.mlir.constant(2 : i32) : i32
// CHECK: llvm.call @loom_rt_group_all_reduce
func.func @copy(%g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %r = shard.all_reduce %g on @grid grid_axes = [2] : tensor<4xf32> -> tensor<4xf32>
  return %r, %g : tensor<4xf32>, tensor<4xf32>
}

// -----

shard.grid @grid(shape = 2x2x2) {sym_visibility = "private"}
func.func @two_axes(%g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{reduces over grid axes the runtime has no group for: one axis, or all three}}
  // expected-error @+1 {{failed to bufferize op}}
  %r = shard.all_reduce %g on @grid grid_axes = [0, 1] : tensor<4xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

shard.grid @grid(shape = 2x2x2) {sym_visibility = "private"}
func.func @max(%g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{only f32 sums into the same type run on the runtime's communicators}}
  // expected-error @+1 {{failed to bufferize op}}
  %r = shard.all_reduce %g on @grid grid_axes = [1] reduction = max : tensor<4xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}
