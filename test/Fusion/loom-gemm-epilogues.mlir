// RUN: loom-opt %s --loom-gemm-epilogues --split-input-file | FileCheck %s
// RUN: loom-opt %s --loom-gemm-epilogues=gelu=0 --split-input-file | FileCheck %s --check-prefix=NOGELU
// RUN: loom-opt %s --loom-gemm-epilogues=add=0 --split-input-file | FileCheck %s --check-prefix=NOADD

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

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#col3 = affine_map<(d0, d1, d2) -> (d2)>

// A linear map's product with its bias, rounded into a stack's slice,
// then its GELU into another (an MLP's first layer in mixed precision):
// one call writes both, the pre-activation as the GELU's input (AUX) and
// the GELU as D, where the GELU's loop was; no loop is left.
// CHECK-LABEL: func.func @gelu_forward(
// CHECK-SAME: %[[A:[^:]*]]: memref<8x4xbf16>, %[[W:[^:]*]]: memref<8x4xbf16>, %[[BIAS:[^:]*]]: memref<8xbf16>
// CHECK-NOT: loom_rt_gemm_rounded
// CHECK: %[[PRE:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : memref<2x4x8xbf16, strided<[32, 8, 1], offset: ?>> into memref<8x8xbf16, strided<[8, 1], offset: ?>>
// CHECK: extract_aligned_pointer_as_index %[[PRE]]
// CHECK: %[[OUT:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : memref<2x4x8xbf16, strided<[32, 8, 1], offset: ?>> into memref<8x8xbf16, strided<[8, 1], offset: ?>>
// CHECK: extract_aligned_pointer_as_index %[[OUT]]
// CHECK: %[[FORWARD:.*]] = arith.constant 0 : i32
// CHECK-NEXT: call @loom_rt_gemm_gelu(%{{[^,]*}}, %[[FORWARD]], %{{.*}}) : (i32, i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64) -> ()
// CHECK-NOT: linalg.generic
// CHECK-NOT: loom.scalar
// CHECK: return
// CHECK: func.func private @loom_rt_gemm_gelu(
// NOGELU-LABEL: func.func @gelu_forward(
// NOGELU: call @loom_rt_gemm_rounded(
// NOGELU: loom.scalar.gelu
// NOGELU-NOT: loom_rt_gemm_gelu
func.func @gelu_forward(%a: memref<8x4xbf16>, %w: memref<8x4xbf16>, %bias: memref<8xbf16>, %i: index) -> (memref<3x2x4x8xbf16>, memref<3x2x4x8xbf16>) {
  %zero = arith.constant 0.0 : f32
  %pre = memref.alloc() : memref<3x2x4x8xbf16>
  %act = memref.alloc() : memref<3x2x4x8xbf16>
  %p = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<8x8xf32>)
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
    ins(%a, %w : memref<8x4xbf16>, memref<8x4xbf16>) outs(%p : memref<8x8xf32>)
  %p3 = memref.expand_shape %p [[0, 1], [2]] output_shape [2, 4, 8] : memref<8x8xf32> into memref<2x4x8xf32>
  %h = memref.subview %pre[%i, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<3x2x4x8xbf16> to memref<2x4x8xbf16, strided<[32, 8, 1], offset: ?>>
  linalg.generic {indexing_maps = [#id3, #col3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p3, %bias : memref<2x4x8xf32>, memref<8xbf16>) outs(%h : memref<2x4x8xbf16, strided<[32, 8, 1], offset: ?>>) {
  ^bb0(%x: f32, %b: bf16, %out: bf16):
    %wide = arith.extf %b : bf16 to f32
    %sum = arith.addf %x, %wide : f32
    %round = arith.truncf %sum : f32 to bf16
    linalg.yield %round : bf16
  }
  %g = memref.subview %act[%i, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<3x2x4x8xbf16> to memref<2x4x8xbf16, strided<[32, 8, 1], offset: ?>>
  linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%h : memref<2x4x8xbf16, strided<[32, 8, 1], offset: ?>>) outs(%g : memref<2x4x8xbf16, strided<[32, 8, 1], offset: ?>>) {
  ^bb0(%in: bf16, %o: bf16):
    %x = arith.extf %in : bf16 to f32
    %y = loom.scalar.gelu %x : f32
    %r = arith.truncf %y : f32 to bf16
    linalg.yield %r : bf16
  }
  return %pre, %act : memref<3x2x4x8xbf16>, memref<3x2x4x8xbf16>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// The gradient through the GELU: the product of the incoming gradient and
// the weight, rounded into a buffer that only the next loop reads, which
// multiplies it by the GELU's derivative at the kept pre-activation (the
// constants canonicalized to the right): the call reads the
// pre-activation as AUX and writes the loop's output; the product's
// buffer goes.
// CHECK-LABEL: func.func @gelu_backward(
// CHECK-SAME: %[[G:[^:]*]]: memref<8x4xbf16>, %[[W:[^:]*]]: memref<4x8xbf16>, %[[PRE:[^:]*]]: memref<8x8xbf16>
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<8x8xbf16>
// CHECK-NOT: memref.alloc
// CHECK: memref.extract_aligned_pointer_as_index %[[OUT]]
// CHECK: memref.extract_aligned_pointer_as_index %[[PRE]]
// CHECK: %[[BACKWARD:.*]] = arith.constant 1 : i32
// CHECK-NEXT: call @loom_rt_gemm_gelu(%{{[^,]*}}, %[[BACKWARD]], %{{.*}}) :
// CHECK-NOT: linalg.generic
// CHECK: return %[[OUT]]
// NOGELU-LABEL: func.func @gelu_backward(
// NOGELU: call @loom_rt_gemm_rounded(
// NOGELU: loom.scalar.gelu
func.func @gelu_backward(%grad: memref<8x4xbf16>, %w: memref<4x8xbf16>, %pre: memref<8x8xbf16>) -> memref<8x8xbf16> {
  %zero = arith.constant 0.0 : f32
  %out = memref.alloc() : memref<8x8xbf16>
  %p = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<8x8xf32>)
  linalg.matmul ins(%grad, %w : memref<8x4xbf16>, memref<4x8xbf16>) outs(%p : memref<8x8xf32>)
  %da = memref.alloc() : memref<8x8xbf16>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%p : memref<8x8xf32>) outs(%da : memref<8x8xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %round = arith.truncf %x : f32 to bf16
    linalg.yield %round : bf16
  }
  linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%da, %pre : memref<8x8xbf16>, memref<8x8xbf16>) outs(%out : memref<8x8xbf16>) {
  ^bb0(%gin: bf16, %hin: bf16, %o: bf16):
    %x = arith.extf %hin : bf16 to f32
    %dy = arith.extf %gin : bf16 to f32
    %r = loom.scalar.gelu_grad %dy, %x : f32
    %rr = arith.truncf %r : f32 to bf16
    linalg.yield %rr : bf16
  }
  return %out : memref<8x8xbf16>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// Something reads the rounded product before the GELU's loop: moved to
