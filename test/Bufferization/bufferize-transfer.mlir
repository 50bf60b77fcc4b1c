// RUN: loom-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | FileCheck %s

// A transfer is one call of the runtime with the destination's and the
// source's addresses, the bytes and the direction (0: to the host); an
// async one only starts the copy, and loom.transfer_wait waits for it,
// named by its buffer's address.
// CHECK-LABEL: func.func @send(
// CHECK-SAME: %[[G:.*]]: memref<8xf32>, %{{.*}}: memref<8xf32>, %{{.*}}: memref<8xf32>)
// CHECK: call @loom_rt_transfer(%{{.*}}, %{{.*}}, %c32_i64, %c0_i32)
// CHECK: memref.extract_aligned_pointer_as_index %[[G]]
// CHECK: call @loom_rt_transfer_start(%{{.*}}, %{{.*}}, %c32_i64{{.*}}, %c0_i32{{.*}})
// CHECK: memref.extract_aligned_pointer_as_index %[[G]]
// CHECK: call @loom_rt_transfer_wait(
// CHECK: return
func.func @send(%g: tensor<8xf32>, %host: tensor<8xf32>, %slot: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %h = loom.transfer %g into %host to host : tensor<8xf32>
  %s = loom.transfer %g into %slot to host async : tensor<8xf32>
  loom.transfer_wait %g : tensor<8xf32>
  return %h, %s : tensor<8xf32>, tensor<8xf32>
}

// A flag crosses as the byte LLVM stores an i1 in, not as nothing (fp16's
// skip-the-update flag, which a multi-rank step decides on the device).
// CHECK-LABEL: func.func @flag(
// CHECK: call @loom_rt_transfer(%{{.*}}, %{{.*}}, %c1_i64, %c0_i32)
func.func @flag(%f: tensor<i1>, %host: tensor<i1>) -> tensor<i1> {
  %h = loom.transfer %f into %host to host : tensor<i1>
  return %h : tensor<i1>
}

// A sum over micro-batches: the runtime adds the source to the host's
// buffer where %more holds (1), else to zero (0); async, it only starts.
// CHECK-LABEL: func.func @sum(
// CHECK-SAME: %{{.*}}: memref<8xf32>, %{{.*}}: memref<8xf32>, %[[MORE:.*]]: i1)
// CHECK: %[[FLAG:.*]] = arith.extui %[[MORE]] : i1 to i32
// CHECK: call @loom_rt_transfer_add(%{{.*}}, %{{.*}}, %c32_i64, %[[FLAG]])
// CHECK: call @loom_rt_transfer_add_start(
func.func @sum(%g: tensor<8xf32>, %host: tensor<8xf32>, %more: i1) -> tensor<8xf32> {
  %h = loom.transfer %g into %host to host accumulate if %more : tensor<8xf32>
  %s = loom.transfer %g into %h to host async accumulate if %more : tensor<8xf32>
  loom.transfer_wait %s : tensor<8xf32>
  return %s : tensor<8xf32>
}
