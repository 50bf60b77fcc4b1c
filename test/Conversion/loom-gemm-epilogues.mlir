// RUN: loom-opt %s --loom-gemm-epilogues --split-input-file | FileCheck %s

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#col3 = affine_map<(d0, d1, d2) -> (d2)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>

// A linear map's product, its bias added and rounded into a layer's slice
// of a stack (made after the product): the GEMM writes the slice, through
// the shape the loop reads it in, with the bias; the loop, the f32 buffer
// and its fill go.
// CHECK-LABEL: func.func @bias_into_output(
// CHECK-SAME: %[[A:[^:]*]]: memref<8x4xbf16>, %[[W:[^:]*]]: memref<6x4xbf16>, %[[BIAS:[^:]*]]: memref<6xbf16>, %[[I:[^:]*]]: index)
// CHECK: %[[STACK:.*]] = memref.alloc() : memref<3x2x4x6xbf16>
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg.fill
// CHECK: %[[SLICE:.*]] = memref.subview %[[STACK]][%[[I]], 0, 0, 0] [1, 2, 4, 6]
// CHECK: %[[D:.*]] = memref.collapse_shape %[[SLICE]] {{\[\[}}0, 1], [2]]
// CHECK-DAG: memref.extract_aligned_pointer_as_index %[[A]]
// CHECK-DAG: memref.extract_aligned_pointer_as_index %[[W]]
// CHECK-DAG: memref.extract_aligned_pointer_as_index %[[D]]
// CHECK-DAG: memref.extract_aligned_pointer_as_index %[[BIAS]]
// CHECK-DAG: %[[BF16:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[NO:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[YES:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[M:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[K:.*]] = arith.constant 4 : i64
// CHECK: call @loom_rt_gemm_rounded(%[[BF16]], %[[NO]], %[[YES]], %[[M]], %[[N]], %[[K]], %{{.*}}) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64) -> ()
// CHECK-NOT: linalg.generic
// CHECK: return %[[STACK]]
// CHECK: func.func private @loom_rt_gemm_rounded(
func.func @bias_into_output(%a: memref<8x4xbf16>, %w: memref<6x4xbf16>, %bias: memref<6xbf16>, %i: index) -> memref<3x2x4x6xbf16> {
  %zero = arith.constant 0.0 : f32
  %stack = memref.alloc() : memref<3x2x4x6xbf16>
  %c = memref.alloc() : memref<8x6xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x6xf32>)
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
    ins(%a, %w : memref<8x4xbf16>, memref<6x4xbf16>) outs(%c : memref<8x6xf32>)
  %c3 = memref.expand_shape %c [[0, 1], [2]] output_shape [2, 4, 6] : memref<8x6xf32> into memref<2x4x6xf32>
  %slice = memref.subview %stack[%i, 0, 0, 0] [1, 2, 4, 6] [1, 1, 1, 1] : memref<3x2x4x6xbf16> to memref<2x4x6xbf16, strided<[24, 6, 1], offset: ?>>
  linalg.generic {indexing_maps = [#id3, #col3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%c3, %bias : memref<2x4x6xf32>, memref<6xbf16>) outs(%slice : memref<2x4x6xbf16, strided<[24, 6, 1], offset: ?>>) {
  ^bb0(%x: f32, %b: bf16, %out: bf16):
    %wide = arith.extf %b : bf16 to f32
    %sum = arith.addf %x, %wide : f32
    %round = arith.truncf %sum : f32 to bf16
    linalg.yield %round : bf16
  }
  return %stack : memref<3x2x4x6xbf16>
}

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#col3 = affine_map<(d0, d1, d2) -> (d2)>

