// RUN: loom-opt %s --loom-early-deallocation --split-input-file | FileCheck %s

// Two micro-batches' buffers, freed at the block's end by the ownership-based
// deallocation, are freed after their last use: the first before the second
// is allocated.
// CHECK-LABEL: func.func @in_order(
// CHECK: %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: linalg.fill ins(%{{.*}} : f32) outs(%[[A]] : memref<4xf32>)
// CHECK-NEXT: memref.copy %[[A]], %arg0
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: %[[B:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: linalg.fill ins(%{{.*}} : f32) outs(%[[B]] : memref<4xf32>)
// CHECK-NEXT: memref.copy %[[B]], %arg1
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK-NEXT: return
func.func @in_order(%out0: memref<4xf32>, %out1: memref<4xf32>) {
  %c = arith.constant 1.0 : f32
  %a = memref.alloc() : memref<4xf32>
  linalg.fill ins(%c : f32) outs(%a : memref<4xf32>)
  memref.copy %a, %out0 : memref<4xf32> to memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  linalg.fill ins(%c : f32) outs(%b : memref<4xf32>)
  memref.copy %b, %out1 : memref<4xf32> to memref<4xf32>
  memref.dealloc %a : memref<4xf32>
  memref.dealloc %b : memref<4xf32>
  return
}

// -----

// A use through a view, a use inside a loop and a use of the buffer's
// pointer keep it alive up to them.
// CHECK-LABEL: func.func @aliases(
// CHECK: %[[A:.*]] = memref.alloc() : memref<8xf32>
// CHECK: %[[V:.*]] = memref.subview %[[A]][0] [4] [1]
// CHECK: scf.for
// CHECK: memref.copy %[[V]], %arg0
// CHECK: }
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK: %[[B:.*]] = memref.alloc() : memref<8xf32>
// CHECK: memref.extract_aligned_pointer_as_index %[[B]]
// CHECK: call @consume
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK-NEXT: return
func.func private @consume(index)
func.func @aliases(%out: memref<4xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = memref.alloc() : memref<8xf32>
  %v = memref.subview %a[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  scf.for %i = %c0 to %n step %c1 {
    memref.copy %v, %out : memref<4xf32, strided<[1]>> to memref<4xf32>
  }
  %b = memref.alloc() : memref<8xf32>
  %p = memref.extract_aligned_pointer_as_index %b : memref<8xf32> -> index
  %q = arith.addi %p, %c1 : index
  call @consume(%q) : (index) -> ()
  memref.dealloc %a : memref<8xf32>
  memref.dealloc %b : memref<8xf32>
  return
}

// -----

// A buffer whose pointer is stored for a later comparison stays until the
// memory it was stored into is read; an argument's buffer is freed after
// its last use like any other.
// CHECK-LABEL: func.func @kept(
// CHECK: memref.store
// CHECK-NEXT: call @compare
// CHECK-NEXT: memref.dealloc %{{.*}} : memref<{{1xindex|8xf32}}>
// CHECK-NEXT: memref.dealloc %{{.*}} : memref<{{1xindex|8xf32}}>
// CHECK-NEXT: memref.copy %arg0, %arg1
// CHECK-NEXT: memref.dealloc %arg0
// CHECK-NEXT: return
func.func private @compare(memref<1xindex>)
func.func @kept(%arg0: memref<4xf32>, %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %a = memref.alloc() : memref<8xf32>
  %slots = memref.alloc() : memref<1xindex>
  %p = memref.extract_aligned_pointer_as_index %a : memref<8xf32> -> index
  memref.store %p, %slots[%c0] : memref<1xindex>
  call @compare(%slots) : (memref<1xindex>) -> ()
  memref.copy %arg0, %out : memref<4xf32> to memref<4xf32>
  memref.dealloc %a : memref<8xf32>
  memref.dealloc %slots : memref<1xindex>
  memref.dealloc %arg0 : memref<4xf32>
  return
}
