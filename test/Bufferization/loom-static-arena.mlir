// RUN: loom-opt %s --loom-static-arena --split-input-file --verify-diagnostics | FileCheck %s
// RUN: loom-opt %s --loom-static-arena="print=true" --split-input-file --verify-diagnostics -o /dev/null | FileCheck %s --check-prefix=PRINT
// RUN: loom-opt %s --loom-static-arena="device-scalars=8" --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=SCALARS

// Buffers whose lives do not overlap share an offset; one live beside them
// gets its own. The largest are placed first.
// CHECK-LABEL: func.func @sequential
// CHECK-SAME: loom.arena = {bytes = 1088 : i64, communication = 0 : i64, gradients = 0 : i64, kept = 0 : i64, live = 1088 : i64}
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1088xi8>
// CHECK: memref.view %[[ARENA]][%c0{{.*}}][] : memref<1088xi8> to memref<256xf32>
// CHECK: memref.view %[[ARENA]][%c1024][] : memref<1088xi8> to memref<16xf32>
// CHECK: memref.view %[[ARENA]][%c0{{.*}}][] : memref<1088xi8> to memref<128xf32>
// CHECK-NOT: memref.alloc()
// With device-scalars, 64 bytes past the buffers (8 asked for, at the
// arena's alignment), counted live, whose first the figures name.
// SCALARS-LABEL: func.func @sequential
// SCALARS-SAME: loom.arena = {bytes = 1152 : i64, communication = 0 : i64, gradients = 0 : i64, kept = 0 : i64, live = 1152 : i64, scalars = 1088 : i64}
// SCALARS: memref.alloc() {alignment = 64 : i64} : memref<1152xi8>
// PRINT: compiled    sequential: arena 1088 B; at most 1088 B of buffers live at once: 0 B of activations kept for the backward pass, 0 B of gradients, 0 B read or written by communication, 1088 B of temporaries
func.func @sequential(%out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f32
  %a = memref.alloc() : memref<256xf32>
  %small = memref.alloc() : memref<16xf32>
  memref.store %one, %a[%c0] : memref<256xf32>
  %x = memref.load %a[%c0] : memref<256xf32>
  memref.store %x, %small[%c0] : memref<16xf32>
  %b = memref.alloc() : memref<128xf32>
  memref.store %x, %b[%c0] : memref<128xf32>
  %y = memref.load %b[%c0] : memref<128xf32>
  %z = memref.load %small[%c0] : memref<16xf32>
  %s = arith.addf %y, %z : f32
  memref.store %s, %out[] : memref<f32>
  return
}

// -----

// A buffer used in a loop lives through the whole loop. One a loop hands to
// its next iteration gets two slots, taken by the iteration's parity. The
// buffer the loop starts from, which nothing uses from the loop on but the
// loop, takes the odd slot, which the first iteration does not write.
// CHECK-LABEL: func.func @carried
// CHECK-SAME: loom.arena = {bytes = 1024 : i64, communication = 0 : i64, gradients = 0 : i64, kept = 0 : i64, live = 1024 : i64}
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1024xi8>
// CHECK: %[[INIT:.*]] = memref.view %[[ARENA]][%c256][] : memref<1024xi8> to memref<64xf32>
// CHECK: scf.for %[[I:.*]] = %[[LB:.*]] to %{{.*}} step %[[STEP:.*]] iter_args(%{{.*}} = %[[INIT]])
// CHECK: %[[D:.*]] = arith.subi %[[I]], %[[LB]]
// CHECK: %[[N:.*]] = arith.divui %[[D]], %[[STEP]]
// CHECK: %[[P:.*]] = arith.remui %[[N]], %c2
// CHECK: %[[SLOT:.*]] = arith.muli %[[P]], %c256
// CHECK: %[[OFF:.*]] = arith.addi %c0{{.*}}, %[[SLOT]]
// CHECK: memref.view %[[ARENA]][%[[OFF]]][] : memref<1024xi8> to memref<64xf32>
// CHECK: memref.view %[[ARENA]][%c512][] : memref<1024xi8> to memref<128xf32>
func.func @carried(%out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  %init = memref.alloc() : memref<64xf32>
  memref.store %one, %init[%c0] : memref<64xf32>
  %last = scf.for %i = %c0 to %c4 step %c1 iter_args(%prev = %init) -> (memref<64xf32>) {
    %next = memref.alloc() : memref<64xf32>
    %x = memref.load %prev[%c0] : memref<64xf32>
    %tmp = memref.alloc() : memref<128xf32>
    memref.store %x, %tmp[%c0] : memref<128xf32>
    %y = memref.load %tmp[%c0] : memref<128xf32>
    memref.store %y, %next[%c0] : memref<64xf32>
    scf.yield %next : memref<64xf32>
  }
  %r = memref.load %last[%c0] : memref<64xf32>
  memref.store %r, %out[] : memref<f32>
  return
}

