// RUN: loom-opt %s --split-input-file --loom-parallel-loops-to-gpu | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-parallel-loops-to-gpu=block-size=128 | FileCheck %s --check-prefix=B128
// RUN: not loom-opt %s --split-input-file --loom-parallel-loops-to-gpu=block-size=2048 2>&1 | FileCheck %s --check-prefix=BAD

// A two-dimensional nest is one thread per iteration, 256 to a block: the
// thread's number split into the indices, the last dimension fastest.
// CHECK-LABEL: func.func @nest(
// CHECK: memref.alloca_scope {
// CHECK-DAG: %[[TOTAL:.*]] = arith.constant 600 : index
// CHECK-DAG: %[[C256:.*]] = arith.constant 256 : index
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %{{c3.*}}, %{{.*}} = %{{c1.*}}, %{{.*}} = %{{c1.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C256]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) function(@loop) {
// CHECK: %[[BASE:.*]] = arith.muli %[[BX]], %[[C256]]
// CHECK: %[[ID:.*]] = arith.addi %[[BASE]], %[[TX]]
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[ID]], %[[TOTAL]]
// CHECK: scf.if %[[IN]] {
// CHECK: %[[J:.*]] = arith.remsi %[[ID]], %{{.*}}
// CHECK: %[[I:.*]] = arith.divsi %[[ID]], %{{.*}}
// CHECK: memref.load %{{.*}}[%[[I]], %[[J]]] : memref<6x100xf32>
// CHECK: math.exp
// CHECK: memref.store
// CHECK: gpu.terminator
// CHECK-NOT: scf.parallel
// B128-LABEL: func.func @nest(
// B128: arith.constant 128 : index
// B128: gpu.launch
// BAD: block-size must be in [1, 1024], got 2048
func.func @nest(%a: memref<6x100xf32>, %b: memref<6x100xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c100 = arith.constant 100 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c6, %c100) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<6x100xf32>
    %y = math.exp %x : f32
    memref.store %y, %b[%i, %j] : memref<6x100xf32>
    scf.reduce
  }
  return
}

// -----

// The kernel is named after the part of the model its loop computes and
// its pass, from the loop's location.
// CHECK-LABEL: func.func @named(
// CHECK: gpu.launch {{.*}} function(@backward_h_ln_1) {
#part = loc("h.*.ln_1")
#backward = loc(fused<"loom.backward">[#part])
func.func @named(%a: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    %x = memref.load %a[%i] : memref<64xf32>
    %y = math.exp %x : f32
    memref.store %y, %a[%i] : memref<64xf32>
    scf.reduce
  } loc(callsite(#backward at "model.json":1:1))
  return
}

// -----

// A loop that calls the runtime stays on the host; the nest inside it is
// launched once per iteration, and the loops nested in a kernel stay in
// each of its threads.
// CHECK-LABEL: func.func @heads(
// CHECK: scf.parallel (%[[H:.*]]) =
// CHECK: func.call @loom_rt_sgemm
// CHECK: gpu.launch
// CHECK: scf.if
// CHECK: scf.parallel
// CHECK: memref.load %{{.*}}[%[[H]], %{{.*}}, %{{.*}}]
func.func private @loom_rt_sgemm()
func.func @heads(%a: memref<4x8x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%h) = (%c0) to (%c4) step (%c1) {
    func.call @loom_rt_sgemm() : () -> ()
    scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
      scf.parallel (%j) = (%c0) to (%c8) step (%c1) {
        %x = memref.load %a[%h, %i, %j] : memref<4x8x8xf32>
        %y = arith.maximumf %x, %zero : f32
        memref.store %y, %a[%h, %i, %j] : memref<4x8x8xf32>
        scf.reduce
      }
      scf.reduce
    }
    scf.reduce
  }
  return
}

// -----

