// RUN: loom-opt %s --split-input-file --loom-parallel-loops-to-gpu=contiguous-threads=0 | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-parallel-loops-to-gpu=block-size=128 | FileCheck %s --check-prefix=B128
// RUN: not loom-opt %s --split-input-file --loom-parallel-loops-to-gpu=block-size=2048 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: loom-opt %s --split-input-file --loom-parallel-loops-to-gpu=thread-bytes=0 | FileCheck %s --check-prefix=ONE
// RUN: not loom-opt %s --split-input-file --loom-parallel-loops-to-gpu=thread-bytes=-1 2>&1 | FileCheck %s --check-prefix=BADBYTES
// RUN: loom-opt %s --split-input-file --loom-parallel-loops-to-gpu="nests-per-launch=1 contiguous-threads=0" | FileCheck %s --check-prefix=APART
// RUN: not loom-opt %s --split-input-file --loom-parallel-loops-to-gpu=nests-per-launch=0 2>&1 | FileCheck %s --check-prefix=BADNESTS
// RUN: loom-opt %s --split-input-file --loom-parallel-loops-to-gpu | FileCheck %s --check-prefix=CONTIG

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
// BADBYTES: thread-bytes must be at least 0, got -1
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

// -----

// An elementwise loop over buffers of the arena, bf16 in and f32 out: each
// thread runs 8 iterations (16 bytes of bf16), a grid's worth of threads
// (6 x 128 / 8 = 96) apart, all 8 loads before the 8 stores. With
// thread-bytes=0, a thread per iteration.
// CHECK-LABEL: func.func @widen(
// CHECK-DAG: %[[THREADS:.*]] = arith.constant 96 : index
// CHECK: gpu.launch
// CHECK: %[[ID:.*]] = arith.addi
// CHECK: arith.cmpi slt, %[[ID]], %[[THREADS]]
// CHECK-COUNT-8: memref.load {{.*}} : memref<6x128xbf16>
// CHECK-NOT: memref.load
// CHECK-COUNT-8: memref.store {{.*}} : memref<6x128xf32>
// CHECK: gpu.terminator
// ONE-LABEL: func.func @widen(
// ONE: arith.constant 768 : index
// ONE: memref.load
// ONE-NEXT: arith.extf
// ONE-NEXT: memref.store
// ONE-NEXT: }
func.func @widen() {
  %arena = memref.alloc() : memref<8192xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c128 = arith.constant 128 : index
  %c4096 = arith.constant 4096 : index
  %a = memref.view %arena[%c0][] : memref<8192xi8> to memref<6x128xbf16>
  %b = memref.view %arena[%c4096][] : memref<8192xi8> to memref<6x128xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%c6, %c128) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<6x128xbf16>
    %y = arith.extf %x : bf16 to f32
    memref.store %y, %b[%i, %j] : memref<6x128xf32>
    scf.reduce
  }
  return
}

// -----

// The kernel is told the arena's alignment, which the host allocated it
// with. With contiguous-threads, a thread's 8 iterations are consecutive:
// since a row's 128 columns hold all 8, the thread takes one of the row's
// 16 parts of 8 columns, its first column 8 times the part's number (a
// multiple of 8 LLVM sees), the other 7 the same row's next columns, whose
// accesses LLVM joins into one of 16 bytes. Without it, a grid's worth of
// threads apart.
// CHECK-LABEL: func.func @widen_aligned(
// CHECK: gpu.launch
// CHECK: %[[ARENA:.*]] = memref.assume_alignment %{{.*}}, 64 : memref<8192xi8>
// CHECK: memref.view %[[ARENA]]
// CHECK: arith.addi %{{.*}}, %c96
// CONTIG-LABEL: func.func @widen_aligned(
// CONTIG-DAG: %[[THREADS:.*]] = arith.constant 96 : index
// CONTIG: gpu.launch
// CONTIG: memref.assume_alignment %{{.*}}, 64
// CONTIG: %[[ID:.*]] = arith.addi
// CONTIG: arith.cmpi slt, %[[ID]], %[[THREADS]]
// CONTIG: %[[PART:.*]] = arith.remsi %[[ID]], %c16
// CONTIG: %[[I:.*]] = arith.divsi %[[ID]], %c16
// CONTIG: %[[J:.*]] = arith.muli %[[PART]], %c8
// CONTIG-NOT: arith.divsi
// CONTIG: %[[J1:.*]] = arith.addi %[[J]], %c1
// CONTIG: %[[J7:.*]] = arith.addi %[[J]], %c7
// CONTIG: memref.load %{{.*}}[%[[I]], %[[J]]] : memref<6x128xbf16>
// CONTIG: memref.load %{{.*}}[%[[I]], %[[J1]]] : memref<6x128xbf16>
// CONTIG-COUNT-6: memref.load %{{.*}}[%[[I]], %{{.*}}] : memref<6x128xbf16>
// CONTIG-NOT: memref.load
// CONTIG: memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]]] : memref<6x128xf32>
// CONTIG-COUNT-6: memref.store
// CONTIG: memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J7]]] : memref<6x128xf32>
// CONTIG: gpu.terminator
func.func @widen_aligned() {
  %arena = memref.alloc() {alignment = 64 : i64} : memref<8192xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c128 = arith.constant 128 : index
  %c4096 = arith.constant 4096 : index
  %a = memref.view %arena[%c0][] : memref<8192xi8> to memref<6x128xbf16>
  %b = memref.view %arena[%c4096][] : memref<8192xi8> to memref<6x128xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%c6, %c128) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<6x128xbf16>
    %y = arith.extf %x : bf16 to f32
    memref.store %y, %b[%i, %j] : memref<6x128xf32>
    scf.reduce
  }
  return
}

