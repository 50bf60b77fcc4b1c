// RUN: loom-opt %s --split-input-file --loom-wait-for-device | FileCheck %s

// The host waits before its first touch of memory after a launch or a call,
// and once until the next; views, allocation and loads of an argument only
// ever loaded from need no wait.
// CHECK-LABEL: func.func @step(
// CHECK: memref.alloc
// CHECK-NEXT: memref.load %arg1[]
// CHECK-NEXT: gpu.launch
// CHECK: gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: memref.subview
// CHECK-NEXT: call @loom_rt_device_wait()
// CHECK-NEXT: memref.load %arg0[%{{.*}}]
// CHECK-NEXT: memref.store
// CHECK-NEXT: call @loom_rt_sgemm()
// CHECK-NEXT: call @loom_rt_device_wait()
// CHECK-NEXT: memref.load %arg0
// CHECK-NEXT: memref.dealloc
// CHECK-NEXT: return
// CHECK: func.func private @loom_rt_device_wait()
func.func private @loom_rt_sgemm()
func.func @step(%a: memref<8xf32>, %lr: memref<f32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %buf = memref.alloc() : memref<8xf32>
  %r = memref.load %lr[] : memref<f32>
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1)
             threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    memref.store %r, %a[%tx] : memref<8xf32>
    gpu.terminator
  }
  %s = memref.subview %a[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  %x = memref.load %a[%c0] : memref<8xf32>
  memref.store %x, %buf[%c1] : memref<8xf32>
  func.call @loom_rt_sgemm() : () -> ()
  %y = memref.load %a[%c1] : memref<8xf32>
  memref.dealloc %buf : memref<8xf32>
  return %y : f32
}

// -----

// A host loop that launches: each iteration's body starts with work queued;
// a loop that only touches memory gets one wait before it.
// CHECK-LABEL: func.func @loops(
// CHECK: scf.for
// CHECK-NEXT: call @loom_rt_device_wait()
// CHECK-NEXT: memref.load
// CHECK-NEXT: gpu.launch
// CHECK: gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: call @loom_rt_device_wait()
// CHECK-NEXT: scf.for
// CHECK-NOT: loom_rt_device_wait
// CHECK: return
func.func @loops(%a: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    gpu.launch blocks(%bx, %by, %bz) in (%x1 = %c1, %y1 = %c1, %z1 = %c1)
               threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
      memref.store %x, %a[%tx] : memref<8xf32>
      gpu.terminator
    }
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    memref.store %x, %a[%c0] : memref<8xf32>
  }
  return
}

// -----

// Nothing touched after a launch: no wait, and no declaration.
// CHECK-LABEL: func.func @none(
// CHECK-NOT: loom_rt_device_wait
func.func @none(%a: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1)
             threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    %f = arith.constant 1.0 : f32
    memref.store %f, %a[%tx] : memref<8xf32>
    gpu.terminator
  }
  return
}

// -----

// A function called where its caller has queued work: its loads of an
// argument only ever loaded from still wait, since the caller's kernels may
// write that buffer.
// CHECK-LABEL: func.func private @callee(
// CHECK-NEXT: call @loom_rt_device_wait()
// CHECK-NEXT: memref.load %arg0[]
func.func private @callee(%lr: memref<f32>) -> f32 {
  %x = memref.load %lr[] : memref<f32>
  return %x : f32
}
func.func @caller(%lr: memref<f32>) -> f32 {
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1)
             threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    memref.store %f, %lr[] : memref<f32>
    gpu.terminator
  }
  %r = func.call @callee(%lr) : (memref<f32>) -> f32
  return %r : f32
}

// -----

// An offload plan's host function (loom.host) touches host memory only:
// what the device sends it the runtime's transfers deliver, and
// loom_rt_host_begin waits for the GPU before its call. No wait inside.
// CHECK-LABEL: func.func private @step_host(
// CHECK-NOT: loom_rt_device_wait
// CHECK: return
func.func private @loom_rt_transfer()
func.func private @step_host(%w: memref<f32>) attributes {loom.host} {
  func.call @loom_rt_transfer() : () -> ()
  %x = memref.load %w[] : memref<f32>
  %y = arith.addf %x, %x : f32
  memref.store %y, %w[] : memref<f32>
  return
}
