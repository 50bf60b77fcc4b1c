// Causal attention left to the runtime's fused kernels: loom-lower-to-linalg
// keeps the ops on their storage type, and bufferization makes them calls.
// RUN: loom-opt %s --loom-lower-to-linalg --split-input-file | FileCheck %s --check-prefix=LINALG
// RUN: loom-opt %s --loom-lower-to-linalg="fused-attention-max-head-dim=2" --split-input-file | FileCheck %s --check-prefix=BOUND
// RUN: loom-opt %s --loom-lower-to-linalg --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --split-input-file | FileCheck %s --check-prefix=CALLS
// RUN: loom-opt %s --loom-lower-to-linalg="attention-query-sums" --split-input-file | FileCheck %s --check-prefix=MARKED
// RUN: loom-opt %s --loom-lower-to-linalg="attention-query-sums" --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --split-input-file | FileCheck %s --check-prefix=SUMS
// RUN: loom-opt %s --loom-lower-to-linalg="fused-attention-grouped-heads=0" --split-input-file | FileCheck %s --check-prefix=EXPANDED

// bf16 attention stays bf16, its log-sum-exp f32: no conversions around
// it. A head bound below the heads' size (2 heads of 4 channels) gets the
// loops instead.
// LINALG-LABEL: func.func @forward(
// LINALG-NOT: linalg.generic
// LINALG: loom.causal_attention %{{.*}} {num_heads = 2 : i64} : tensor<2x3x24xbf16> -> tensor<2x3x8xbf16>, tensor<2x2x3xf32>
// BOUND-LABEL: func.func @forward(
// BOUND-NOT: loom.causal_attention
// BOUND: linalg.matmul
// The output and the log-sum-exp are new buffers; the call takes bf16 (1),
// 2 sequences of 3 tokens, 2 heads of 4 channels.
// CALLS-LABEL: func.func @forward(
// CALLS-SAME: %[[QKV:.*]]: memref<2x3x24xbf16>
// CALLS-DAG: %[[OUT:.*]] = memref.alloc() {{.*}} : memref<2x3x8xbf16>
// CALLS-DAG: %[[LSE:.*]] = memref.alloc() {{.*}} : memref<2x2x3xf32>
// CALLS: %[[BF16:.*]] = arith.constant 1 : i32
// CALLS-NEXT: %[[B:.*]] = arith.constant 2 : i64
// CALLS-NEXT: %[[T:.*]] = arith.constant 3 : i64
// CALLS-NEXT: %[[H:.*]] = arith.constant 2 : i64
// CALLS-NEXT: %[[G:.*]] = arith.constant 0 : i64
// CALLS-NEXT: %[[D:.*]] = arith.constant 4 : i64
// CALLS: %[[PQKV:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// CALLS: %[[POUT:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// CALLS: %[[PLSE:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// CALLS: call @loom_rt_attention(%[[BF16]], %[[B]], %[[T]], %[[H]], %[[G]], %[[D]], %[[PQKV]], %[[POUT]], %[[PLSE]])
// CALLS: return %[[OUT]], %[[LSE]]
// CALLS: func.func private @loom_rt_attention(i32, i64, i64, i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr)
func.func @forward(%qkv: tensor<2x3x24xbf16>) -> (tensor<2x3x8xbf16>, tensor<2x2x3xf32>) {
  %y, %lse = loom.causal_attention %qkv {num_heads = 2 : i64} : tensor<2x3x24xbf16> -> tensor<2x3x8xbf16>, tensor<2x2x3xf32>
  return %y, %lse : tensor<2x3x8xbf16>, tensor<2x2x3xf32>
}

// -----