// -----

// From column 4 in steps of 2 (128 columns a row): a thread's first
// column is 4 + 2 x its index, the next ones 2 apart.
// CONTIG-LABEL: func.func @strided_columns(
// CONTIG: %[[ID:.*]] = arith.addi
// CONTIG: %[[PART:.*]] = arith.remsi %[[ID]], %c16
// CONTIG: %[[I:.*]] = arith.divsi %[[ID]], %c16
// CONTIG: %[[K:.*]] = arith.muli %[[PART]], %c8
// CONTIG: %[[TWICE:.*]] = arith.muli %[[K]], %c2
// CONTIG: %[[J:.*]] = arith.addi %[[TWICE]], %c4
// CONTIG: %[[J1:.*]] = arith.addi %[[J]], %c2
// CONTIG: %[[J7:.*]] = arith.addi %[[J]], %c14
// CONTIG: memref.load %{{.*}}[%[[I]], %[[J]]]
// CONTIG: memref.load %{{.*}}[%[[I]], %[[J1]]]
// CONTIG-COUNT-5: memref.load
// CONTIG: memref.load %{{.*}}[%[[I]], %[[J7]]]
func.func @strided_columns() {
  %arena = memref.alloc() {alignment = 64 : i64} : memref<10240xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c6 = arith.constant 6 : index
  %c260 = arith.constant 260 : index
  %c4096 = arith.constant 4096 : index
  %a = memref.view %arena[%c0][] : memref<10240xi8> to memref<6x260xbf16>
  %b = memref.view %arena[%c4096][] : memref<10240xi8> to memref<6x260xf32>
  scf.parallel (%i, %j) = (%c0, %c4) to (%c6, %c260) step (%c1, %c2) {
    %x = memref.load %a[%i, %j] : memref<6x260xbf16>
    %y = arith.extf %x : bf16 to f32
    memref.store %y, %b[%i, %j] : memref<6x260xf32>
    scf.reduce
  }
  return
}

// -----

// A row of 10 columns does not hold a thread's 8 iterations: each is
// numbered on its own, 8 times the thread's number plus 0 to 7.
// CONTIG-LABEL: func.func @rows_too_short(
// CONTIG: %[[ID:.*]] = arith.addi
// CONTIG: %[[FIRST:.*]] = arith.muli %[[ID]], %c8
// CONTIG: arith.remsi %[[FIRST]], %c10
// CONTIG: %[[SECOND:.*]] = arith.addi %[[FIRST]], %c1
// CONTIG: arith.remsi %[[SECOND]], %c10
// CONTIG: %[[LAST:.*]] = arith.addi %[[FIRST]], %c7
// CONTIG: arith.remsi %[[LAST]], %c10
// CONTIG-NEXT: arith.divsi %[[LAST]], %c10
// CONTIG-COUNT-8: memref.load
func.func @rows_too_short() {
  %arena = memref.alloc() {alignment = 64 : i64} : memref<512xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c10 = arith.constant 10 : index
  %c256 = arith.constant 256 : index
  %a = memref.view %arena[%c0][] : memref<512xi8> to memref<4x10xbf16>
  %b = memref.view %arena[%c256][] : memref<512xi8> to memref<4x10xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c10) step (%c1, %c1) {
    %v = memref.load %a[%i, %j] : memref<4x10xbf16>
    %w = arith.extf %v : bf16 to f32
    memref.store %w, %b[%i, %j] : memref<4x10xf32>
    scf.reduce
  }
  return
}

// -----