// -----

// A starting buffer read after the loop too keeps a place of its own,
// through the loop.
// CHECK-LABEL: func.func @carried_read_after
// CHECK-SAME: loom.arena = {bytes = 768 : i64
// CHECK: memref.view %{{.*}}[%c512][] : memref<768xi8> to memref<64xf32>
func.func @carried_read_after(%out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  %init = memref.alloc() : memref<64xf32>
  memref.store %one, %init[%c0] : memref<64xf32>
  %last = scf.for %i = %c0 to %c4 step %c1 iter_args(%prev = %init) -> (memref<64xf32>) {
    %next = memref.alloc() : memref<64xf32>
    %x = memref.load %prev[%c0] : memref<64xf32>
    memref.store %x, %next[%c0] : memref<64xf32>
    scf.yield %next : memref<64xf32>
  }
  %r = memref.load %last[%c0] : memref<64xf32>
  %s = memref.load %init[%c0] : memref<64xf32>
  %t = arith.addf %r, %s : f32
  memref.store %t, %out[] : memref<f32>
  return
}

// -----

// A starting buffer the body reads besides (not only through the
// iteration argument) keeps a place of its own: later iterations still
// read it while the odd slot is written.
// CHECK-LABEL: func.func @carried_read_inside
// CHECK-SAME: loom.arena = {bytes = 768 : i64
func.func @carried_read_inside(%out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  %init = memref.alloc() : memref<64xf32>
  memref.store %one, %init[%c0] : memref<64xf32>
  %last = scf.for %i = %c0 to %c4 step %c1 iter_args(%prev = %init) -> (memref<64xf32>) {
    %next = memref.alloc() : memref<64xf32>
    %x = memref.load %prev[%c0] : memref<64xf32>
    %y = memref.load %init[%c0] : memref<64xf32>
    %z = arith.addf %x, %y : f32
    memref.store %z, %next[%c0] : memref<64xf32>
    scf.yield %next : memref<64xf32>
  }
  %r = memref.load %last[%c0] : memref<64xf32>
  memref.store %r, %out[] : memref<f32>
  return
}

// -----

// Buffers of a loop whose iterations may run at once, and buffers of
// dynamic size, stay on the heap.
// CHECK-LABEL: func.func @heap
// CHECK-SAME: loom.arena = {bytes = 0 : i64, communication = 0 : i64, gradients = 0 : i64, kept = 0 : i64, live = 0 : i64}
// CHECK: scf.forall
// CHECK: memref.alloc() : memref<8xf32>
// CHECK: memref.alloc(%{{.*}}) : memref<?xf32>
// PRINT: compiled    heap: arena 0 B
// expected-remark @+1 {{2 buffer(s) of dynamic size or made inside a parallel loop stay on the heap, outside the arena}}
func.func @heap(%n: index, %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f32
  scf.forall (%i) in (4) {
    %t = memref.alloc() : memref<8xf32>
    memref.store %one, %t[%c0] : memref<8xf32>
    %x = memref.load %t[%c0] : memref<8xf32>
    memref.store %x, %out[%i] : memref<4xf32>
    memref.dealloc %t : memref<8xf32>
  }
  %d = memref.alloc(%n) : memref<?xf32>
  memref.store %one, %d[%c0] : memref<?xf32>
  memref.dealloc %d : memref<?xf32>
  return
}

// -----

// Buffers a function declared loom.communication reads or writes are
// counted apart.
// CHECK-LABEL: func.func @communicated
// CHECK-SAME: loom.arena = {bytes = 512 : i64, communication = 256 : i64, gradients = 0 : i64, kept = 0 : i64, live = 512 : i64}
// PRINT: compiled    communicated: arena 512 B; at most 512 B of buffers live at once: 0 B of activations kept for the backward pass, 0 B of gradients, 256 B read or written by communication, 256 B of temporaries
llvm.func @send(!llvm.ptr) attributes {loom.communication}
func.func @communicated(%out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f32
  %a = memref.alloc() : memref<64xf32>
  %b = memref.alloc() : memref<64xf32>
  memref.store %one, %a[%c0] : memref<64xf32>
  memref.store %one, %b[%c0] : memref<64xf32>
  %p = memref.extract_aligned_pointer_as_index %a : memref<64xf32> -> index
  %i = arith.index_cast %p : index to i64
  %ptr = llvm.inttoptr %i : i64 to !llvm.ptr
  llvm.call @send(%ptr) : (!llvm.ptr) -> ()
  %x = memref.load %b[%c0] : memref<64xf32>
  memref.store %x, %out[] : memref<f32>
  return
}

