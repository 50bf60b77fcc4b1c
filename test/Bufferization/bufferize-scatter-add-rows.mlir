// loom.scatter_add_rows on buffers: a call of the runtime that adds into the
// init's buffer, with scratch for sorting the indices.
// RUN: loom-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --split-input-file --verify-diagnostics | FileCheck %s

// In place: the table the call adds into is the result. 6 indices into 8
// rows of 4 columns from row 0; loom_scatter_add_rows_scratch(6, 8) is
// 1 chunk x 8 rows + 2 x 6 + 8 + 1 = 29 int32s.
// CHECK-LABEL: func.func @in_place(
// CHECK-SAME: %[[U:[a-z0-9]+]]: memref<6x4xf32>, %[[IDS:[a-z0-9]+]]: memref<6xi32>, %[[HEAD:[a-z0-9]+]]: memref<8x4xf32>)
// CHECK-NOT: memref.copy
// CHECK: %[[SCRATCH:.*]] = memref.alloc() {{.*}} : memref<29xi32>
// CHECK-DAG: %[[START:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[F32:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[N:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[COLS:.*]] = arith.constant 4 : i64
// CHECK: memref.extract_aligned_pointer_as_index %[[IDS]]
// CHECK: %[[PIDS:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[U]]
// CHECK: %[[PU:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[HEAD]]
// CHECK: %[[POUT:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[SCRATCH]]
// CHECK: %[[PS:.*]] = llvm.inttoptr
// CHECK: call @loom_rt_scatter_add_rows(%[[F32]], %[[N]], %[[ROWS]], %[[COLS]], %[[START]], %[[PIDS]], %[[PU]], %[[POUT]], %[[PS]])
// CHECK-NOT: memref.copy
// CHECK: return %[[HEAD]]
// CHECK: func.func private @loom_rt_scatter_add_rows(i32, i64, i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
func.func @in_place(%u: tensor<6x4xf32>, %ids: tensor<6xi32>, %head: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %a = loom.scatter_add_rows %u, %ids into %head : tensor<6x4xf32>, tensor<6xi32> -> tensor<8x4xf32>
  return %a : tensor<8x4xf32>
}

// -----

// An init read again afterwards is copied first; a part's first row is
// passed as i64; bf16 updates are read as they are (dtype 1).
// CHECK-LABEL: func.func @init_read_after(
// CHECK-SAME: %[[U:[a-z0-9]+]]: memref<6x4xbf16>, %{{.*}}: memref<6xi32>, %[[HEAD:[a-z0-9]+]]: memref<8x4xf32>, %[[FIRST:[a-z0-9]+]]: index)
// CHECK: %[[OWN:.*]] = memref.alloc() {{.*}} : memref<8x4xf32>
// CHECK: memref.copy %[[HEAD]], %[[OWN]]
// CHECK: %[[START:.*]] = arith.index_cast %[[FIRST]] : index to i64
// CHECK: %[[BF16:.*]] = arith.constant 1 : i32
// CHECK: memref.extract_aligned_pointer_as_index %[[U]]
// CHECK: memref.extract_aligned_pointer_as_index %[[OWN]]
// CHECK: call @loom_rt_scatter_add_rows(%[[BF16]], %{{.*}}, %{{.*}}, %{{.*}}, %[[START]],
// CHECK: return %[[OWN]], %[[HEAD]]
func.func @init_read_after(%u: tensor<6x4xbf16>, %ids: tensor<6xi32>, %head: tensor<8x4xf32>, %first: index) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  %a = loom.scatter_add_rows %u, %ids into %head row_start %first : tensor<6x4xbf16>, tensor<6xi32> -> tensor<8x4xf32>
  return %a, %head : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// A strided view of a table is added into through a contiguous copy, which
// is copied back after the call.
// CHECK-LABEL: func.func @strided(
// CHECK: %[[VIEW:.*]] = memref.subview %{{.*}}[0, 0] [8, 4] [1, 1] : memref<8x6xf32> to memref<8x4xf32, strided<[6, 1]>>
// CHECK: %[[COPY:.*]] = memref.alloc() {{.*}} : memref<8x4xf32>
// CHECK: memref.copy %[[VIEW]], %[[COPY]]
// CHECK: memref.extract_aligned_pointer_as_index %[[COPY]]
// CHECK: call @loom_rt_scatter_add_rows(
// CHECK-NEXT: memref.copy %[[COPY]], %[[VIEW]]
func.func @strided(%u: tensor<6x4xf32>, %ids: tensor<6xi32>, %big: tensor<8x6xf32>) -> tensor<8x4xf32> {
  %init = tensor.extract_slice %big[0, 0] [8, 4] [1, 1] : tensor<8x6xf32> to tensor<8x4xf32>
  %a = loom.scatter_add_rows %u, %ids into %init : tensor<6x4xf32>, tensor<6xi32> -> tensor<8x4xf32>
  return %a : tensor<8x4xf32>
}

// -----

// The runtime numbers the indices and their sorted places with int32s.
func.func @too_many(%u: tensor<2147483648x1xf32>, %ids: tensor<2147483648xi32>, %init: tensor<4x1xf32>) -> tensor<4x1xf32> {
  // expected-error @+2 {{scatters 2147483648 rows into 4, more than the runtime's int32 positions hold}}
  // expected-error @+1 {{failed to bufferize op}}
  %a = loom.scatter_add_rows %u, %ids into %init : tensor<2147483648x1xf32>, tensor<2147483648xi32> -> tensor<4x1xf32>
  return %a : tensor<4x1xf32>
}