// the loop, the product would be written after that read. Nothing fuses.
// CHECK-LABEL: func.func @gelu_after_a_read(
// CHECK: call @loom_rt_gemm_rounded(
// CHECK: memref.copy
// CHECK: loom.scalar.gelu
// CHECK-NOT: loom_rt_gemm_gelu
func.func @gelu_after_a_read(%a: memref<8x4xbf16>, %w: memref<4x8xbf16>, %copy: memref<8x8xbf16>) -> memref<8x8xbf16> {
  %zero = arith.constant 0.0 : f32
  %act = memref.alloc() : memref<8x8xbf16>
  %p = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<8x8xf32>)
  linalg.matmul ins(%a, %w : memref<8x4xbf16>, memref<4x8xbf16>) outs(%p : memref<8x8xf32>)
  %h = memref.alloc() : memref<8x8xbf16>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%p : memref<8x8xf32>) outs(%h : memref<8x8xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %round = arith.truncf %x : f32 to bf16
    linalg.yield %round : bf16
  }
  memref.copy %h, %copy : memref<8x8xbf16> to memref<8x8xbf16>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%h : memref<8x8xbf16>) outs(%act : memref<8x8xbf16>) {
  ^bb0(%in: bf16, %o: bf16):
    %x = arith.extf %in : bf16 to f32
    %y = loom.scalar.gelu %x : f32
    %r = arith.truncf %y : f32 to bf16
    linalg.yield %r : bf16
  }
  return %act : memref<8x8xbf16>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// A loop that scales the GELU of the product computes more than the