// An update in place (a parameter's step) reads and writes its own
// element only: 4 f32 iterations a thread. Buffers that may be one
// (two arguments) keep a thread per iteration, and so does a body whose
// store comes before a load.
// CHECK-LABEL: func.func @in_place(
// CHECK-COUNT-8: memref.load
// CHECK-COUNT-4: memref.store
// CHECK-LABEL: func.func @arguments(
// CHECK-COUNT-1: memref.load
// CHECK-NEXT: memref.store
// CHECK-LABEL: func.func @store_first(
// CHECK: memref.store
// CHECK-NEXT: memref.load
// CHECK-NEXT: memref.store
// CHECK-NOT: memref.store
func.func @in_place(%g: memref<64xf32>) {
  %arena = memref.alloc() : memref<256xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %p = memref.view %arena[%c0][] : memref<256xi8> to memref<64xf32>
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    %x = memref.load %p[%i] : memref<64xf32>
    %y = memref.load %g[%i] : memref<64xf32>
    %z = arith.subf %x, %y : f32
    memref.store %z, %p[%i] : memref<64xf32>
    scf.reduce
  }
  return
}
func.func @arguments(%a: memref<64xf32>, %b: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    %x = memref.load %a[%i] : memref<64xf32>
    memref.store %x, %b[%i] : memref<64xf32>
    scf.reduce
  }
  return
}
func.func @store_first(%v: f32) {
  %arena = memref.alloc() : memref<512xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c256 = arith.constant 256 : index
  %a = memref.view %arena[%c0][] : memref<512xi8> to memref<64xf32>
  %b = memref.view %arena[%c256][] : memref<512xi8> to memref<64xf32>
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    memref.store %v, %a[%i] : memref<64xf32>
    %x = memref.load %a[%i] : memref<64xf32>
    memref.store %x, %b[%i] : memref<64xf32>
    scf.reduce
  }
  return
}

// -----

// The optimizer's updates of two parameters: neighbouring nests that touch
// different tensors share one launch, the first on blocks 0 and 1 (2,048
// f32 iterations, 4 a thread), the second on block 2. The learning rate's
// load between them runs before the launch, folded into the first one.
// A view of the arena is computed again in the kernel.
// CHECK-LABEL: func.func @updates(
// CHECK: %[[LR:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK-NOT: memref.load
// CHECK: memref.alloca_scope {
// CHECK: gpu.launch blocks(%[[BX:[a-z0-9]+]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[BLOCKS:c3[_0-9]*]],
// CHECK-SAME: function(@loop)
// CHECK: %[[G:.*]] = memref.view %{{.*}}[%{{.*}}][] : memref<9216xi8> to memref<2048xf32>
// CHECK: %[[FIRST:.*]] = arith.cmpi slt, %[[BX]], %[[END:c2[_0-9]*]] : index
// CHECK: scf.if %[[FIRST]] {
// CHECK: arith.muli %[[BX]], %{{.*}}
// CHECK: memref.load %[[G]]
// CHECK: arith.mulf %{{.*}}, %[[LR]]
// CHECK: } else {
// CHECK: %[[LOCAL:.*]] = arith.subi %[[BX]], %[[END]] : index
// CHECK: arith.muli %[[LOCAL]], %{{.*}}
// CHECK: memref.load %{{.*}} : memref<256xf32>
// CHECK: arith.mulf %{{.*}}, %[[LR]]
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// APART-LABEL: func.func @updates(
// APART-COUNT-2: gpu.launch
func.func @updates(%p: memref<2048xf32> {loom.param = "w"},
                   %q: memref<256xf32> {loom.param = "b"},
                   %lr: memref<f32> {loom.input = "lr"}) {
  %arena = memref.alloc() : memref<9216xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %c2048 = arith.constant 2048 : index
  %c8192 = arith.constant 8192 : index
  %g = memref.view %arena[%c0][] : memref<9216xi8> to memref<2048xf32>
  %h = memref.view %arena[%c8192][] : memref<9216xi8> to memref<256xf32>
  %r1 = memref.load %lr[] : memref<f32>
  scf.parallel (%i) = (%c0) to (%c2048) step (%c1) {
    %x = memref.load %p[%i] : memref<2048xf32>
    %d = memref.load %g[%i] : memref<2048xf32>
    %u = arith.mulf %d, %r1 : f32
    %y = arith.subf %x, %u : f32
    memref.store %y, %p[%i] : memref<2048xf32>
    scf.reduce
  }
  %r2 = memref.load %lr[] : memref<f32>
  scf.parallel (%i) = (%c0) to (%c256) step (%c1) {
    %x = memref.load %q[%i] : memref<256xf32>
    %d = memref.load %h[%i] : memref<256xf32>
    %u = arith.mulf %d, %r2 : f32
    %y = arith.subf %x, %u : f32
    memref.store %y, %q[%i] : memref<256xf32>
    scf.reduce
  }
  return
}

// -----

