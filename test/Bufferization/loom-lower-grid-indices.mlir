// RUN: loom-opt %s --loom-lower-grid-indices --split-input-file --verify-diagnostics | FileCheck %s

// A rank's index on the replica axis (1 of pp x dp x tp) is the runtime's
// rank in its data-parallel group (1).
shard.grid @grid(shape = 1x2x1) {sym_visibility = "private"}
// CHECK-LABEL: func.func @replica(
// CHECK: %[[GROUP:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: %[[RANK:.*]] = llvm.call @loom_rt_group_rank(%[[GROUP]]) : (i32) -> i64
// CHECK: %[[INDEX:.*]] = arith.index_cast %[[RANK]] : i64 to index
// CHECK: return %[[INDEX]]
// CHECK: llvm.func @loom_rt_group_rank(i32) -> i64
func.func @replica() -> index {
  %i = shard.process_multi_index on @grid axes = [1] : index
  return %i : index
}

// -----

shard.grid @grid(shape = 2x2x2) {sym_visibility = "private"}
func.func @two(%x: index) -> (index, index) {
  // expected-error @+1 {{the runtime tells one grid axis at a time}}
  %i:2 = shard.process_multi_index on @grid axes = [0, 1] : index, index
  return %i#0, %i#1 : index, index
}