// A copy between buffers is a nest of its elements, on the device.
// CHECK-LABEL: func.func @copy(
// CHECK-NOT: memref.copy
// CHECK: gpu.launch
// CHECK: %[[V:.*]] = memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<3x5xf32, strided<[10, 1]>>
// CHECK: memref.store %[[V]], %{{.*}}[%{{.*}}, %{{.*}}] : memref<3x5xf32>
// CHECK-LABEL: func.func @copy_scalar(
// CHECK: gpu.launch
// CHECK: %[[S:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK: memref.store %[[S]], %{{.*}}[] : memref<f32>
func.func @copy(%a: memref<3x5xf32, strided<[10, 1]>>, %b: memref<3x5xf32>) {
  memref.copy %a, %b : memref<3x5xf32, strided<[10, 1]>> to memref<3x5xf32>
  return
}
func.func @copy_scalar(%a: memref<f32>, %b: memref<f32>) {
  memref.copy %a, %b : memref<f32> to memref<f32>
  return
}

// -----

// A parallel loop with reductions of its own is left alone.
// CHECK-LABEL: func.func @sum(
// CHECK-NOT: gpu.launch
// CHECK: scf.parallel
func.func @sum(%a: memref<16xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  %s = scf.parallel (%i) = (%c0) to (%c16) step (%c1) init (%zero) -> f32 {
    %x = memref.load %a[%i] : memref<16xf32>
    scf.reduce(%x : f32) {
    ^bb0(%l: f32, %r: f32):
      %t = arith.addf %l, %r : f32
      scf.reduce.return %t : f32
    }
  }
  return %s : f32
}

// -----

// A row reduction is a warp per row: thread `lane` of the warp takes every
// 32nd column from its own, thread 0 starts from the loaded initial value,
// the others from the sum's neutral element, and five shuffles combine the
// parts in every thread before the store.
// CHECK-LABEL: func.func @row_sums(
// CHECK-DAG: %[[TOTAL:.*]] = arith.constant 192 : index
// CHECK: gpu.launch
// CHECK: %[[ID:.*]] = arith.addi
// CHECK: arith.cmpi slt, %[[ID]], %[[TOTAL]]
// CHECK: %[[LANE:.*]] = arith.remsi %[[ID]], %[[W:.*]] : index
// CHECK: %[[ROW:.*]] = arith.divsi %[[ID]], %[[W]] : index
// CHECK: %[[INIT:.*]] = memref.load %{{.*}}[%[[ROW]]]
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[LANE]], %{{.*}}
// CHECK: %[[LB:.*]] = arith.addi %{{.*}}, %{{.*}}
// CHECK: %[[STEP:.*]] = arith.muli %{{.*}}, %{{.*}}
// CHECK: %[[START:.*]] = arith.select %[[FIRST]], %[[INIT]], %{{.*}} : f32
// CHECK: %[[PART:.*]] = scf.for %{{.*}} = %[[LB]] to %{{.*}} step %[[STEP]] iter_args(%{{.*}} = %[[START]]) -> (f32)
// CHECK: %[[S16:.*]], %{{.*}} = gpu.shuffle xor %[[PART]], %c16_i32, %c32_i32 : f32
// CHECK: %[[A16:.*]] = arith.addf %[[PART]], %[[S16]]
// CHECK: gpu.shuffle xor %[[A16]], %c8_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK: %[[SUM:.*]] = arith.addf
// CHECK: memref.store %[[SUM]], %{{.*}}[%[[ROW]]]
// The maximum's parts start from NaN, which maxnumf passes over.
// CHECK-LABEL: func.func @row_maxima(
// CHECK: arith.constant 0xFFC00000 : f32
// CHECK: gpu.shuffle xor
// CHECK: arith.maxnumf
// A reduction of fewer iterations than a warp stays in one thread per row.
// CHECK-LABEL: func.func @short_rows(
// CHECK: arith.constant 6 : index
// CHECK-NOT: gpu.shuffle
// CHECK: return
// So does a body with another loop, which each thread would run whole.
// CHECK-LABEL: func.func @other_loop(
// CHECK-NOT: gpu.shuffle
// CHECK: return
func.func @row_sums(%a: memref<6x100xf32>, %s: memref<6xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c100 = arith.constant 100 : index
  scf.parallel (%i) = (%c0) to (%c6) step (%c1) {
    %init = memref.load %s[%i] : memref<6xf32>
    %r = scf.for %j = %c0 to %c100 step %c1 iter_args(%acc = %init) -> (f32) {
      %x = memref.load %a[%i, %j] : memref<6x100xf32>
      %y = arith.addf %acc, %x : f32
      scf.yield %y : f32
    }
    memref.store %r, %s[%i] : memref<6xf32>
    scf.reduce
  }
  return
}
func.func @row_maxima(%a: memref<6x100xf32>, %s: memref<6xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c100 = arith.constant 100 : index
  scf.parallel (%i) = (%c0) to (%c6) step (%c1) {
    %init = memref.load %s[%i] : memref<6xf32>
    %r = scf.for %j = %c0 to %c100 step %c1 iter_args(%acc = %init) -> (f32) {
      %x = memref.load %a[%i, %j] : memref<6x100xf32>
      %y = arith.maxnumf %x, %acc : f32
      scf.yield %y : f32
    }
    memref.store %r, %s[%i] : memref<6xf32>
    scf.reduce
  }
  return
}
func.func @short_rows(%a: memref<6x16xf32>, %s: memref<6xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c16 = arith.constant 16 : index
  scf.parallel (%i) = (%c0) to (%c6) step (%c1) {
    %init = memref.load %s[%i] : memref<6xf32>
    %r = scf.for %j = %c0 to %c16 step %c1 iter_args(%acc = %init) -> (f32) {
      %x = memref.load %a[%i, %j] : memref<6x16xf32>
      %y = arith.addf %acc, %x : f32
      scf.yield %y : f32
    }
    memref.store %r, %s[%i] : memref<6xf32>
    scf.reduce
  }
  return
}
func.func @other_loop(%a: memref<6x100xf32>, %s: memref<6xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c100 = arith.constant 100 : index
  scf.parallel (%i) = (%c0) to (%c6) step (%c1) {
    %init = memref.load %s[%i] : memref<6xf32>
    %r = scf.for %j = %c0 to %c100 step %c1 iter_args(%acc = %init) -> (f32) {
      %x = memref.load %a[%i, %j] : memref<6x100xf32>
      %y = arith.addf %acc, %x : f32
      scf.yield %y : f32
    }
    scf.for %j = %c0 to %c100 step %c1 {
      %x = memref.load %a[%i, %j] : memref<6x100xf32>
      %y = arith.divf %x, %r : f32
      memref.store %y, %a[%i, %j] : memref<6x100xf32>
    }
    scf.reduce
  }
  return
}