// Nests that may not share a launch: the second reads what the first
// writes; a host load between them reads what the first writes (it waits
// for it); two arguments that are not the step's own tensors may be one
// buffer.
// CHECK-LABEL: func.func @reads_written(
// CHECK-COUNT-2: gpu.launch
// CHECK-LABEL: func.func @host_reads_written(
// CHECK: gpu.launch
// CHECK: memref.load %{{.*}}[%{{.*}}] : memref<64xf32>
// CHECK: gpu.launch
// CHECK-LABEL: func.func @unknown_arguments(
// CHECK-COUNT-2: gpu.launch
// BADNESTS: nests-per-launch must be at least 1, got 0
func.func @reads_written(%v: f32) {
  %arena = memref.alloc() : memref<512xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c256 = arith.constant 256 : index
  %a = memref.view %arena[%c0][] : memref<512xi8> to memref<64xf32>
  %b = memref.view %arena[%c256][] : memref<512xi8> to memref<64xf32>
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    memref.store %v, %a[%i] : memref<64xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    %x = memref.load %a[%i] : memref<64xf32>
    memref.store %x, %b[%i] : memref<64xf32>
    scf.reduce
  }
  return
}
func.func @host_reads_written(%v: f32, %out: memref<f32>) {
  %arena = memref.alloc() : memref<512xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c256 = arith.constant 256 : index
  %a = memref.view %arena[%c0][] : memref<512xi8> to memref<64xf32>
  %b = memref.view %arena[%c256][] : memref<512xi8> to memref<64xf32>
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    memref.store %v, %a[%i] : memref<64xf32>
    scf.reduce
  }
  %first = memref.load %a[%c0] : memref<64xf32>
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    memref.store %first, %b[%i] : memref<64xf32>
    scf.reduce
  }
  return
}
func.func @unknown_arguments(%a: memref<64xf32>, %b: memref<64xf32>,
                             %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    memref.store %v, %a[%i] : memref<64xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    memref.store %v, %b[%i] : memref<64xf32>
    scf.reduce
  }
  return
}

// -----

// Parts of one arena buffer (the gradient norm's partial sums of each
// tensor) are told apart by their subviews' offsets: nests writing
// different parts share a launch, nests writing overlapping ones do not.
// CHECK-LABEL: func.func @parts(
// CHECK-COUNT-1: gpu.launch
// CHECK-NOT: gpu.launch
// CHECK-LABEL: func.func @overlapping_parts(
// CHECK-COUNT-2: gpu.launch
func.func @parts(%v: f32) {
  %arena = memref.alloc() : memref<512xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %all = memref.view %arena[%c0][] : memref<512xi8> to memref<128xf32>
  %a = memref.subview %all[0] [64] [1] : memref<128xf32> to memref<64xf32, strided<[1]>>
  %b = memref.subview %all[64] [64] [1] : memref<128xf32> to memref<64xf32, strided<[1], offset: 64>>
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    memref.store %v, %a[%i] : memref<64xf32, strided<[1]>>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    memref.store %v, %b[%i] : memref<64xf32, strided<[1], offset: 64>>
    scf.reduce
  }
  return
}
func.func @overlapping_parts(%v: f32) {
  %arena = memref.alloc() : memref<512xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %all = memref.view %arena[%c0][] : memref<512xi8> to memref<128xf32>
  %a = memref.subview %all[0] [64] [1] : memref<128xf32> to memref<64xf32, strided<[1]>>
  %b = memref.subview %all[63] [64] [1] : memref<128xf32> to memref<64xf32, strided<[1], offset: 63>>
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    memref.store %v, %a[%i] : memref<64xf32, strided<[1]>>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    memref.store %v, %b[%i] : memref<64xf32, strided<[1], offset: 63>>
    scf.reduce
  }
  return
}

// -----