// epilogue does: it stays.
// CHECK-LABEL: func.func @not_gelu(
// CHECK: call @loom_rt_gemm_rounded(
// CHECK: loom.scalar.gelu
// CHECK-NOT: loom_rt_gemm_gelu
func.func @not_gelu(%a: memref<8x4xbf16>, %w: memref<4x8xbf16>) -> memref<8x8xbf16> {
  %zero = arith.constant 0.0 : f32
  %quarter = arith.constant 2.500000e-01 : f32
  %act = memref.alloc() : memref<8x8xbf16>
  %p = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<8x8xf32>)
  linalg.matmul ins(%a, %w : memref<8x4xbf16>, memref<4x8xbf16>) outs(%p : memref<8x8xf32>)
  %h = memref.alloc() : memref<8x8xbf16>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%p : memref<8x8xf32>) outs(%h : memref<8x8xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %round = arith.truncf %x : f32 to bf16
    linalg.yield %round : bf16
  }
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%h : memref<8x8xbf16>) outs(%act : memref<8x8xbf16>) {
  ^bb0(%in: bf16, %o: bf16):
    %x = arith.extf %in : bf16 to f32
    %g = loom.scalar.gelu %x : f32
    %y = arith.mulf %g, %quarter : f32
    %r = arith.truncf %y : f32 to bf16
    linalg.yield %r : bf16
  }
  return %act : memref<8x8xbf16>
}


// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// The rounded product is read again after the gradient's loop: the call
// must still write it, so the loop stays.
// CHECK-LABEL: func.func @gelu_backward_product_kept(
// CHECK: call @loom_rt_gemm_rounded(
// CHECK: loom.scalar.gelu
// CHECK-NOT: loom_rt_gemm_gelu
func.func @gelu_backward_product_kept(%grad: memref<8x4xbf16>, %w: memref<4x8xbf16>, %pre: memref<8x8xbf16>, %keep: memref<8x8xbf16>) -> memref<8x8xbf16> {
  %zero = arith.constant 0.0 : f32
  %out = memref.alloc() : memref<8x8xbf16>
  %p = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<8x8xf32>)
  linalg.matmul ins(%grad, %w : memref<8x4xbf16>, memref<4x8xbf16>) outs(%p : memref<8x8xf32>)
  %da = memref.alloc() : memref<8x8xbf16>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%p : memref<8x8xf32>) outs(%da : memref<8x8xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %round = arith.truncf %x : f32 to bf16
    linalg.yield %round : bf16
  }
  linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%da, %pre : memref<8x8xbf16>, memref<8x8xbf16>) outs(%out : memref<8x8xbf16>) {
  ^bb0(%gin: bf16, %hin: bf16, %o: bf16):
    %x = arith.extf %hin : bf16 to f32
    %dy = arith.extf %gin : bf16 to f32
    %r = loom.scalar.gelu_grad %dy, %x : f32
    %rr = arith.truncf %r : f32 to bf16
    linalg.yield %rr : bf16
  }
  memref.copy %da, %keep : memref<8x8xbf16> to memref<8x8xbf16>
  return %out : memref<8x8xbf16>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// The rounded product is multiplied again later, by a GEMM the pass made