// The gradient reads the operand, the forward's output and log-sum-exp
// and the output's gradient, with a scratch buffer for each query's dot
// product; neither the forward pass nor its statistics are computed again.
// The call takes the operand, the output, its gradient and the log-sum-exp,
// then the new gradient and the scratch.
// LINALG-LABEL: func.func @backward(
// LINALG: loom.causal_attention_grad
// CALLS-LABEL: func.func @backward(
// CALLS-SAME: %[[DY:.*]]: memref<2x3x8xf32>, %[[QKV:.*]]: memref<2x3x24xf32>, %[[OUT:.*]]: memref<2x3x8xf32>, %[[LSE:.*]]: memref<2x2x3xf32>
// CALLS-NOT: call @loom_rt_attention(
// CALLS-NOT: memref.alloc() {{.*}} : memref<12xf32>
// CALLS: %[[DELTA:.*]] = memref.alloc() {{.*}} : memref<12xf32>
// CALLS-NOT: memref.alloc() {{.*}} : memref<12xf32>
// CALLS: %[[DQKV:.*]] = memref.alloc() {{.*}} : memref<2x3x24xf32>
// CALLS-NOT: memref.alloc
// CALLS: memref.extract_aligned_pointer_as_index %[[QKV]]
// CALLS: %[[PQKV:.*]] = llvm.inttoptr
// CALLS: memref.extract_aligned_pointer_as_index %[[OUT]]
// CALLS: %[[POUT:.*]] = llvm.inttoptr
// CALLS: memref.extract_aligned_pointer_as_index %[[DY]]
// CALLS: %[[PDY:.*]] = llvm.inttoptr
// CALLS: memref.extract_aligned_pointer_as_index %[[LSE]]
// CALLS: %[[PLSE:.*]] = llvm.inttoptr
// CALLS: memref.extract_aligned_pointer_as_index %[[DQKV]]
// CALLS: %[[PDQKV:.*]] = llvm.inttoptr
// CALLS: memref.extract_aligned_pointer_as_index %[[DELTA]]
// CALLS: %[[PDELTA:.*]] = llvm.inttoptr
// CALLS: call @loom_rt_attention_grad(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[PQKV]], %[[POUT]], %[[PDY]], %[[PLSE]], %[[PDQKV]], %[[PDELTA]]) : (i32, i64, i64, i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CALLS: return %[[DQKV]]
func.func @backward(%dy: tensor<2x3x8xf32>, %qkv: tensor<2x3x24xf32>, %out: tensor<2x3x8xf32>, %lse: tensor<2x2x3xf32>) -> tensor<2x3x24xf32> {
  %g = loom.causal_attention_grad %dy, %qkv, %out, %lse {num_heads = 2 : i64} : (tensor<2x3x8xf32>, tensor<2x3x24xf32>, tensor<2x3x8xf32>, tensor<2x2x3xf32>) -> tensor<2x3x24xf32>
  return %g : tensor<2x3x24xf32>
}

// -----

// With attention-query-sums (the cuda target), a gradient stored in bf16 is
// marked query_sums, and its scratch holds the query gradient's f32 sums
// past the 12 queries' dot products: 12 + 12 x 4 channels. f32 storage
// (above) is left unmarked, its scratch the dot products alone.
// MARKED-LABEL: func.func @backward(
// MARKED: loom.causal_attention_grad {{.*}} {num_heads = 2 : i64} : (tensor<2x3x8xf32>
// MARKED-LABEL: func.func @backward_bf16(
// MARKED: loom.causal_attention_grad {{.*}} {num_heads = 2 : i64, query_sums} : (tensor<2x3x8xbf16>
// SUMS-LABEL: func.func @backward_bf16(
// SUMS: memref.alloc() {{.*}} : memref<60xf32>
// SUMS: call @loom_rt_attention_grad(
func.func @backward_bf16(%dy: tensor<2x3x8xbf16>, %qkv: tensor<2x3x24xbf16>, %out: tensor<2x3x8xbf16>, %lse: tensor<2x2x3xf32>) -> tensor<2x3x24xbf16> {
  %g = loom.causal_attention_grad %dy, %qkv, %out, %lse {num_heads = 2 : i64} : (tensor<2x3x8xbf16>, tensor<2x3x24xbf16>, tensor<2x3x8xbf16>, tensor<2x2x3xf32>) -> tensor<2x3x24xbf16>
  return %g : tensor<2x3x24xbf16>
}

// -----