// Host code that only moves a scalar from memory to memory (the step's
// loss, scaled and stored for its output) runs as a kernel of one thread:
// the host would wait for the device to read it. A loaded value that later
// kernels take (the clip factor) goes to them through a slot of the bytes
// loom-static-arena reserved past the buffers (device-scalars), the first
// free of which the arena's `scalars` figure names; without them, the code
// stays on the host, and the kernel takes the value. A load of memory on the host's stack keeps its
// code on the host, and so does a value computed from arguments only the
// host writes (the learning rate), which the kernel takes as before.
// CHECK-LABEL: func.func @loss(
// CHECK-NOT: memref.load
// CHECK: gpu.launch
// CHECK: %[[L:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK: %[[S:.*]] = arith.mulf %[[L]], %{{.*}} : f32
// CHECK: memref.store %[[S]], %{{.*}}[] : memref<f32>
// CHECK: gpu.terminator
// CHECK-LABEL: func.func @needed_after(
// CHECK: %[[N:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK: memref.store %[[N]]
// CHECK: gpu.launch
// CHECK-LABEL: func.func @on_stack(
// CHECK: %[[V:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK: gpu.launch
// CHECK: memref.store %[[V]], %{{.*}}[] : memref<f32>
// CHECK-LABEL: func.func @through_arena(
// CHECK-SAME: loom.arena = {bytes = 128 : i64, communication = 0 : i64, gradients = 0 : i64, kept = 0 : i64, live = 128 : i64, scalars = 72 : i64}
// CHECK: %[[ARENA:.*]] = memref.alloc() : memref<128xi8>
// CHECK-NOT: memref.load
// CHECK: gpu.launch
// CHECK: %[[SUM:.*]] = memref.view %{{.*}}[%c0{{.*}}][] : memref<128xi8> to memref<f32>
// CHECK: %[[SLOT:.*]] = memref.view %{{.*}}[%c64{{.*}}][] : memref<128xi8> to memref<f32>
// CHECK: %[[N:.*]] = memref.load %[[SUM]][] : memref<f32>
// CHECK: %[[R:.*]] = math.sqrt %[[N]] : f32
// CHECK: memref.store %[[R]], %[[SLOT]][] : memref<f32>
// CHECK: gpu.terminator
// CHECK-NOT: memref.load
// CHECK: gpu.launch
// CHECK: %[[SLOT2:.*]] = memref.view %{{.*}}[%c64{{.*}}][] : memref<128xi8> to memref<f32>
// CHECK: %[[F:.*]] = memref.load %[[SLOT2]][] : memref<f32>
// CHECK: arith.mulf %{{.*}}, %[[F]] : f32
// CHECK-LABEL: func.func @host_written(
// CHECK: %[[LR:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK: gpu.launch
// CHECK: arith.mulf %{{.*}}, %[[LR]] : f32
func.func @loss(%out: memref<f32> {loom.output = "loss"}) {
  %arena = memref.alloc() : memref<64xi8>
  %c0 = arith.constant 0 : index
  %half = arith.constant 0.5 : f32
  %sum = memref.view %arena[%c0][] : memref<64xi8> to memref<f32>
  %l = memref.load %sum[] : memref<f32>
  %s = arith.mulf %l, %half : f32
  memref.store %s, %out[] : memref<f32>
  return
}
func.func @needed_after(%out: memref<f32> {loom.output = "grad_norm"},
                        %p: memref<64xf32> {loom.param = "w"}) {
  %arena = memref.alloc() : memref<64xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %sum = memref.view %arena[%c0][] : memref<64xi8> to memref<f32>
  %n = memref.load %sum[] : memref<f32>
  memref.store %n, %out[] : memref<f32>
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    %x = memref.load %p[%i] : memref<64xf32>
    %y = arith.mulf %x, %n : f32
    memref.store %y, %p[%i] : memref<64xf32>
    scf.reduce
  }
  return
}
func.func @on_stack(%out: memref<f32> {loom.output = "loss"}) {
  %local = memref.alloca() : memref<f32>
  %l = memref.load %local[] : memref<f32>
  memref.store %l, %out[] : memref<f32>
  return
}
func.func @through_arena(%p: memref<64xf32> {loom.param = "w"})
    attributes {loom.arena = {bytes = 128 : i64, communication = 0 : i64,
                              gradients = 0 : i64, kept = 0 : i64,
                              live = 128 : i64, scalars = 64 : i64}} {
  %arena = memref.alloc() : memref<128xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %sum = memref.view %arena[%c0][] : memref<128xi8> to memref<f32>
  %n = memref.load %sum[] : memref<f32>
  %r = math.sqrt %n : f32
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    %x = memref.load %p[%i] : memref<64xf32>
    %y = arith.mulf %x, %r : f32
    memref.store %y, %p[%i] : memref<64xf32>
    scf.reduce
  }
  return
}
func.func @host_written(%p: memref<64xf32> {loom.param = "w"},
                        %lr: memref<f32> {loom.input = "lr"})
    attributes {loom.arena = {bytes = 128 : i64, communication = 0 : i64,
                              gradients = 0 : i64, kept = 0 : i64,
                              live = 128 : i64, scalars = 64 : i64}} {
  %arena = memref.alloc() : memref<128xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %l = memref.load %lr[] : memref<f32>
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    %x = memref.load %p[%i] : memref<64xf32>
    %y = arith.mulf %x, %l : f32
    memref.store %y, %p[%i] : memref<64xf32>
    scf.reduce
  }
  return
}

// -----

