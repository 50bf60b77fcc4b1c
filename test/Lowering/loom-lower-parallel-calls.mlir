// RUN: loom-opt %s --loom-lower-parallel-calls --split-input-file --verify-diagnostics | FileCheck %s

// The loop's values go through a struct in the caller's frame; a task of
// fixed signature loads them and runs the range the runtime gives it.
module {
  llvm.func internal @step_loop0(%from: i64, %to: i64, %p: !llvm.ptr, %s: f32) attributes {loom.parallel_for} {
    llvm.return
  }
  llvm.func @step(%p: !llvm.ptr, %s: f32) {
    %0 = llvm.mlir.constant(0 : i64) : i64
    %1 = llvm.mlir.constant(64 : i64) : i64
    llvm.call @step_loop0(%0, %1, %p, %s) : (i64, i64, !llvm.ptr, f32) -> ()
    llvm.return
  }
}
// CHECK-LABEL: llvm.func internal @step_loop0_task(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr, %[[FROM:.*]]: i64, %[[TO:.*]]: i64)
// CHECK: %[[PF:.*]] = llvm.getelementptr %[[CTX]][0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, f32)>
// CHECK: %[[P:.*]] = llvm.load %[[PF]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[SF:.*]] = llvm.getelementptr %[[CTX]][0, 1] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, f32)>
// CHECK: %[[S:.*]] = llvm.load %[[SF]] : !llvm.ptr -> f32
// CHECK: llvm.call @step_loop0(%[[FROM]], %[[TO]], %[[P]], %[[S]])
// CHECK-LABEL: llvm.func @step(
// CHECK-SAME: %[[ARG:.*]]: !llvm.ptr, %[[SCALAR:.*]]: f32)
// CHECK: %[[SLOT:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, f32)>
// CHECK: llvm.store %[[ARG]], %{{.*}} : !llvm.ptr, !llvm.ptr
// CHECK: llvm.store %[[SCALAR]], %{{.*}} : f32, !llvm.ptr
// CHECK: %[[TASK:.*]] = llvm.mlir.addressof @step_loop0_task : !llvm.ptr
// CHECK: llvm.call @loom_rt_parallel_for(%[[TASK]], %[[SLOT]], %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, i64, i64) -> ()
// CHECK-NOT: llvm.call @step_loop0(
// CHECK: llvm.func @loom_rt_parallel_for(!llvm.ptr, !llvm.ptr, i64, i64)

// -----

module {
  // expected-error @+1 {{is marked 'loom.parallel_for' but does not take an i64 range first}}
  llvm.func internal @bad(%p: !llvm.ptr, %q: i64) attributes {loom.parallel_for} {
    llvm.return
  }
}

// -----

module {
  llvm.func internal @loop(%from: i64, %to: i64) attributes {loom.parallel_for} {
    llvm.return
  }
  func.func @caller(%a: i64, %b: i64) {
    // expected-error @+1 {{calls a parallel loop from outside an llvm.func}}
    llvm.call @loop(%a, %b) : (i64, i64) -> ()
    return
  }
}
