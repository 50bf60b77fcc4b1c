// RUN: loom-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --split-input-file --verify-diagnostics | FileCheck %s

// A sum over the replicas (grid axis 1 of pp x dp x tp) becomes the
// runtime's in-place all-reduce on the data-parallel group (1), f32 (0),
// over the buffer's 32 elements.
shard.grid @grid(shape = 1x2x1) {sym_visibility = "private"}
// CHECK-LABEL: func.func @sum(
// CHECK-SAME: %[[G:.*]]: memref<8x4xf32
// CHECK-DAG: %[[GROUP:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: %[[BASE:.*]], %[[OFFSET:.*]], %{{.*}}:2, %{{.*}}:2 = memref.extract_strided_metadata %[[G]]
// CHECK: %[[ALIGNED:.*]] = memref.extract_aligned_pointer_as_index %[[G]]
// CHECK: %[[BYTES:.*]] = arith.muli %[[OFFSET]], %c4
// CHECK: %[[SUM:.*]] = arith.addi %[[ALIGNED]], %[[BYTES]]
// CHECK: %[[ADDRESS:.*]] = arith.index_cast %[[SUM]] : index to i64
// CHECK: %[[P:.*]] = llvm.inttoptr %[[ADDRESS]] : i64 to !llvm.ptr
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
// CHECK: llvm.mlir.constant(2 : i32) : i32
// CHECK: memref.extract_aligned_pointer_as_index %[[COPY]]
// CHECK: llvm.call @loom_rt_group_all_reduce
func.func @copy(%g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %r = shard.all_reduce %g on @grid grid_axes = [2] : tensor<4xf32> -> tensor<4xf32>
  return %r, %g : tensor<4xf32>, tensor<4xf32>
}

// -----

shard.grid @grid(shape = 2x2x2) {sym_visibility = "private"}
func.func @two_axes(%g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{communicates over grid axes the runtime has no group for: one axis, or all three}}
  // expected-error @+1 {{failed to bufferize op}}
  %r = shard.all_reduce %g on @grid grid_axes = [0, 1] : tensor<4xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A maximum over the tensor-parallel group (grid axis 2, runtime group 2):
