// RUN: loom-opt %s --loom-matmul-to-blas | FileCheck %s

// C (6x5) += A (6x4) * B^T, B stored 5x4: transB = 1, lda = 4, ldb = 4.
// CHECK-LABEL: func.func @gemm(
// CHECK-DAG: %[[T:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[F:.*]] = arith.constant 0 : i32
// CHECK: call @loom_rt_sgemm(%[[F]], %[[T]], %{{.*}}) : (i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
// CHECK-NOT: linalg.matmul
// CHECK: func.func private @loom_rt_sgemm
func.func @gemm(%a: memref<6x4xf32>, %b: memref<5x4xf32>, %c: memref<6x5xf32>) {
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
    ins(%a, %b : memref<6x4xf32>, memref<5x4xf32>) outs(%c : memref<6x5xf32>)
  return
}