// A column's sum walks down the column, an element a row: a warp sharing
// it would read 32 rows apart. It runs a thread per column instead, whole
// and in order, neighbouring threads reading neighbouring columns.
// CHECK-LABEL: func.func @column_sums(
// CHECK: gpu.launch
// CHECK-NOT: gpu.shuffle
// CHECK: %[[COL:.*]] = arith.addi
// CHECK: scf.for %[[ROW:.*]] = %c0{{.*}} to %c64{{.*}} step %c1{{.*}} iter_args
// CHECK: memref.load %{{.*}}[%[[ROW]], %[[COL]]] : memref<64x100xf32>
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.terminator
func.func @column_sums(%a: memref<64x100xf32>, %s: memref<100xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c100 = arith.constant 100 : index
  scf.parallel (%j) = (%c0) to (%c100) step (%c1) {
    %init = memref.load %s[%j] : memref<100xf32>
    %r = scf.for %i = %c0 to %c64 step %c1 iter_args(%acc = %init) -> (f32) {
      %x = memref.load %a[%i, %j] : memref<64x100xf32>
      %y = arith.addf %acc, %x : f32
      scf.yield %y : f32
    }
    memref.store %r, %s[%j] : memref<100xf32>
    scf.reduce
  }
  return
}

// -----

// So does a column's sum that also reads a vector of the rows (a layer
// norm weight's gradient reading each row's reciprocal deviation): that
// load follows the loop, but the column's does not.
// CHECK-LABEL: func.func @column_sums_by_row(
// CHECK: gpu.launch
// CHECK-NOT: gpu.shuffle
// CHECK: gpu.terminator
func.func @column_sums_by_row(%a: memref<64x100xf32>, %r: memref<64xf32>, %s: memref<100xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c100 = arith.constant 100 : index
  scf.parallel (%j) = (%c0) to (%c100) step (%c1) {
    %init = memref.load %s[%j] : memref<100xf32>
    %sum = scf.for %i = %c0 to %c64 step %c1 iter_args(%acc = %init) -> (f32) {
      %x = memref.load %a[%i, %j] : memref<64x100xf32>
      %w = memref.load %r[%i] : memref<64xf32>
      %p = arith.mulf %x, %w : f32
      %y = arith.addf %acc, %p : f32
      scf.yield %y : f32
    }
    memref.store %sum, %s[%j] : memref<100xf32>
    scf.reduce
  }
  return
}

// -----

// A part of the loss's sum over rows gathers each row's target logit: the
// loop's variable picks the row, a loaded index the column. That is no
// column to walk down, and 4 parts are 4 threads that would each wait on
// their gathers in turn: a warp shares each part's rows.
// CHECK-LABEL: func.func @gathered_rows(
// CHECK: gpu.launch
// CHECK: memref.load %{{.*}} : memref<4x64xi32>
// CHECK: memref.load %{{.*}} : memref<256x100xf32>
// CHECK: gpu.shuffle xor
// CHECK: gpu.terminator
func.func @gathered_rows(%logits: memref<256x100xf32>, %targets: memref<4x64xi32>, %s: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%p) = (%c0) to (%c4) step (%c1) {
    %sum = scf.for %i = %c0 to %c64 step %c1 iter_args(%acc = %zero) -> (f32) {
      %t = memref.load %targets[%p, %i] : memref<4x64xi32>
      %column = arith.index_cast %t : i32 to index
      %first = arith.muli %p, %c64 : index
      %row = arith.addi %first, %i : index
      %x = memref.load %logits[%row, %column] : memref<256x100xf32>
      %y = arith.addf %acc, %x : f32
      scf.yield %y : f32
    }
    memref.store %sum, %s[%p] : memref<4xf32>
    scf.reduce
  }
  return
}

// -----