// a call too, which reads it through a pointer of its own: the product
// must still be written, so the gradient's loop stays.
// CHECK-LABEL: func.func @gelu_backward_product_multiplied(
// CHECK: call @loom_rt_gemm_rounded(
// CHECK: loom.scalar.gelu
// CHECK: call @loom_rt_gemm_rounded(
// CHECK-NOT: loom_rt_gemm_gelu
func.func @gelu_backward_product_multiplied(%grad: memref<8x4xbf16>, %w: memref<4x8xbf16>, %pre: memref<8x8xbf16>, %w2: memref<8x8xbf16>, %keep: memref<8x8xbf16>) -> memref<8x8xbf16> {
  %zero = arith.constant 0.0 : f32
  %out = memref.alloc() : memref<8x8xbf16>
  %p = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<8x8xf32>)
  linalg.matmul ins(%grad, %w : memref<8x4xbf16>, memref<4x8xbf16>) outs(%p : memref<8x8xf32>)
  %da = memref.alloc() : memref<8x8xbf16>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%p : memref<8x8xf32>) outs(%da : memref<8x8xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %round = arith.truncf %x : f32 to bf16
    linalg.yield %round : bf16
  }
  linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%da, %pre : memref<8x8xbf16>, memref<8x8xbf16>) outs(%out : memref<8x8xbf16>) {
  ^bb0(%gin: bf16, %hin: bf16, %o: bf16):
    %x = arith.extf %hin : bf16 to f32
    %dy = arith.extf %gin : bf16 to f32
    %r = loom.scalar.gelu_grad %dy, %x : f32
    %rr = arith.truncf %r : f32 to bf16
    linalg.yield %rr : bf16
  }
  %p2 = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%zero : f32) outs(%p2 : memref<8x8xf32>)
  linalg.matmul ins(%da, %w2 : memref<8x8xbf16>, memref<8x8xbf16>) outs(%p2 : memref<8x8xf32>)
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%p2 : memref<8x8xf32>) outs(%keep : memref<8x8xbf16>) {
  ^bb0(%x2: f32, %o2: bf16):
    %round2 = arith.truncf %x2 : f32 to bf16
    linalg.yield %round2 : bf16
  }
  return %out : memref<8x8xbf16>
}

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#col3 = affine_map<(d0, d1, d2) -> (d2)>