// The rounded sum is read again (a residual added to it): the GEMM writes
// a bf16 buffer where the f32 one was, and the loop reads it in place of
// its f32 sum, bias and rounding.
// CHECK-LABEL: func.func @rounded_then_used(
// CHECK: %[[D:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x6xbf16>
// CHECK-NOT: linalg.fill
// CHECK: extract_aligned_pointer_as_index %[[D]]
// CHECK: call @loom_rt_gemm_rounded(
// CHECK: %[[D3:.*]] = memref.expand_shape %[[D]] {{\[\[}}0, 1], [2]] output_shape [2, 4, 6] : memref<8x6xbf16> into memref<2x4x6xbf16>
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}}, %[[D3]] : memref<2x4x6xbf16>, memref<2x4x6xbf16>)
// CHECK-NEXT: ^bb0(%[[R:.*]]: bf16, %[[X:.*]]: bf16, %{{[^:]*}}: bf16):
// CHECK-NEXT: %[[XW:.*]] = arith.extf %[[X]] : bf16 to f32
// CHECK-NEXT: %[[RW:.*]] = arith.extf %[[R]] : bf16 to f32
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[RW]], %[[XW]] : f32
// CHECK-NEXT: %[[T:.*]] = arith.truncf %[[S]] : f32 to bf16
// CHECK-NEXT: linalg.yield %[[T]] : bf16
func.func @rounded_then_used(%a: memref<8x4xbf16>, %w: memref<4x6xbf16>, %bias: memref<6xbf16>, %residual: memref<2x4x6xbf16>, %out: memref<2x4x6xbf16>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() {alignment = 64 : i64} : memref<8x6xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x6xf32>)
  linalg.matmul ins(%a, %w : memref<8x4xbf16>, memref<4x6xbf16>) outs(%c : memref<8x6xf32>)
  %c3 = memref.expand_shape %c [[0, 1], [2]] output_shape [2, 4, 6] : memref<8x6xf32> into memref<2x4x6xf32>
  linalg.generic {indexing_maps = [#id3, #id3, #col3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%residual, %c3, %bias : memref<2x4x6xbf16>, memref<2x4x6xf32>, memref<6xbf16>) outs(%out : memref<2x4x6xbf16>) {
  ^bb0(%r: bf16, %x: f32, %b: bf16, %o: bf16):
    %wide = arith.extf %b : bf16 to f32
    %sum = arith.addf %x, %wide : f32
    %round = arith.truncf %sum : f32 to bf16
    %back = arith.extf %round : bf16 to f32
    %rw = arith.extf %r : bf16 to f32
    %total = arith.addf %rw, %back : f32
    %t = arith.truncf %total : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// No bias: a null pointer. f16 matrices: code 2.
// CHECK-LABEL: func.func @round_only_f16(
// CHECK-DAG: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-DAG: %[[F16:.*]] = arith.constant 2 : i32
// CHECK: call @loom_rt_gemm_rounded(%[[F16]], {{.*}}, %[[NULL]], %{{.*}}, %{{.*}}) :
// CHECK-NOT: linalg.generic
func.func @round_only_f16(%a: memref<8x4xf16>, %w: memref<4x6xf16>) -> memref<8x6xf16> {
  %zero = arith.constant 0.0 : f32
  %out = memref.alloc() : memref<8x6xf16>
  %c = memref.alloc() : memref<8x6xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x6xf32>)
  linalg.matmul ins(%a, %w : memref<8x4xf16>, memref<4x6xf16>) outs(%c : memref<8x6xf32>)
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x6xf32>) outs(%out : memref<8x6xf16>) {
  ^bb0(%x: f32, %o: f16):
    %round = arith.truncf %x : f32 to f16
    linalg.yield %round : f16
  }
  return %out : memref<8x6xf16>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// Kept: the f32 product is read by a second loop; read unrounded (a
// widening of the sum, or the sum used twice); not zero-filled; products
// of f32 matrices.
// CHECK-LABEL: func.func @second_reader(
// CHECK: linalg.matmul
// CHECK-NOT: loom_rt_gemm_rounded
func.func @second_reader(%a: memref<8x4xbf16>, %w: memref<4x6xbf16>, %out: memref<8x6xbf16>, %sum: memref<8x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<8x6xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x6xf32>)
  linalg.matmul ins(%a, %w : memref<8x4xbf16>, memref<4x6xbf16>) outs(%c : memref<8x6xf32>)
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x6xf32>) outs(%out : memref<8x6xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %round = arith.truncf %x : f32 to bf16
    linalg.yield %round : bf16
  }
  memref.copy %c, %sum : memref<8x6xf32> to memref<8x6xf32>
  return
}

// CHECK-LABEL: func.func @unrounded_use(
// CHECK: linalg.matmul
// CHECK-NOT: loom_rt_gemm_rounded
func.func @unrounded_use(%a: memref<8x4xbf16>, %w: memref<4x6xbf16>, %out: memref<8x6xbf16>, %other: memref<8x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<8x6xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x6xf32>)
  linalg.matmul ins(%a, %w : memref<8x4xbf16>, memref<4x6xbf16>) outs(%c : memref<8x6xf32>)
  linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x6xf32>) outs(%out, %other : memref<8x6xbf16>, memref<8x6xf32>) {
  ^bb0(%x: f32, %o: bf16, %p: f32):
    %round = arith.truncf %x : f32 to bf16
    %twice = arith.addf %x, %x : f32
    linalg.yield %round, %twice : bf16, f32
  }
  return
}

// CHECK-LABEL: func.func @not_zero_filled(
// CHECK: linalg.matmul
// CHECK-NOT: loom_rt_gemm_rounded
func.func @not_zero_filled(%a: memref<8x4xbf16>, %w: memref<4x6xbf16>, %out: memref<8x6xbf16>) {
  %one = arith.constant 1.0 : f32
  %c = memref.alloc() : memref<8x6xf32>
  linalg.fill ins(%one : f32) outs(%c : memref<8x6xf32>)
  linalg.matmul ins(%a, %w : memref<8x4xbf16>, memref<4x6xbf16>) outs(%c : memref<8x6xf32>)
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x6xf32>) outs(%out : memref<8x6xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %round = arith.truncf %x : f32 to bf16
    linalg.yield %round : bf16
  }
  return
}

// CHECK-LABEL: func.func @f32_product(
// CHECK: linalg.matmul
// CHECK-NOT: loom_rt_gemm_rounded
func.func @f32_product(%a: memref<8x4xf32>, %w: memref<4x6xf32>, %out: memref<8x6xbf16>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<8x6xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x6xf32>)
  linalg.matmul ins(%a, %w : memref<8x4xf32>, memref<4x6xf32>) outs(%c : memref<8x6xf32>)
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x6xf32>) outs(%out : memref<8x6xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %round = arith.truncf %x : f32 to bf16
    linalg.yield %round : bf16
  }
  return
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// The output is an operand of the product: written first, it would change
// what the product reads. The GEMM writes a buffer of its own, the loop
// copies it.
// CHECK-LABEL: func.func @output_read_by_product(
// CHECK: %[[D:.*]] = memref.alloc() : memref<4x4xbf16>
// CHECK: call @loom_rt_gemm_rounded(
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[D]] : memref<4x4xbf16>) outs(%{{.*}} : memref<4x4xbf16>)
func.func @output_read_by_product(%a: memref<4x4xbf16>, %w: memref<4x4xbf16>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x4xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x4xf32>)
  linalg.matmul ins(%a, %w : memref<4x4xbf16>, memref<4x4xbf16>) outs(%c : memref<4x4xf32>)
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x4xf32>) outs(%a : memref<4x4xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %round = arith.truncf %x : f32 to bf16
    linalg.yield %round : bf16
  }
  return
}
