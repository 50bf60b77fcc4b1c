// RUN: loom-opt %s --loom-matmul-to-blas --split-input-file --verify-diagnostics | FileCheck %s

// C (6x5) += A (6x4) * B^T, B stored 5x4: transB = 1, lda = 4, ldb = 4.
// CHECK-LABEL: func.func @gemm(
// CHECK-DAG: %[[T:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[F:.*]] = arith.constant 0 : i32
// CHECK: call @loom_rt_sgemm(%[[F]], %[[T]], %{{.*}}) : (i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
// CHECK-NOT: linalg.matmul
func.func @gemm(%a: memref<6x4xf32>, %b: memref<5x4xf32>, %c: memref<6x5xf32>) {
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
    ins(%a, %b : memref<6x4xf32>, memref<5x4xf32>) outs(%c : memref<6x5xf32>)
  return
}

// A zero fill right before the product becomes beta = 0 and goes away; one
// with a write to the output in between stays, and so does beta = 1.
// CHECK-LABEL: func.func @zero_fill(
// CHECK-NOT: linalg.fill
// CHECK: arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: call @loom_rt_sgemm({{.*}}, %[[ZERO]], %{{.*}}, %{{.*}}) :
func.func @zero_fill(%a: memref<6x4xf32>, %b: memref<4x5xf32>, %c: memref<6x5xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<6x5xf32>)
  linalg.matmul ins(%a, %b : memref<6x4xf32>, memref<4x5xf32>) outs(%c : memref<6x5xf32>)
  return
}

// CHECK-LABEL: func.func @fill_then_write(
// CHECK: linalg.fill
// CHECK: memref.store
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: call @loom_rt_sgemm({{.*}}, %[[ONE]], %{{.*}}, %{{.*}}) :
func.func @fill_then_write(%a: memref<6x4xf32>, %b: memref<4x5xf32>, %c: memref<6x5xf32>, %v: f32) {
  %zero = arith.constant 0.0 : f32
  %i = arith.constant 0 : index
  linalg.fill ins(%zero : f32) outs(%c : memref<6x5xf32>)
  memref.store %v, %c[%i, %i] : memref<6x5xf32>
  linalg.matmul ins(%a, %b : memref<6x4xf32>, memref<4x5xf32>) outs(%c : memref<6x5xf32>)
  return
}

// A copy in between into other bytes of the arena (a layer's input kept
// for the backward pass) leaves the fill to beta = 0 all the same.
// CHECK-LABEL: func.func @fill_then_copy_elsewhere(
// CHECK-NOT: linalg.fill
// CHECK: memref.copy
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: call @loom_rt_sgemm({{.*}}, %[[ZERO]], %{{.*}}, %{{.*}}) :
func.func @fill_then_copy_elsewhere(%a: memref<6x4xf32>, %b: memref<4x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %arena = memref.alloc() : memref<256xi8>
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %c = memref.view %arena[%c0][] : memref<256xi8> to memref<6x5xf32>
  %kept = memref.view %arena[%c128][] : memref<256xi8> to memref<6x4xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<6x5xf32>)
  memref.copy %a, %kept : memref<6x4xf32> to memref<6x4xf32>
  linalg.matmul ins(%a, %b : memref<6x4xf32>, memref<4x5xf32>) outs(%c : memref<6x5xf32>)
  return
}

// CHECK: func.func private @loom_rt_sgemm

// -----

// bf16 matrices into f32 (mixed precision's GEMMs): the runtime's GEMM of
// that element type, its code (LOOM_DTYPE_BF16 = 1) first.
// CHECK-LABEL: func.func @gemm_bf16(
// CHECK: %[[BF16:.*]] = arith.constant 1 : i32
// CHECK: call @loom_rt_gemm(%[[BF16]], %{{.*}}) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
// CHECK: func.func private @loom_rt_gemm
// CHECK-NOT: @loom_rt_sgemm
func.func @gemm_bf16(%a: memref<6x4xbf16>, %b: memref<4x5xbf16>, %c: memref<6x5xf32>) {
  linalg.matmul ins(%a, %b : memref<6x4xbf16>, memref<4x5xbf16>) outs(%c : memref<6x5xf32>)
  return
}