// A slice of a larger buffer (a layer loop's stacked activations) is copied
// out whole before the call, which takes contiguous buffers.
// CALLS-LABEL: func.func @strided(
// CALLS: %[[VIEW:.*]] = memref.subview
// CALLS: %[[COPY:.*]] = memref.alloc() {{.*}} : memref<1x3x12xf32>
// CALLS: memref.copy %[[VIEW]], %[[COPY]]
// CALLS: call @loom_rt_attention(
func.func @strided(%qkv: tensor<1x3x24xf32>) -> tensor<1x3x4xf32> {
  %half = tensor.extract_slice %qkv[0, 0, 0] [1, 3, 12] [1, 1, 1] : tensor<1x3x24xf32> to tensor<1x3x12xf32>
  %y, %lse = loom.causal_attention %half {num_heads = 1 : i64} : tensor<1x3x12xf32> -> tensor<1x3x4xf32>, tensor<1x1x3xf32>
  return %y : tensor<1x3x4xf32>
}

// -----

// Grouped-query attention (4 query heads of 2 channels in 2 groups: [2, 4,
// 2] channels a token) stays grouped where the kernels read the groups
// (the CPU's), the call's fifth argument the groups. Without
// (fused-attention-grouped-heads=0, the GPU's), each group's key and value
// are repeated for its query heads first, and the gradient of every head's
// is summed back into the groups.
// LINALG-LABEL: func.func @grouped(
// LINALG: loom.causal_attention %{{.*}} {kv_heads = 2 : i64, num_heads = 4 : i64} : tensor<2x3x16xf32>
// LINALG: loom.causal_attention_grad {{.*}} {kv_heads = 2 : i64, num_heads = 4 : i64} : {{.*}} -> tensor<2x3x16xf32>
// CALLS-LABEL: func.func @grouped(
// CALLS: %[[H:.*]] = arith.constant 4 : i64
// CALLS-NEXT: %[[G:.*]] = arith.constant 2 : i64
// CALLS-NEXT: %[[D:.*]] = arith.constant 2 : i64
// CALLS: call @loom_rt_attention(%{{.*}}, %{{.*}}, %{{.*}}, %[[H]], %[[G]], %[[D]],
// CALLS: arith.constant 4 : i64
// CALLS-NEXT: %[[G2:.*]] = arith.constant 2 : i64
// CALLS: call @loom_rt_attention_grad(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[G2]], %{{.*}},
// EXPANDED-LABEL: func.func @grouped(
// EXPANDED: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x3x3x2x2x2xf32>)
// EXPANDED: %[[ALL:.*]] = tensor.collapse_shape {{.*}} into tensor<2x3x24xf32>
// EXPANDED: loom.causal_attention %[[ALL]] {num_heads = 4 : i64} : tensor<2x3x24xf32>
// EXPANDED: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x3x3x2x2x2xf32>)
// EXPANDED: %[[ALL2:.*]] = tensor.collapse_shape {{.*}} into tensor<2x3x24xf32>
// EXPANDED: loom.causal_attention_grad %{{.*}}, %[[ALL2]], %{{.*}}, %{{.*}} {num_heads = 4 : i64} : {{.*}} -> tensor<2x3x24xf32>
// EXPANDED: linalg.generic {{.*}} ins(%{{.*}} : tensor<2x3x3x2x2x2xf32>) outs(%{{.*}} : tensor<2x3x2x4x2xf32>)
func.func @grouped(%qkv: tensor<2x3x16xf32>, %dy: tensor<2x3x8xf32>) -> tensor<2x3x16xf32> {
  %y, %lse = loom.causal_attention %qkv {num_heads = 4 : i64, kv_heads = 2 : i64} : tensor<2x3x16xf32> -> tensor<2x3x8xf32>, tensor<2x4x3xf32>
  %g = loom.causal_attention_grad %dy, %qkv, %y, %lse {num_heads = 4 : i64, kv_heads = 2 : i64} : (tensor<2x3x8xf32>, tensor<2x3x16xf32>, tensor<2x3x8xf32>, tensor<2x4x3xf32>) -> tensor<2x3x16xf32>
  return %g : tensor<2x3x16xf32>
}