// the vocabulary-parallel cross-entropy's row maxima.
shard.grid @grid(shape = 2x2x2) {sym_visibility = "private"}
// CHECK-LABEL: func.func @max(
// CHECK: %[[GROUP:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK: llvm.call @loom_rt_group_all_reduce_max(%[[GROUP]], %{{.*}}, %{{.*}}, %{{.*}})
func.func @max(%g: tensor<4xf32>) -> tensor<4xf32> {
  %r = shard.all_reduce %g on @grid grid_axes = [2] reduction = max : tensor<4xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

shard.grid @grid(shape = 2x2x2) {sym_visibility = "private"}
func.func @min(%g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{only f32 sums and maxima into the same type run on the runtime's communicators}}
  // expected-error @+1 {{failed to bufferize op}}
  %r = shard.all_reduce %g on @grid grid_axes = [1] reduction = min : tensor<4xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Gathers along the leading dimension: the runtime writes the ranks'
// blocks, in rank order, into the new buffer; 8 elements per rank.
shard.grid @grid(shape = 1x2x1) {sym_visibility = "private"}
// CHECK-LABEL: func.func @gather_rows(
// CHECK-DAG: %[[GROUP:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-DAG: %[[ALL:.*]] = memref.alloc() {{.*}} : memref<4x4xf32>
// CHECK: %[[N:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK: llvm.call @loom_rt_group_all_gather(%[[GROUP]], %[[F32]], %{{.*}}, %{{.*}}, %[[N]])
// CHECK: return %[[ALL]]
// CHECK: llvm.func @loom_rt_group_all_gather(i32, i32, !llvm.ptr, !llvm.ptr, i64)
func.func @gather_rows(%x: tensor<2x4xf32>) -> tensor<4x4xf32> {
  %r = shard.all_gather %x on @grid grid_axes = [1] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

// Along another dimension, the blocks arrive in a [ranks, block] buffer
// and are transposed into place.
shard.grid @grid(shape = 1x2x1) {sym_visibility = "private"}
// CHECK-LABEL: func.func @gather_columns(
// CHECK-DAG: %[[ALL:.*]] = memref.alloc() {{.*}} : memref<3x4xf32>
// CHECK-DAG: %[[BLOCKS:.*]] = memref.alloc() {{.*}} : memref<2x3x2xf32>
// CHECK: llvm.call @loom_rt_group_all_gather
// CHECK: %[[VIEW:.*]] = memref.expand_shape %[[ALL]] {{\[\[}}0], [1, 2]] output_shape [3, 2, 2]
// CHECK: linalg.transpose ins(%[[BLOCKS]] : memref<2x3x2xf32>) outs(%[[VIEW]] : memref<3x2x2xf32>) permutation = [1, 0, 2]
// CHECK: return %[[ALL]]
func.func @gather_columns(%x: tensor<3x2xf32>) -> tensor<3x4xf32> {
  %r = shard.all_gather %x on @grid grid_axes = [1] gather_axis = 1 : tensor<3x2xf32> -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}

// -----

// A reduce-scatter: rank r receives the sum of block r, 4 elements.
shard.grid @grid(shape = 1x2x1) {sym_visibility = "private"}
// CHECK-LABEL: func.func @scatter_rows(
// CHECK: %[[MINE:.*]] = memref.alloc() {{.*}} : memref<1x4xf32>
// CHECK: %[[N:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK: llvm.call @loom_rt_group_reduce_scatter(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[N]])
// CHECK: return %[[MINE]]
// CHECK: llvm.func @loom_rt_group_reduce_scatter(i32, i32, !llvm.ptr, !llvm.ptr, i64)
func.func @scatter_rows(%x: tensor<2x4xf32>) -> tensor<1x4xf32> {
  %r = shard.reduce_scatter %x on @grid grid_axes = [1] scatter_axis = 0 : tensor<2x4xf32> -> tensor<1x4xf32>
  return %r : tensor<1x4xf32>
}

// -----

// Along another dimension, the blocks are transposed into a [ranks, block]
// buffer first.
shard.grid @grid(shape = 1x2x1) {sym_visibility = "private"}
// CHECK-LABEL: func.func @scatter_columns(
// CHECK-SAME: %[[X:.*]]: memref<3x4xf32>
// CHECK-DAG: %[[MINE:.*]] = memref.alloc() {{.*}} : memref<3x2xf32>
// CHECK-DAG: %[[BLOCKS:.*]] = memref.alloc() {{.*}} : memref<2x3x2xf32>
// CHECK: %[[VIEW:.*]] = memref.expand_shape %[[X]] {{\[\[}}0], [1, 2]] output_shape [3, 2, 2]
// CHECK: linalg.transpose ins(%[[VIEW]] : memref<3x2x2xf32>) outs(%[[BLOCKS]] : memref<2x3x2xf32>) permutation = [1, 0, 2]
// CHECK: llvm.call @loom_rt_group_reduce_scatter
// CHECK: return %[[MINE]]
func.func @scatter_columns(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
  %r = shard.reduce_scatter %x on @grid grid_axes = [1] scatter_axis = 1 : tensor<3x4xf32> -> tensor<3x2xf32>
  return %r : tensor<3x2xf32>
}

// -----

// A gather only reads its operand: a strided one (a slice of a larger
// buffer) is copied to a contiguous buffer first.
shard.grid @grid(shape = 1x2x1) {sym_visibility = "private"}
// CHECK-LABEL: func.func @strided(
// CHECK: %[[VIEW:.*]] = memref.subview
// CHECK: %[[COPY:.*]] = memref.alloc() {{.*}} : memref<2x4xf32>
// CHECK: memref.copy %[[VIEW]], %[[COPY]]
// CHECK: llvm.call @loom_rt_group_all_gather
func.func @strided(%t: tensor<4x8xf32>) -> tensor<4x4xf32> {
  %s = tensor.extract_slice %t[0, 0] [2, 4] [1, 1] : tensor<4x8xf32> to tensor<2x4xf32>
  %g = shard.all_gather %s on @grid grid_axes = [1] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
  return %g : tensor<4x4xf32>
}

// -----

// A pipeline's messages: a send copies its operand's buffer to the peer on
// the pipeline group (3) with its tag and does not wait; a receive fills a
// new buffer. bf16 moves as it is (dtype 1).
// CHECK-LABEL: func.func @messages(
// CHECK: %[[PP:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: %[[N:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK: %[[PEER:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK: %[[TAG:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK: llvm.call @loom_rt_group_send(%[[PP]], %[[F32]], %{{.*}}, %[[N]], %[[PEER]], %[[TAG]])
// CHECK: %[[R:.*]] = memref.alloc() {{.*}} : memref<2x4xbf16>
// CHECK: %[[PP2:.*]] = llvm.mlir.constant(3 : i32) : i32
// CHECK: %[[BF16:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: arith.muli %{{.*}}, %c2
// CHECK: llvm.call @loom_rt_group_recv(%[[PP2]], %[[BF16]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: return %[[R]]
// CHECK: llvm.func @loom_rt_group_send(i32, i32, !llvm.ptr, i64, i64, i64)
// CHECK: llvm.func @loom_rt_group_recv(i32, i32, !llvm.ptr, i64, i64, i64)
func.func @messages(%x: tensor<2x4xf32>) -> tensor<2x4xbf16> {
  loom.send %x to 1 tag 2 : tensor<2x4xf32>
  %r = loom.recv from 1 tag 2 : tensor<2x4xbf16>
  return %r : tensor<2x4xbf16>
}

// -----

func.func @integers(%x: tensor<2x4xi32>) {
  // expected-error @+2 {{moves 'i32' elements; the runtime moves f32, bf16 and f16}}
  // expected-error @+1 {{failed to bufferize op}}
  loom.send %x to 1 tag 0 : tensor<2x4xi32>
  return
}

// -----

// A sum onto one rank of the replicas, in place: the runtime's reduce on the
// data-parallel group (1), f32 (0), 32 elements, onto the root the index
// names, passed as i64.
shard.grid @grid(shape = 1x2x1) {sym_visibility = "private"}
// CHECK-LABEL: func.func @reduce(
// CHECK-SAME: %[[G:.*]]: memref<8x4xf32{{.*}}>, %[[ROOT:.*]]: index)
// CHECK-DAG: %[[GROUP:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: %[[P:.*]] = llvm.inttoptr
// CHECK: %[[N:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK: %[[R:.*]] = arith.index_cast %[[ROOT]] : index to i64
// CHECK: llvm.call @loom_rt_group_reduce(%[[GROUP]], %[[F32]], %[[P]], %[[N]], %[[R]])
// CHECK: return %[[G]]
// CHECK: llvm.func @loom_rt_group_reduce(i32, i32, !llvm.ptr, i64, i64)
func.func @reduce(%g: tensor<8x4xf32>, %root: index) -> tensor<8x4xf32> {
  %r = shard.reduce %g on @grid grid_axes = [1] root = [%root] : (tensor<8x4xf32>, index) -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}

// -----

// A static root is a constant.
shard.grid @grid(shape = 1x2x1) {sym_visibility = "private"}
// CHECK-LABEL: func.func @reduce_to_one(
// CHECK: %[[ONE:.*]] = arith.constant 1 : index
// CHECK: %[[R:.*]] = arith.index_cast %[[ONE]] : index to i64
// CHECK: llvm.call @loom_rt_group_reduce(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[R]])
func.func @reduce_to_one(%g: tensor<4xf32>) -> tensor<4xf32> {
  %r = shard.reduce %g on @grid grid_axes = [1] root = [1] : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

shard.grid @grid(shape = 1x2x1) {sym_visibility = "private"}
func.func @reduce_max(%g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{only f32 sums into the same type run on the runtime's communicators}}
  // expected-error @+1 {{failed to bufferize op}}
  %r = shard.reduce %g on @grid grid_axes = [1] reduction = max root = [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