// -----

// A full sum left on the host, with the load of its initial value and the
// store of its result, becomes a kernel of one warp.
// CHECK-LABEL: func.func @full_sum(
// CHECK-NOT: memref.load
// CHECK: gpu.launch
// CHECK: memref.load %{{.*}}[] : memref<f32>
// CHECK: scf.for
// CHECK: gpu.shuffle xor
// CHECK: memref.store %{{.*}}, %{{.*}}[] : memref<f32>
// CHECK: gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @full_sum(%a: memref<1000xf32>, %s: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1000 = arith.constant 1000 : index
  %init = memref.load %s[] : memref<f32>
  %r = scf.for %j = %c0 to %c1000 step %c1 iter_args(%acc = %init) -> (f32) {
    %x = memref.load %a[%j] : memref<1000xf32>
    %y = arith.addf %acc, %x : f32
    scf.yield %y : f32
  }
  memref.store %r, %s[] : memref<f32>
  return
}

// -----

// A reduction loop that also writes memory keeps one thread per row: split
// among threads, its stores would land in another order.
// CHECK-LABEL: func.func @sum_and_store(
// CHECK: gpu.launch
// CHECK-NOT: gpu.shuffle
// CHECK: return
func.func @sum_and_store(%a: memref<6x100xf32>, %s: memref<6xf32>, %last: memref<6xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c100 = arith.constant 100 : index
  scf.parallel (%i) = (%c0) to (%c6) step (%c1) {
    %init = memref.load %s[%i] : memref<6xf32>
    %r = scf.for %j = %c0 to %c100 step %c1 iter_args(%acc = %init) -> (f32) {
      %x = memref.load %a[%i, %j] : memref<6x100xf32>
      memref.store %x, %last[%i] : memref<6xf32>
      %y = arith.addf %acc, %x : f32
      scf.yield %y : f32
    }
    memref.store %r, %s[%i] : memref<6xf32>
    scf.reduce
  }
  return
}