// The residual stream: a layer loop carries one of two buffers of the
// arena, at (layer % 2) * 4096 bytes. The kernel computes that shift again
// from the layer's number, so that LLVM sees its multiples, and is told
// the carried buffer's alignment: the least of the arena's (64) and the
// shifts' (4096 and its multiples). Its iterations can then be
// consecutive.
// CHECK-LABEL: func.func @carried_buffers(
// CHECK: scf.for %[[LAYER:.*]] = %{{.*}} iter_args(%[[X:.*]] = %{{.*}})
// CHECK: gpu.launch
// CHECK-DAG: memref.assume_alignment %[[X]], 64
// CHECK-DAG: %[[ARENA:.*]] = memref.assume_alignment %{{.*}}, 64 : memref<16384xi8>
// CHECK-DAG: %[[PARITY:.*]] = arith.remui %[[LAYER]], %c2
// CHECK-DAG: %[[SHIFT:.*]] = arith.muli %[[PARITY]], %c4096
// CHECK-DAG: %[[AT:.*]] = arith.addi %[[SHIFT]], %c8192
// CHECK: memref.view %[[ARENA]][%[[AT]]]
// CHECK: gpu.terminator
// CONTIG-LABEL: func.func @carried_buffers(
// CONTIG: gpu.launch
// CONTIG: arith.remsi %{{.*}}, %c16
// CONTIG-COUNT-8: memref.load %{{.*}} : memref<4x128xbf16>
// CONTIG: gpu.terminator
func.func @carried_buffers() {
  %arena = memref.alloc() {alignment = 64 : i64} : memref<16384xi8>
  %out = memref.alloc() {alignment = 64 : i64} : memref<4x128xbf16>
  %zero = arith.constant 0.0 : bf16
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c12 = arith.constant 12 : index
  %c128 = arith.constant 128 : index
  %c4096 = arith.constant 4096 : index
  %c8192 = arith.constant 8192 : index
  %first = memref.view %arena[%c0][] : memref<16384xi8> to memref<4x128xbf16>
  %last = scf.for %layer = %c0 to %c12 step %c1 iter_args(%x = %first)
      -> (memref<4x128xbf16>) {
    %parity = arith.remui %layer, %c2 : index
    %shift = arith.muli %parity, %c4096 : index
    %at = arith.addi %shift, %c8192 : index
    %y = memref.view %arena[%at][] : memref<16384xi8> to memref<4x128xbf16>
    scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c128) step (%c1, %c1) {
      %v = memref.load %x[%i, %j] : memref<4x128xbf16>
      memref.store %v, %out[%i, %j] : memref<4x128xbf16>
      scf.reduce
    }
    scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c128) step (%c1, %c1) {
      memref.store %zero, %y[%i, %j] : memref<4x128xbf16>
      scf.reduce
    }
    scf.yield %y : memref<4x128xbf16>
  }
  return
}

// -----

// A buffer whose alignment the IR does not show (a step's argument: the
// runtime packs its parameters one after the other) keeps its iterations
// a grid apart even with contiguous-threads: LLVM would keep each of a
// thread's consecutive accesses one element wide. So does a view at a
// shift of 2 bytes. A weight read again for each row does not count.
// CONTIG-LABEL: func.func @unaligned_streams(
// CONTIG: gpu.launch
// CONTIG: arith.addi %{{.*}}, %c128
// CONTIG: gpu.terminator
// CONTIG-LABEL: func.func @odd_shift(
// CONTIG: gpu.launch
// CONTIG: arith.addi %{{.*}}, %c64
// CONTIG: gpu.terminator
// CONTIG-LABEL: func.func @weight_per_row(
// CONTIG: gpu.launch
// CONTIG: arith.remsi %{{.*}}, %c16
// CONTIG: gpu.terminator
func.func @unaligned_streams(%p: memref<512xf32> {loom.param = "w"}) {
  %arena = memref.alloc() {alignment = 64 : i64} : memref<1024xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c512 = arith.constant 512 : index
  %b = memref.view %arena[%c0][] : memref<1024xi8> to memref<512xbf16>
  scf.parallel (%i) = (%c0) to (%c512) step (%c1) {
    %x = memref.load %p[%i] : memref<512xf32>
    %y = arith.truncf %x : f32 to bf16
    memref.store %y, %b[%i] : memref<512xbf16>
    scf.reduce
  }
  return
}
func.func @odd_shift(%k: index) {
  %arena = memref.alloc() {alignment = 64 : i64} : memref<4096xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c512 = arith.constant 512 : index
  %shift = arith.muli %k, %c2 : index
  %out = memref.alloc() {alignment = 64 : i64} : memref<512xbf16>
  %a = memref.view %arena[%shift][] : memref<4096xi8> to memref<512xbf16>
  scf.parallel (%i) = (%c0) to (%c512) step (%c1) {
    %x = memref.load %a[%i] : memref<512xbf16>
    memref.store %x, %out[%i] : memref<512xbf16>
    scf.reduce
  }
  return
}
func.func @weight_per_row(%w: memref<128xbf16> {loom.param = "w"}) {
  %arena = memref.alloc() {alignment = 64 : i64} : memref<4096xi8>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c128 = arith.constant 128 : index
  %c2048 = arith.constant 2048 : index
  %a = memref.view %arena[%c0][] : memref<4096xi8> to memref<8x128xbf16>
  %b = memref.view %arena[%c2048][] : memref<4096xi8> to memref<8x128xbf16>
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c128) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<8x128xbf16>
    %y = memref.load %w[%j] : memref<128xbf16>
    %z = arith.mulf %x, %y : bf16
    memref.store %z, %b[%i, %j] : memref<8x128xbf16>
    scf.reduce
  }
  return
}

// -----