// -----

// A buffer the forward pass makes and the backward pass reads is an
// activation kept for the backward pass (the phases loom-differentiate
// records in locations); one the forward pass makes and reads alone is a
// temporary (dead here when the gradient is made), as is one the backward
// pass makes and reads alone (live at the peak); one the backward pass
// makes and an op outside both passes reads is a gradient, and so is a sum
// the step accumulates gradients in (loom-build-train-step's phase). The
// rank's peak adds the module's parameters and optimizer state to the
// training step's arena.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: loom.arena = {bytes = 640 : i64, communication = 0 : i64, gradients = 320 : i64, kept = 256 : i64, live = 640 : i64}
// PRINT: compiled    train_step: arena 640 B; at most 640 B of buffers live at once: 256 B of activations kept for the backward pass, 320 B of gradients, 0 B read or written by communication, 64 B of temporaries
// PRINT: compiled    train_step: the rank's peak 1664 B = parameters 512 B + optimizer state 512 B + arena 640 B, its gradients in the arena (0.00 MiB)
module attributes {loom.memory = {activations = 256 : i64, gradients = 512 : i64, optimizer = 512 : i64, parameters = 512 : i64}} {
func.func @train_step(%out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f32
  %sum = memref.alloc() : memref<16xf32> loc(#accumulation)
  %kept = memref.alloc() : memref<64xf32> loc(#forward)
  %temp = memref.alloc() : memref<32xf32> loc(#forward)
  memref.store %one, %kept[%c0] : memref<64xf32> loc(#forward)
  memref.store %one, %temp[%c0] : memref<32xf32> loc(#forward)
  %y = memref.load %temp[%c0] : memref<32xf32> loc(#forward)
  %grad = memref.alloc() : memref<64xf32> loc(#backward)
  %scratch = memref.alloc() : memref<16xf32> loc(#backward)
  memref.store %y, %scratch[%c0] : memref<16xf32> loc(#backward)
  %z = memref.load %scratch[%c0] : memref<16xf32> loc(#backward)
  memref.store %z, %grad[%c0] : memref<64xf32> loc(#backward)
  %x = memref.load %kept[%c0] : memref<64xf32> loc(#backward)
  memref.store %x, %grad[%c0] : memref<64xf32> loc(#backward)
  %g = memref.load %grad[%c0] : memref<64xf32>
  memref.store %g, %sum[%c0] : memref<16xf32> loc(#accumulation)
  %s = memref.load %sum[%c0] : memref<16xf32>
  memref.store %s, %out[] : memref<f32>
  return
}
}
#forward = loc(fused<"loom.forward">["f"])
#backward = loc(fused<"loom.backward">["b"])
#accumulation = loc(fused<"loom.accumulation">["a"])

// -----

// A buffer that starts one place of a loop reaches that place's result,
// and those the body passes it on to, not the loop's other places: here
// the inner loop's second place, which the outer loop carries (a sum in a
// buffer of the caller's), does not hold the buffer, which stays in the
// arena (it used to be left on the heap).
// CHECK-LABEL: func.func @starts_one_place
// CHECK-SAME: loom.arena = {bytes = 64 : i64
// CHECK-NOT: memref.alloc() : memref<8xf32>
// CHECK: memref.view
func.func @starts_one_place(%sum: memref<8xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %one = arith.constant 1.0 : f32
  %r = scf.for %o = %c0 to %c2 step %c1 iter_args(%s = %sum) -> (memref<8xf32>) {
    %start = memref.alloc() : memref<8xf32>
    memref.store %one, %start[%c0] : memref<8xf32>
    %in:2 = scf.for %l = %c0 to %c2 step %c1 iter_args(%a = %start, %b = %s) -> (memref<8xf32>, memref<8xf32>) {
      %x = memref.load %a[%c0] : memref<8xf32>
      memref.store %x, %b[%c0] : memref<8xf32>
      scf.yield %a, %b : memref<8xf32>, memref<8xf32>
    }
    %y = memref.load %in#0[%c0] : memref<8xf32>
    memref.store %y, %out[] : memref<f32>
    scf.yield %in#1 : memref<8xf32>
  }
  return
}