// -----

func.func @mixed(%a: memref<6x4xbf16>, %b: memref<4x5xf32>, %c: memref<6x5xf32>) {
  // expected-error @below {{multiplies matrices of two element types or into a result other than f32}}
  linalg.matmul ins(%a, %b : memref<6x4xbf16>, memref<4x5xf32>) outs(%c : memref<6x5xf32>)
  return
}

// -----

// A loop over (batch, head) whose body is one GEMM on views offset by its
// indices is one batched GEMM, on the views of its first iteration: Q K^T
// of [2, 3, 4(heads), 8] queries and keys into [2, 4, 3, 3] scores. A's and
// B's matrices are 96 elements apart per batch and 8 per head, C's 36 and
// 9; the zero fill of the whole output becomes beta = 0.
// CHECK-LABEL: func.func @heads(
// CHECK-NOT: linalg.fill
// CHECK-NOT: scf.forall
// CHECK: call @loom_rt_gemm_batched({{.*}}, %c2_i64, %c96_i64, %c96_i64{{[_0-9]*}}, %c36_i64, %c4_i64, %c8_i64{{[_0-9]*}}, %c8_i64{{[_0-9]*}}, %c9_i64) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64) -> ()
// CHECK-NOT: loom_rt_sgemm(
// CHECK: return
// A loop doing anything else keeps a GEMM per iteration.
// CHECK-LABEL: func.func @heads_and_more(
// CHECK: scf.forall
// CHECK: call @loom_rt_sgemm(
// CHECK-NOT: loom_rt_gemm_batched(
// CHECK: return
func.func @heads(%q: memref<2x3x4x8xf32>, %k: memref<2x3x4x8xf32>, %s: memref<2x4x3x3xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%s : memref<2x4x3x3xf32>)
  scf.forall (%b, %h) in (2, 4) {
    %qh = memref.subview %q[%b, 0, %h, 0] [1, 3, 1, 8] [1, 1, 1, 1] : memref<2x3x4x8xf32> to memref<3x8xf32, strided<[32, 1], offset: ?>>
    %kh = memref.subview %k[%b, 0, %h, 0] [1, 3, 1, 8] [1, 1, 1, 1] : memref<2x3x4x8xf32> to memref<3x8xf32, strided<[32, 1], offset: ?>>
    %sh = memref.subview %s[%b, %h, 0, 0] [1, 1, 3, 3] [1, 1, 1, 1] : memref<2x4x3x3xf32> to memref<3x3xf32, strided<[3, 1], offset: ?>>
    linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%qh, %kh : memref<3x8xf32, strided<[32, 1], offset: ?>>, memref<3x8xf32, strided<[32, 1], offset: ?>>)
      outs(%sh : memref<3x3xf32, strided<[3, 1], offset: ?>>)
  }
  return
}
func.func @heads_and_more(%q: memref<2x3x4x8xf32>, %k: memref<2x3x4x8xf32>, %s: memref<2x4x3x3xf32>) {
  scf.forall (%b, %h) in (2, 4) {
    %qh = memref.subview %q[%b, 0, %h, 0] [1, 3, 1, 8] [1, 1, 1, 1] : memref<2x3x4x8xf32> to memref<3x8xf32, strided<[32, 1], offset: ?>>
    %kh = memref.subview %k[%b, 0, %h, 0] [1, 3, 1, 8] [1, 1, 1, 1] : memref<2x3x4x8xf32> to memref<3x8xf32, strided<[32, 1], offset: ?>>
    %sh = memref.subview %s[%b, %h, 0, 0] [1, 1, 3, 3] [1, 1, 1, 1] : memref<2x4x3x3xf32> to memref<3x3xf32, strided<[3, 1], offset: ?>>
    linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%qh, %kh : memref<3x8xf32, strided<[32, 1], offset: ?>>, memref<3x8xf32, strided<[32, 1], offset: ?>>)
      outs(%sh : memref<3x3xf32, strided<[3, 1], offset: ?>>)
    %one = arith.constant 1.0 : f32
    %c0 = arith.constant 0 : index
    memref.store %one, %sh[%c0, %c0] : memref<3x3xf32, strided<[3, 1], offset: ?>>
  }
  return
}