// memref.assume_alignment asserts the alignment of a buffer's first
// element, its aligned pointer plus its offset: a view at an offset (a
// subview the loop carries, a reinterpret_cast) shares its buffer's
// aligned pointer but is not told that pointer's alignment.
// CHECK-LABEL: func.func @offset_views(
// CHECK: gpu.launch
// CHECK-NOT: memref.assume_alignment {{.*}}offset
// CHECK: gpu.terminator
func.func @offset_views() {
  %arena = memref.alloc() {alignment = 64 : i64} : memref<1024xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c256 = arith.constant 256 : index
  %first = memref.subview %arena[1] [256] [1] : memref<1024xf32> to memref<256xf32, strided<[1], offset: 1>>
  %any = memref.cast %first : memref<256xf32, strided<[1], offset: 1>> to memref<256xf32, strided<[1], offset: ?>>
  %shifted = memref.reinterpret_cast %arena to offset: [3], sizes: [256], strides: [1] : memref<1024xf32> to memref<256xf32, strided<[1], offset: 3>>
  %last = scf.for %k = %c0 to %c4 step %c1 iter_args(%x = %any)
      -> (memref<256xf32, strided<[1], offset: ?>>) {
    scf.parallel (%i) = (%c0) to (%c256) step (%c1) {
      %v = memref.load %x[%i] : memref<256xf32, strided<[1], offset: ?>>
      memref.store %v, %shifted[%i] : memref<256xf32, strided<[1], offset: 3>>
      scf.reduce
    }
    %next = memref.subview %arena[%k] [256] [1] : memref<1024xf32> to memref<256xf32, strided<[1], offset: ?>>
    scf.yield %next : memref<256xf32, strided<[1], offset: ?>>
  }
  return
}

// -----

// One dimension: a thread's 8 iterations start at 8 times its number.
// CONTIG-LABEL: func.func @one_dimension(
// CONTIG: gpu.launch
// CONTIG: %[[ID:.*]] = arith.addi
// CONTIG: arith.cmpi slt, %[[ID]], %c64
// CONTIG: %[[FIRST:.*]] = arith.muli %[[ID]], %c8
// CONTIG: %[[SECOND:.*]] = arith.addi %[[FIRST]], %c1
// CONTIG: memref.load %{{.*}}[%[[FIRST]]] : memref<512xbf16>
// CONTIG: memref.load %{{.*}}[%[[SECOND]]] : memref<512xbf16>
// CONTIG-COUNT-6: memref.load
// CONTIG: gpu.terminator
func.func @one_dimension() {
  %a = memref.alloc() {alignment = 64 : i64} : memref<512xbf16>
  %b = memref.alloc() {alignment = 64 : i64} : memref<512xbf16>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c512 = arith.constant 512 : index
  scf.parallel (%i) = (%c0) to (%c512) step (%c1) {
    %x = memref.load %a[%i] : memref<512xbf16>
    memref.store %x, %b[%i] : memref<512xbf16>
    scf.reduce
  }
  return
}

// -----

// An offload plan's host function (loom.host) and the nests outlined from
// it run on the host: no launch, its copies and scalar work stay, and a
// global is the host's to read. The step's own nest is a kernel.
// CHECK-LABEL: func.func private @step_host_loop0(
// CHECK-NOT: gpu.launch
// CHECK: scf.parallel
// CHECK-LABEL: func.func private @step_host(
// CHECK-NOT: gpu.launch
// CHECK: memref.get_global @lr
// CHECK: call @step_host_loop0(
// CHECK: memref.copy
// CHECK-LABEL: func.func @step(
// CHECK: gpu.launch
memref.global "private" constant @lr : memref<f32> = dense<0.5>
func.func private @step_host_loop0(%w: memref<64xf32>, %g: memref<64xf32>, %s: f32) attributes {loom.host} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    %x = memref.load %w[%i] : memref<64xf32>
    %y = memref.load %g[%i] : memref<64xf32>
    %z = arith.mulf %y, %s : f32
    %d = arith.subf %x, %z : f32
    memref.store %d, %w[%i] : memref<64xf32>
    scf.reduce
  }
  return
}
func.func private @step_host(%w: memref<64xf32>, %g: memref<64xf32>, %copy: memref<64xf32>) attributes {loom.host} {
  %lr = memref.get_global @lr : memref<f32>
  %s = memref.load %lr[] : memref<f32>
  call @step_host_loop0(%w, %g, %s) : (memref<64xf32>, memref<64xf32>, f32) -> ()
  memref.copy %w, %copy : memref<64xf32> to memref<64xf32>
  return
}
func.func @step(%x: memref<64xf32>, %g: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    %v = memref.load %x[%i] : memref<64xf32>
    %d = arith.addf %v, %v : f32
    memref.store %d, %g[%i] : memref<64xf32>
    scf.reduce
  }
  return
}