// A projection's product with its bias, rounded, then added to the
// residual stream into a stack's slice (a layer's attention output in
// mixed precision): one call reads the residual stream as C and writes
// the slice, where the add's loop was; the product's buffer, the loop and
// loom_rt_gemm_rounded go.
// CHECK-LABEL: func.func @residual_add(
// CHECK-SAME: %[[A:[^:]*]]: memref<8x4xbf16>, %[[W:[^:]*]]: memref<8x4xbf16>, %[[BIAS:[^:]*]]: memref<8xbf16>, %[[R:[^:]*]]: memref<2x4x8xbf16>
// CHECK-NOT: memref.alloc() : memref<8x8
// CHECK-NOT: loom_rt_gemm_rounded
// CHECK: %[[OUT:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : memref<2x4x8xbf16, strided<[32, 8, 1], offset: ?>> into memref<8x8xbf16, strided<[8, 1], offset: ?>>
// CHECK: extract_aligned_pointer_as_index %[[OUT]]
// CHECK: %[[C:.*]] = memref.collapse_shape %[[R]] {{\[\[}}0, 1], [2]] : memref<2x4x8xbf16> into memref<8x8xbf16>
// CHECK: extract_aligned_pointer_as_index %[[C]]
// CHECK: call @loom_rt_gemm_add(%{{.*}}) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64) -> ()
// CHECK-NOT: linalg.generic
// CHECK: return
// CHECK: func.func private @loom_rt_gemm_add(
// NOADD-LABEL: func.func @residual_add(
// NOADD: call @loom_rt_gemm_rounded(
// NOADD: linalg.generic
// NOADD-NOT: loom_rt_gemm_add
func.func @residual_add(%a: memref<8x4xbf16>, %w: memref<8x4xbf16>, %bias: memref<8xbf16>, %residual: memref<2x4x8xbf16>, %i: index) -> memref<3x2x4x8xbf16> {
  %zero = arith.constant 0.0 : f32
  %stack = memref.alloc() : memref<3x2x4x8xbf16>
  %p = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<8x8xf32>)
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
    ins(%a, %w : memref<8x4xbf16>, memref<8x4xbf16>) outs(%p : memref<8x8xf32>)
  %p3 = memref.expand_shape %p [[0, 1], [2]] output_shape [2, 4, 8] : memref<8x8xf32> into memref<2x4x8xf32>
  %out = memref.subview %stack[%i, 0, 0, 0] [1, 2, 4, 8] [1, 1, 1, 1] : memref<3x2x4x8xbf16> to memref<2x4x8xbf16, strided<[32, 8, 1], offset: ?>>
  linalg.generic {indexing_maps = [#id3, #id3, #col3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%residual, %p3, %bias : memref<2x4x8xbf16>, memref<2x4x8xf32>, memref<8xbf16>) outs(%out : memref<2x4x8xbf16, strided<[32, 8, 1], offset: ?>>) {
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
  return %stack : memref<3x2x4x8xbf16>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// The rounded product subtracted from another matrix instead: not an add,
// the loop stays.
// CHECK-LABEL: func.func @not_an_add(
// CHECK: call @loom_rt_gemm_rounded(
// CHECK: linalg.generic
// CHECK: arith.subf
// CHECK-NOT: loom_rt_gemm_add
func.func @not_an_add(%a: memref<8x4xbf16>, %w: memref<4x8xbf16>, %other: memref<8x8xbf16>, %out: memref<8x8xbf16>) {
  %zero = arith.constant 0.0 : f32
  %p = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<8x8xf32>)
  linalg.matmul ins(%a, %w : memref<8x4xbf16>, memref<4x8xbf16>) outs(%p : memref<8x8xf32>)
  linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%other, %p : memref<8x8xbf16>, memref<8x8xf32>) outs(%out : memref<8x8xbf16>) {
  ^bb0(%r: bf16, %x: f32, %o: bf16):
    %round = arith.truncf %x : f32 to bf16
    %back = arith.extf %round : bf16 to f32
    %rw = arith.extf %r : bf16 to f32
    %total = arith.subf %rw, %back : f32
    %t = arith.truncf %total : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// The product is where the gradient through the GELU is taken, not the
// gradient it multiplies, which is what DGELU multiplies: the loop stays.
// CHECK-LABEL: func.func @gelu_grad_at_product(
// CHECK: call @loom_rt_gemm_rounded(
// CHECK: loom.scalar.gelu_grad
// CHECK-NOT: loom_rt_gemm_gelu
func.func @gelu_grad_at_product(%a: memref<8x4xbf16>, %w: memref<4x8xbf16>, %dy: memref<8x8xbf16>) -> memref<8x8xbf16> {
  %zero = arith.constant 0.0 : f32
  %out = memref.alloc() : memref<8x8xbf16>
  %p = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<8x8xf32>)
  linalg.matmul ins(%a, %w : memref<8x4xbf16>, memref<4x8xbf16>) outs(%p : memref<8x8xf32>)
  %h = memref.alloc() : memref<8x8xbf16>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%p : memref<8x8xf32>) outs(%h : memref<8x8xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %round = arith.truncf %x : f32 to bf16
    linalg.yield %round : bf16
  }
  linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %h : memref<8x8xbf16>, memref<8x8xbf16>) outs(%out : memref<8x8xbf16>) {
  ^bb0(%gin: bf16, %hin: bf16, %o: bf16):
    %x = arith.extf %hin : bf16 to f32
    %g = arith.extf %gin : bf16 to f32
    %r = loom.scalar.gelu_grad %g, %x : f32
    %rr = arith.truncf %r : f32 to bf16
    linalg.yield %rr : bf16
  }
  return %out : memref<8x8xbf16>
}
