// RUN: loom-opt %s --loom-lower-to-linalg="fused-attention=0 sorted-token-gradient=0" --split-input-file --verify-diagnostics | FileCheck %s
// RUN: loom-opt %s --loom-lower-to-linalg="fused-attention=0 sorted-token-gradient=0 embedding-row-blocks=3" --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=BLOCKS
// RUN: loom-opt %s --loom-lower-to-linalg="fused-attention=0" --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=SORTED
// RUN: not loom-opt %s --loom-lower-to-linalg="embedding-row-blocks=0" --split-input-file 2>&1 | FileCheck %s --check-prefix=BADBLOCKS
// RUN: loom-opt %s --loom-lower-to-linalg="fused-attention=0 runtime-softmax-stats=1" --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=STATS
// BADBLOCKS: embedding-row-blocks must be at least 1, got 0
// Attention as loops (fused-attention=0); the fused form is
// fused-attention.mlir.

// A linear map is a GEMM reading the (out, in) weight transposed, into
// zeros (a GEMM that overwrites its output), and the bias added after it
// in the output's shape, in place.
// CHECK-LABEL: func.func @linear(
// CHECK-SAME: %{{.*}}: tensor<2x3x4xf32>, %[[W:.*]]: tensor<5x4xf32>, %[[B:.*]]: tensor<5xf32>)
// CHECK: %[[ROWS:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : tensor<2x3x4xf32> into tensor<6x4xf32>
// CHECK: %[[ZEROS:.*]] = linalg.fill {{.*}} -> tensor<6x5xf32>
// CHECK: %[[MM:.*]] = linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[ROWS]], %[[W]] : tensor<6x4xf32>, tensor<5x4xf32>) outs(%[[ZEROS]] : tensor<6x5xf32>)
// CHECK: %[[Y:.*]] = tensor.expand_shape %[[MM]]
// CHECK: %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[ALL:[a-z0-9]+]], #[[LAST:[a-z0-9]+]], #[[ALL]]], {{.*}} ins(%[[Y]], %[[B]] : tensor<2x3x5xf32>, tensor<5xf32>) outs(%[[Y]] : tensor<2x3x5xf32>)
// CHECK: arith.addf
// CHECK: return %[[SUM]]
func.func @linear(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>, %b: tensor<5xf32>) -> tensor<2x3x5xf32> {
  %y = loom.linear %x, %w, %b : (tensor<2x3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// CHECK-LABEL: func.func @adamw(
// CHECK: math.powf
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<4xf32>) outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK: math.sqrt
// CHECK: linalg.yield
// CHECK-NOT: loom.
func.func @adamw(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<f32>, %s: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0:3 = loom.adamw %p, %g, %m, %v, %lr, %t, %s {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return %0#0, %0#1, %0#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// A sum a loop carries from a constant, which nothing else reads (the
// gradient sums over micro-batches), is written in place so that
// bufferization updates one buffer; a sum carried from an argument is not:
// the caller may read the argument again. The constant zeros become a fill,
// which writes that buffer, where a constant would be a global of the
// host's memory to copy from.
// CHECK-LABEL: func.func @carried_sums(
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<4xf32>, %[[G:[a-z0-9]+]]: tensor<4xf32>
// CHECK-NOT: arith.constant dense
// CHECK: %[[C0:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[ZERO:.*]] = linalg.fill ins(%[[C0]] : f32) outs(%{{.*}} : tensor<4xf32>) -> tensor<4xf32>
// CHECK: scf.for {{.*}} iter_args(%[[OWN:.*]] = %[[ZERO]], %[[ARG:.*]] = %[[A]])
// CHECK: linalg.generic {{.*}} ins(%[[G]] : tensor<4xf32>) outs(%[[OWN]] : tensor<4xf32>)
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[ARG]], %[[G]] : tensor<4xf32>, tensor<4xf32>) outs(%[[E]] : tensor<4xf32>)
func.func @carried_sums(%a: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant dense<0.0> : tensor<4xf32>
  %r:2 = scf.for %i = %c0 to %c2 step %c1 iter_args(%own = %zero, %arg = %a) -> (tensor<4xf32>, tensor<4xf32>) {
    %s = loom.add %own, %g : tensor<4xf32>
    %t = loom.add %arg, %g : tensor<4xf32>
    scf.yield %s, %t : tensor<4xf32>, tensor<4xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
}

// The token table's gradient is a scatter-add. By default
// (sorted-token-gradient) it is loom.scatter_add_rows of the [B*T, C]
// gradient's rows, by the B*T tokens, into zeros, which the runtime
// computes; the position table's is a loop over the batch either way.
// SORTED-LABEL: func.func @embedding_grad(
// SORTED-SAME: %[[DY:[a-z0-9]+]]: tensor<2x3x4xf32>, %[[TOK:[a-z0-9]+]]: tensor<2x3xi32>)
// SORTED-DAG: %[[ROWS:.*]] = tensor.collapse_shape %[[DY]] {{\[\[}}0, 1], [2]] : tensor<2x3x4xf32> into tensor<6x4xf32>
// SORTED-DAG: %[[IDS:.*]] = tensor.collapse_shape %[[TOK]] {{\[\[}}0, 1]] : tensor<2x3xi32> into tensor<6xi32>
// SORTED-DAG: %[[ZEROS:.*]] = linalg.fill {{.*}} -> tensor<8x4xf32>
// SORTED: %[[WTE:.*]] = loom.scatter_add_rows %[[ROWS]], %[[IDS]] into %[[ZEROS]] : tensor<6x4xf32>, tensor<6xi32> -> tensor<8x4xf32>
// SORTED-NOT: scf.for
// SORTED: return %[[WTE]], %{{.*}}
// With sorted-token-gradient=0, each of the C columns in parallel, a loop
// over the B*T tokens adding into the token's row.
// CHECK-LABEL: func.func @embedding_grad(
// CHECK: scf.forall (%[[C:.*]]) in (4) shared_outs(%[[ALL:.*]] = %{{.*}}) -> (tensor<8x4xf32>)
// CHECK: %[[COL:.*]] = tensor.extract_slice %[[ALL]][0, %[[C]]] [8, 1] [1, 1] : tensor<8x4xf32> to tensor<8xf32>
// CHECK: scf.for %[[I:.*]] = %c0 to %c6 step %c1 iter_args(%[[ACC:.*]] = %[[COL]]) -> (tensor<8xf32>)
// CHECK: %[[TOK:.*]] = tensor.extract %{{.*}}[%[[I]]] : tensor<6xi32>
// CHECK: %[[ROW:.*]] = arith.index_cast %[[TOK]]
// CHECK: %[[G:.*]] = tensor.extract %{{.*}}[%[[I]], %[[C]]] : tensor<6x4xf32>
// CHECK: %[[OLD:.*]] = tensor.extract %[[ACC]][%[[ROW]]]
// CHECK: %[[SUM:.*]] = arith.addf %[[G]], %[[OLD]]
// CHECK: tensor.insert %[[SUM]] into %[[ACC]][%[[ROW]]]
// CHECK: tensor.parallel_insert_slice %{{.*}} into %[[ALL]][0, %[[C]]] [8, 1] [1, 1]
// With embedding-row-blocks=3, the 8 rows split into 2 blocks of 4 (the
// largest divisor up to 3), interleaved: block k holds rows k, k + 2, ...
// A (block, column) pair per iteration, which walks every token and adds
// those of its block's rows, in token order.
// BLOCKS-LABEL: func.func @embedding_grad(
// BLOCKS: scf.forall (%[[K:.*]], %[[C:.*]]) in (2, 4) shared_outs(%[[ALL:.*]] = %{{.*}}) -> (tensor<8x4xf32>)
// BLOCKS: %[[COL:.*]] = tensor.extract_slice %[[ALL]][%[[K]], %[[C]]] [4, 1] [2, 1] : tensor<8x4xf32> to tensor<4xf32>
// BLOCKS: scf.for %[[I:.*]] = %c0 to %c6 step %c1 iter_args(%[[ACC:.*]] = %[[COL]]) -> (tensor<4xf32>)
// BLOCKS: %[[TOK:.*]] = arith.index_cast
// BLOCKS: %[[REM:.*]] = arith.remui %[[TOK]], %c2
// BLOCKS: %[[MINE:.*]] = arith.cmpi eq, %[[REM]], %[[K]]
// BLOCKS: %[[ROW:.*]] = arith.divui %[[TOK]], %c2
// BLOCKS: scf.if %[[MINE]] -> (tensor<4xf32>)
// BLOCKS: %[[G:.*]] = tensor.extract %{{.*}}[%[[I]], %[[C]]] : tensor<6x4xf32>
// BLOCKS: %[[OLD:.*]] = tensor.extract %[[ACC]][%[[ROW]]]
// BLOCKS: %[[SUM:.*]] = arith.addf %[[G]], %[[OLD]]
// BLOCKS: tensor.insert %[[SUM]] into %[[ACC]][%[[ROW]]]
// BLOCKS: } else {
// BLOCKS-NEXT: scf.yield %[[ACC]]
// BLOCKS: tensor.parallel_insert_slice %{{.*}} into %[[ALL]][%[[K]], %[[C]]] [4, 1] [2, 1]
func.func @embedding_grad(%dy: tensor<2x3x4xf32>, %tokens: tensor<2x3xi32>) -> (tensor<8x4xf32>, tensor<5x4xf32>) {
  %a, %b = loom.embedding_grad %dy, %tokens : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> (tensor<8x4xf32>, tensor<5x4xf32>)
  return %a, %b : tensor<8x4xf32>, tensor<5x4xf32>
}

// A tied head's gradient starts the scatter instead of zeros.
// SORTED-LABEL: func.func @embedding_grad_into(
// SORTED-SAME: %[[HEAD:[a-z0-9]+]]: tensor<8x4xf32>)
// SORTED: loom.scatter_add_rows %{{.*}}, %{{.*}} into %[[HEAD]] :
// CHECK-LABEL: func.func @embedding_grad_into(
// CHECK-SAME: %{{.*}}: tensor<2x3x4xf32>, %{{.*}}: tensor<2x3xi32>, %[[HEAD:.*]]: tensor<8x4xf32>)
// CHECK: scf.forall (%{{.*}}) in (4) shared_outs(%{{.*}} = %[[HEAD]])
// BLOCKS-LABEL: func.func @embedding_grad_into(
// BLOCKS-SAME: %{{.*}}: tensor<2x3x4xf32>, %{{.*}}: tensor<2x3xi32>, %[[HEAD:.*]]: tensor<8x4xf32>)
// BLOCKS: scf.forall (%{{.*}}, %{{.*}}) in (2, 4) shared_outs(%{{.*}} = %[[HEAD]])
func.func @embedding_grad_into(%dy: tensor<2x3x4xf32>, %tokens: tensor<2x3xi32>, %head: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<5x4xf32>) {
  %a, %b = loom.embedding_grad %dy, %tokens into %head : (tensor<2x3x4xf32>, tensor<2x3xi32>, tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<5x4xf32>)
  return %a, %b : tensor<8x4xf32>, tensor<5x4xf32>
}

// A part of the vocabulary (tensor parallelism): the runtime's scatter
// skips another part's tokens; in the loops, a token is first made a row of
// the part (or row 0, adding zeros, for another part's), then sorted into
// its block of the part's rows.
// SORTED-LABEL: func.func @embedding_grad_part(
// SORTED-SAME: %[[START:[a-z0-9]+]]: index)
// SORTED: loom.scatter_add_rows %{{.*}}, %{{.*}} into %{{.*}} row_start %[[START]] :
// CHECK-LABEL: func.func @embedding_grad_part(
// CHECK: scf.forall (%{{.*}}) in (4)
// BLOCKS-LABEL: func.func @embedding_grad_part(
// BLOCKS-SAME: %[[START:[^:]*]]: index)
// BLOCKS: scf.forall (%[[K:.*]], %[[C:.*]]) in (2, 4)
// BLOCKS: scf.for
// BLOCKS: %[[TOK:.*]] = arith.index_cast
// BLOCKS: %[[PARTOFF:.*]] = arith.subi %[[TOK]], %[[START]]
// BLOCKS: %[[HELD:.*]] = arith.cmpi ult, %[[PARTOFF]], %c8
// BLOCKS: %[[PARTROW:.*]] = arith.select %[[HELD]], %[[PARTOFF]], %c0
// BLOCKS: %[[REM:.*]] = arith.remui %[[PARTROW]], %c2
// BLOCKS: %[[MINE:.*]] = arith.cmpi eq, %[[REM]], %[[K]]
// BLOCKS: scf.if %[[MINE]]
// BLOCKS: %[[G:.*]] = tensor.extract
// BLOCKS: arith.select %[[HELD]], %[[G]], %{{.*}} : f32
func.func @embedding_grad_part(%dy: tensor<2x3x4xf32>, %tokens: tensor<2x3xi32>, %start: index) -> (tensor<8x4xf32>, tensor<5x4xf32>) {
  %a, %b = loom.embedding_grad %dy, %tokens vocab_start %start : (tensor<2x3x4xf32>, tensor<2x3xi32>, index) -> (tensor<8x4xf32>, tensor<5x4xf32>)
  return %a, %b : tensor<8x4xf32>, tensor<5x4xf32>
}

// 2^31 tokens are more than the runtime's int32 positions hold: the loops,
// which compute the same sums.
// SORTED-LABEL: func.func @embedding_grad_huge(
// SORTED-NOT: loom.scatter_add_rows
// SORTED: scf.forall (%{{.*}}) in (4)
func.func @embedding_grad_huge(%dy: tensor<2147483648x1x4xf32>, %tokens: tensor<2147483648x1xi32>) -> (tensor<8x4xf32>, tensor<5x4xf32>) {
  %a, %b = loom.embedding_grad %dy, %tokens : (tensor<2147483648x1x4xf32>, tensor<2147483648x1xi32>) -> (tensor<8x4xf32>, tensor<5x4xf32>)
  return %a, %b : tensor<8x4xf32>, tensor<5x4xf32>
}

// Mixed precision: the runtime's scatter reads the bf16 gradient as stored
// (no loop widens it to f32), into an f32 table rounded after; the position
// table's sum reads it widened.
// SORTED-LABEL: func.func @embedding_grad_bf16(
// SORTED-SAME: %[[DY:[a-z0-9]+]]: tensor<2x3x4xbf16>
// SORTED: %[[ROWS:.*]] = tensor.collapse_shape %[[DY]] {{\[\[}}0, 1], [2]] : tensor<2x3x4xbf16> into tensor<6x4xbf16>
// SORTED: %[[WTE:.*]] = loom.scatter_add_rows %[[ROWS]], %{{.*}} into %{{.*}} : tensor<6x4xbf16>, tensor<6xi32> -> tensor<8x4xf32>
// SORTED: linalg.generic {{.*}} ins(%[[WTE]] : tensor<8x4xf32>) outs(%{{.*}} : tensor<8x4xbf16>)
// SORTED: arith.truncf
func.func @embedding_grad_bf16(%dy: tensor<2x3x4xbf16>, %tokens: tensor<2x3xi32>) -> (tensor<8x4xbf16>, tensor<5x4xbf16>) {
  %a, %b = loom.embedding_grad %dy, %tokens : (tensor<2x3x4xbf16>, tensor<2x3xi32>) -> (tensor<8x4xbf16>, tensor<5x4xbf16>)
  return %a, %b : tensor<8x4xbf16>, tensor<5x4xbf16>
}

// A layer norm's gradient: the forward pass's statistics (the mean and the
// reciprocal deviation, not computed again), then three loops that each
// compute xhat = (x - mean) * rstd and dxhat = dy * weight again from what
// they read rather than reading them back: the weight's and bias's column
// sums, the rows' sums of dxhat and of dxhat * xhat (one loop), and dx.
// CHECK-LABEL: func.func @layer_norm_grad(
// CHECK-SAME: %[[DY3:.*]]: tensor<2x3x4xf32>, %[[X3:.*]]: tensor<2x3x4xf32>, %[[W:.*]]: tensor<4xf32>, %[[MEAN2:.*]]: tensor<2x3xf32>, %[[RSTD2:.*]]: tensor<2x3xf32>)
// CHECK-NOT: tensor.empty() : tensor<6x4xf32>
// CHECK-NOT: linalg.generic
// CHECK-DAG: %[[MEAN:.*]] = tensor.collapse_shape %[[MEAN2]] {{\[\[}}0, 1]] : tensor<2x3xf32> into tensor<6xf32>
// CHECK-DAG: %[[RSTD:.*]] = tensor.collapse_shape %[[RSTD2]] {{\[\[}}0, 1]] : tensor<2x3xf32> into tensor<6xf32>
// CHECK-NOT: linalg.generic
// CHECK: %[[PARAMS:.*]]:2 = linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]} ins(%[[DY:.*]], %[[X:.*]], %[[MEAN]], %[[RSTD]] : tensor<6x4xf32>, tensor<6x4xf32>, tensor<6xf32>, tensor<6xf32>)
// CHECK: %[[SUMS:.*]]:2 = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%[[DY]], %[[W]], %[[X]], %[[MEAN]], %[[RSTD]] :
// CHECK-NEXT: ^bb0(%[[G:.*]]: f32, %[[WV:.*]]: f32, %[[XV:.*]]: f32, %[[M:.*]]: f32, %[[R:.*]]: f32, %[[SD:.*]]: f32, %[[SDX:.*]]: f32):
// CHECK-NEXT: %[[DXHAT:.*]] = arith.mulf %[[G]], %[[WV]] : f32
// CHECK-NEXT: %[[C:.*]] = arith.subf %[[XV]], %[[M]] : f32
// CHECK-NEXT: %[[XHAT:.*]] = arith.mulf %[[C]], %[[R]] : f32
// CHECK-NEXT: %[[A:.*]] = arith.addf %[[SD]], %[[DXHAT]] : f32
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[DXHAT]], %[[XHAT]] : f32
// CHECK-NEXT: %[[B:.*]] = arith.addf %[[SDX]], %[[P]] : f32
// CHECK-NEXT: linalg.yield %[[A]], %[[B]] : f32, f32
// CHECK: %[[DX:.*]] = linalg.generic {{.*}} ins(%[[DY]], %[[W]], %[[X]], %[[MEAN]], %[[RSTD]], %[[SUMS]]#0, %[[SUMS]]#1 :
// CHECK: %[[BACK:.*]] = tensor.expand_shape %[[DX]]
// CHECK: return %[[BACK]], %[[PARAMS]]#0, %[[PARAMS]]#1
func.func @layer_norm_grad(%dy: tensor<2x3x4xf32>, %x: tensor<2x3x4xf32>, %w: tensor<4xf32>, %mean: tensor<2x3xf32>, %rstd: tensor<2x3xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %dx, %dw, %db = loom.layer_norm_grad %dy, %x, %w, %mean, %rstd : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %dx, %dw, %db : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>
}

// Attention's products are one GEMM per (batch, head) pair on strided views,
// the pairs in parallel: scores Q K^T into [B, NH, T, T], then the
// probabilities times V into the [B, T, NH, D] output.
// CHECK-LABEL: func.func @attention(
// CHECK: scf.forall (%[[B:.*]], %[[H:.*]]) in (2, 2) shared_outs(%[[S:.*]] = %{{.*}}) -> (tensor<2x2x3x3xf32>)
// CHECK: tensor.extract_slice %[[S]][%[[B]], %[[H]], 0, 0] [1, 1, 3, 3] [1, 1, 1, 1] : tensor<2x2x3x3xf32> to tensor<3x3xf32>
// CHECK: linalg.matmul {{.*}} : tensor<3x2xf32>, tensor<3x2xf32>) outs(%{{.*}} : tensor<3x3xf32>)
// CHECK: tensor.parallel_insert_slice %{{.*}} into %[[S]][%[[B]], %[[H]], 0, 0]
// The row maximum masks the scores above the diagonal to -inf and reduces
// with maxnumf, so that LLVM vectorizes it.
// CHECK: iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK-NEXT: ^bb0(%[[SCORE:.*]]: f32, %[[MAX:.*]]: f32):
// CHECK-NEXT: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[MASKED:.*]] = arith.select %{{.*}}, %[[SCORE]], %[[NEGINF]] : f32
// CHECK-NEXT: arith.maxnumf %[[MASKED]], %[[MAX]] : f32
// CHECK: math.exp
// Each query's log-sum-exp: its scaled maximum plus the log of its sum.
// CHECK: %[[LSE:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]} ins(%{{.*}}, %{{.*}} : tensor<2x2x3xf32>, tensor<2x2x3xf32>)
// CHECK: math.log
// CHECK: scf.forall {{.*}} -> (tensor<2x3x2x2xf32>)
// CHECK: linalg.matmul {{.*}} : tensor<3x3xf32>, tensor<3x2xf32>) outs(%{{.*}} : tensor<3x2xf32>)
// CHECK: %[[Y:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0], [1], [2, 3]] : tensor<2x3x2x2xf32> into tensor<2x3x4xf32>
// CHECK: return %[[Y]], %[[LSE]]
func.func @attention(%qkv: tensor<2x3x12xf32>) -> (tensor<2x3x4xf32>, tensor<2x2x3xf32>) {
  %y, %lse = loom.causal_attention %qkv {num_heads = 2 : i64} : tensor<2x3x12xf32> -> tensor<2x3x4xf32>, tensor<2x2x3xf32>
  return %y, %lse : tensor<2x3x4xf32>, tensor<2x2x3xf32>
}

// The gradient's probabilities come from the scores and the forward's
// log-sum-exp in one elementwise loop: no row maximum or sum again.
// CHECK-LABEL: func.func @attention_grad(
// CHECK-SAME: %[[LSE:[^:]*]]: tensor<2x2x3xf32>)
// CHECK-NOT: arith.maxnumf
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%{{.*}}, %[[LSE]] : tensor<2x2x3x3xf32>, tensor<2x2x3xf32>)
// CHECK-NOT: arith.maxnumf
// CHECK: return
func.func @attention_grad(%dy: tensor<2x3x4xf32>, %qkv: tensor<2x3x12xf32>, %out: tensor<2x3x4xf32>, %lse: tensor<2x2x3xf32>) -> tensor<2x3x12xf32> {
  %g = loom.causal_attention_grad %dy, %qkv, %out, %lse {num_heads = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x3x12xf32>, tensor<2x3x4xf32>, tensor<2x2x3xf32>) -> tensor<2x3x12xf32>
  return %g : tensor<2x3x12xf32>
}

// The loss's gradient is written over the logits: the elementwise loop
// reads each logit as its output's element, so that bufferization updates
// the logits' buffer in place instead of allocating a second one.
// CHECK-LABEL: func.func @cross_entropy_grad(
// CHECK-SAME: %{{.*}}: tensor<f32>, %[[LOGITS:.*]]: tensor<2x3x5xf32>
// CHECK: %[[ROWS:.*]] = tensor.collapse_shape %[[LOGITS]] {{\[\[}}0, 1], [2]] : tensor<2x3x5xf32> into tensor<6x5xf32>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<6xf32>, tensor<6xf32>, tensor<6xi32>) outs(%[[ROWS]] : tensor<6x5xf32>)
// CHECK-NEXT: ^bb0(%[[MAX:.*]]: f32, %[[SUM:.*]]: f32, %{{.*}}: i32, %[[LOGIT:.*]]: f32):
// CHECK: arith.subf %[[LOGIT]], %[[MAX]] : f32
func.func @cross_entropy_grad(%g: tensor<f32>, %logits: tensor<2x3x5xf32>, %targets: tensor<2x3xi32>) -> tensor<2x3x5xf32> {
  %d = loom.cross_entropy_grad %g, %logits, %targets {num_classes = 4 : i64} : (tensor<f32>, tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<2x3x5xf32>
  return %d : tensor<2x3x5xf32>
}

// With runtime-softmax-stats, the statistics of the loss and of its
// gradient are the runtime's, over the first num_classes columns of the
// logits as stored: bf16 ones are not widened for it (the loops that read
// them widen them as before). No loop computes a maximum.
// STATS-LABEL: func.func @runtime_softmax_stats(
// STATS: %[[ROWS:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : tensor<2x3x5xbf16> into tensor<6x5xbf16>
// STATS: %{{.*}}, %{{.*}} = loom.softmax_stats %[[ROWS]] {classes = 4 : i64} : tensor<6x5xbf16> -> tensor<6xf32>
// STATS-NOT: arith.maxnumf
// STATS: loom.softmax_stats %{{.*}} {classes = 4 : i64} : tensor<6x5xbf16> -> tensor<6xf32>
// STATS-NOT: arith.maxnumf
// STATS: return
func.func @runtime_softmax_stats(%g: tensor<f32>, %stored: tensor<2x3x5xbf16>, %targets: tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3x5xf32>) {
  %logits = loom.convert %stored : tensor<2x3x5xbf16> to tensor<2x3x5xf32>
  %l = loom.cross_entropy %logits, %targets {num_classes = 4 : i64} : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  %d = loom.cross_entropy_grad %g, %logits, %targets {num_classes = 4 : i64} : (tensor<f32>, tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<2x3x5xf32>
  return %l, %d : tensor<f32>, tensor<2x3x5xf32>
}

// A layer loop is an scf.for over the layers: slice l of each stacked
// operand in, slice l of each stacked result out; `reverse` counts down.
// CHECK-LABEL: func.func @scan(
// CHECK-SAME: %[[X:.*]]: tensor<2x4xf32>, %[[W:.*]]: tensor<3x4xf32>)
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<3x2x4xf32>
// CHECK: %[[LOOP:.*]]:2 = scf.for %[[I:.*]] = %c0 to %c3 step %c1 iter_args(%[[C:.*]] = %[[X]], %[[ST:.*]] = %[[EMPTY]])
// CHECK: %[[L:.*]] = arith.subi %c2, %[[I]] : index
// CHECK: %[[WL:.*]] = tensor.extract_slice %[[W]][%[[L]], 0] [1, 4] [1, 1] : tensor<3x4xf32> to tensor<4xf32>
// CHECK: linalg.generic
// CHECK: %[[NEXT:.*]] = tensor.insert_slice %[[C]] into %[[ST]][%[[L]], 0, 0] [1, 2, 4] [1, 1, 1] : tensor<2x4xf32> into tensor<3x2x4xf32>
// CHECK: scf.yield %{{.*}}, %[[NEXT]]
// CHECK: return %[[LOOP]]#0, %[[LOOP]]#1
func.func @scan(%x: tensor<2x4xf32>, %w: tensor<3x4xf32>) -> (tensor<2x4xf32>, tensor<3x2x4xf32>) {
  %r:2 = loom.scan carry(%x : tensor<2x4xf32>) over(%w : tensor<3x4xf32>) length = 3 reverse -> (tensor<2x4xf32>, tensor<3x2x4xf32>) {
  ^bb0(%c: tensor<2x4xf32>, %wl: tensor<4xf32>):
    %y = loom.gelu %c : tensor<2x4xf32>
    loom.yield %y, %c : tensor<2x4xf32>, tensor<2x4xf32>
  }
  return %r#0, %r#1 : tensor<2x4xf32>, tensor<3x2x4xf32>
}

// -----

// The gradient norm's sum of squares over two tensors: each one's rows
// summed side by side into one vector of partial sums (a [3, 4] value's 3
// rows, a vector's 1), which one reduction adds up in order.
// CHECK-LABEL: func.func @squares
// CHECK: %[[PW:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<3x4xf32>) outs(%{{.*}} : tensor<3xf32>)
// CHECK: %[[PB:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<1x4xf32>) outs(%{{.*}} : tensor<1xf32>)
// CHECK: %[[ALL:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[A:.*]] = tensor.insert_slice %[[PW]] into %[[ALL]][0] [3] [1]
// CHECK: %[[B:.*]] = tensor.insert_slice %[[PB]] into %[[A]][3] [1] [1]
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[B]] : tensor<4xf32>) outs(%{{.*}} : tensor<f32>)
func.func @squares(%w: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<f32> {
  %s = loom.sum_squares %w, %b : tensor<3x4xf32>, tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @half(%x: tensor<4xf16>) -> tensor<f32> {
  // expected-error@+1 {{is lowered for f32 tensors only, got 'tensor<4xf16>'}}
  %y = loom.sum_squares %x : tensor<4xf16> -> tensor<f32>
  return %y : tensor<f32>
}

// -----

// A layer's op on bf16 storage computes in f32: its operand read widened,
// its result rounded back.
// CHECK-LABEL: func.func @narrow
// CHECK: %[[WIDE:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<2x4xbf16>) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: %[[G:.*]] = linalg.generic {{.*}} ins(%[[WIDE]] : tensor<2x4xf32>) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[Y:.*]] = loom.scalar.gelu %[[IN]] : f32
// CHECK-NEXT: linalg.yield %[[Y]] : f32
// CHECK: %[[OUT:.*]] = linalg.generic {{.*}} ins(%[[G]] : tensor<2x4xf32>) outs(%{{.*}} : tensor<2x4xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: return %[[OUT]]
func.func @narrow(%x: tensor<2x4xbf16>) -> tensor<2x4xbf16> {
  %y = loom.gelu %x : tensor<2x4xbf16>
  return %y : tensor<2x4xbf16>
}

// -----

// The GELU and the gradient through it stay one op each in the loop's body
// (loom-expand-scalar-functions builds their arithmetic), the gradient's
// operands in loom.gelu_grad's order.
// CHECK-LABEL: func.func @gelu_grad
// CHECK-SAME: %[[G:[^:]*]]: tensor<2x4xf32>, %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[G]], %[[X]] : tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK-NEXT: ^bb0(%[[GE:[^:]*]]: f32, %[[XE:[^:]*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[D:.*]] = loom.scalar.gelu_grad %[[GE]], %[[XE]] : f32
// CHECK-NEXT: linalg.yield %[[D]] : f32
func.func @gelu_grad(%g: tensor<2x4xf32>, %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %d = loom.gelu_grad %g, %x : tensor<2x4xf32>
  return %d : tensor<2x4xf32>
}

// -----

// A scaled conversion multiplies in f32 before it rounds; the loss's seed
// is 1, a fill.
// CHECK-LABEL: func.func @unscale
// CHECK: %[[S:.*]] = tensor.extract %{{.*}}[] : tensor<f32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<3xf16>) outs(%{{.*}} : tensor<3xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f16, %{{.*}}: f32):
// CHECK-NEXT: %[[E:.*]] = arith.extf %[[IN]] : f16 to f32
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[E]], %[[S]] : f32
// CHECK-NEXT: linalg.yield %[[M]] : f32
// CHECK: %[[C1:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[ONE:.*]] = linalg.fill ins(%[[C1]] : f32) outs(%{{.*}} : tensor<f32>) -> tensor<f32>
// CHECK: return %{{.*}}, %[[ONE]]
func.func @unscale(%g: tensor<3xf16>, %s: tensor<f32>) -> (tensor<3xf32>, tensor<f32>) {
  %r = loom.convert %g scale %s : tensor<3xf16> to tensor<3xf32>
  %one = loom.seed : tensor<f32>
  return %r, %one : tensor<3xf32>, tensor<f32>
}

// -----

// A skipped update yields what it read.
// CHECK-LABEL: func.func @skipped
// CHECK: %[[SKIP:.*]] = tensor.extract %{{.*}}[] : tensor<i1>
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[G:.*]]: f32, %[[P:.*]]: f32, %[[B:.*]]: f32):
// CHECK: %[[NP:.*]] = arith.subf %[[P]]
// CHECK: %[[KP:.*]] = arith.select %[[SKIP]], %[[P]], %[[NP]] : f32
// CHECK: %[[KB:.*]] = arith.select %[[SKIP]], %[[B]], %{{.*}} : f32
// CHECK: linalg.yield %[[KP]], %[[KB]] : f32, f32
func.func @skipped(%p: tensor<4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>, %lr: tensor<f32>, %scale: tensor<f32>, %skip: tensor<i1>) -> (tensor<4xf32>, tensor<4xf32>) {
  %np, %nb = loom.sgd %p, %g, %b, %lr, %scale skip if %skip {momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  return %np, %nb : tensor<4xf32>, tensor<4xf32>
}

// -----

// The timeline's marks become calls of the runtime, in place; the messages
// stay for bufferization.
// CHECK: func.func private @loom_rt_trace_end(i32)
// CHECK: func.func private @loom_rt_trace_begin(i32, i64, i64)
// CHECK-LABEL: func.func @trace(
// CHECK: %[[F:.*]] = arith.constant 0 : i32
// CHECK: %[[MB:.*]] = arith.constant 3 : i64
// CHECK: %[[C:.*]] = arith.constant 1 : i64
// CHECK: call @loom_rt_trace_begin(%[[F]], %[[MB]], %[[C]]) : (i32, i64, i64) -> ()
// CHECK: loom.send
// CHECK: call @loom_rt_trace_end(%{{.*}}) : (i32) -> ()
func.func @trace(%x: tensor<4xf32>) {
  loom.trace_begin forward micro_batch 3 chunk 1
  loom.send %x to 1 tag 0 : tensor<4xf32>
  loom.trace_end forward
  return
}

// -----

// A layer norm returns its rows' statistics with the input's leading
// dimensions, for its gradient to read back.
// CHECK-LABEL: func.func @layer_norm(
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<6x4xf32>)
// CHECK: %[[CENTRED:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[SUM]] : tensor<6x4xf32>, tensor<6xf32>)
// CHECK: %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<6xf32>)
// CHECK: %[[RSTD:.*]] = linalg.generic {{.*}} ins(%[[CENTRED]] : tensor<6xf32>)
// CHECK: math.sqrt
// CHECK: %[[Y:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[MEAN]], %[[RSTD]], %{{.*}}, %{{.*}} : tensor<6x4xf32>, tensor<6xf32>, tensor<6xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-DAG: %[[Y3:.*]] = tensor.expand_shape %[[Y]] {{\[\[}}0, 1], [2]] {{.*}} : tensor<6x4xf32> into tensor<2x3x4xf32>
// CHECK-DAG: %[[MEAN2:.*]] = tensor.expand_shape %[[MEAN]] {{\[\[}}0, 1]] {{.*}} : tensor<6xf32> into tensor<2x3xf32>
// CHECK-DAG: %[[RSTD2:.*]] = tensor.expand_shape %[[RSTD]] {{\[\[}}0, 1]] {{.*}} : tensor<6xf32> into tensor<2x3xf32>
// CHECK: return %[[Y3]], %[[MEAN2]], %[[RSTD2]]
func.func @layer_norm(%x: tensor<2x3x4xf32>, %w: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %y, %mean, %rstd = loom.layer_norm %x, %w, %b {epsilon = 1.0e-5 : f64} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
  return %y, %mean, %rstd : tensor<2x3x4xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// RMSNorm: one reduction for the mean square, its reciprocal root, then the
// scaling by it and the weight.
// CHECK-LABEL: func.func @rms_norm(
// CHECK: %[[SQ:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<6x4xf32>)
// CHECK: %[[RSTD:.*]] = linalg.generic {{.*}} ins(%[[SQ]] : tensor<6xf32>)
// CHECK: math.sqrt
// CHECK: %[[Y:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[RSTD]], %{{.*}} : tensor<6x4xf32>, tensor<6xf32>, tensor<4xf32>)
func.func @rms_norm(%x: tensor<2x3x4xf32>, %w: tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3xf32>) {
  %y, %rstd = loom.rms_norm %x, %w {epsilon = 1.0e-5 : f64} : (tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3xf32>)
  return %y, %rstd : tensor<2x3x4xf32>, tensor<2x3xf32>
}

// -----

// Rotary positions: a [T, D/2] table of each angle's cosine and sine, then
// one generic over a view [B, T, 3, heads, 2, D/2] of the fused tensor that
// reads both halves of each head (constant indices 0 and 1 of the fifth
// dimension) and leaves the values (third index 2) as they are.
// CHECK-LABEL: func.func @rotary(
// CHECK: %[[VIEW:.*]] = tensor.expand_shape %{{.*}} {{\[\[}}0], [1], [2, 3, 4, 5]] {{.*}} : tensor<2x4x24xf32> into tensor<2x4x3x2x2x2xf32>
// CHECK: %[[TABLES:.*]]:2 = linalg.generic
// CHECK: math.powf
// CHECK: math.cos
// CHECK: math.sin
// CHECK: linalg.generic {{.*}} ins(%[[VIEW]], %[[VIEW]], %[[TABLES]]#0, %[[TABLES]]#1 : {{.*}})
// CHECK: arith.negf
// CHECK: tensor.collapse_shape {{.*}} into tensor<2x4x24xf32>
func.func @rotary(%qkv: tensor<2x4x24xf32>) -> tensor<2x4x24xf32> {
  %r = loom.rotary %qkv {num_heads = 2 : i64, theta = 10000.0 : f64, inverse} : tensor<2x4x24xf32>
  return %r : tensor<2x4x24xf32>
}

// -----

// Grouped, the view is [B, T, groups, R + 2, 2, D/2] (2 groups of 2 query
// heads, a key and a value, heads of 4 channels) and the values are slot
// R + 1 = 3 of the fourth dimension.
// CHECK-LABEL: func.func @grouped_rotary(
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0], [1], [2, 3, 4, 5]] {{.*}} : tensor<2x4x32xf32> into tensor<2x4x2x4x2x2xf32>
// CHECK: linalg.generic
// CHECK: linalg.generic
// CHECK: %[[SLOT:.*]] = linalg.index 3 : index
// CHECK: arith.cmpi eq, %[[SLOT]], %c3 : index
func.func @grouped_rotary(%qkv: tensor<2x4x32xf32>) -> tensor<2x4x32xf32> {
  %r = loom.rotary %qkv {num_heads = 4 : i64, kv_heads = 2 : i64, theta = 10000.0 : f64} : tensor<2x4x32xf32>
  return %r : tensor<2x4x32xf32>
}

// -----

// SwiGLU and its gradient: elementwise, the gradient's two results from
// one generic.
// CHECK-LABEL: func.func @swiglu(
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK: math.exp
// CHECK: %{{.*}}:2 = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
func.func @swiglu(%g: tensor<2x8xf32>, %u: tensor<2x8xf32>, %dy: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %y = loom.swiglu %g, %u : tensor<2x8xf32>
  %dg, %du = loom.swiglu_grad %dy, %g, %u : tensor<2x8xf32>
  return %y, %dg, %du : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// Splats of integers and booleans become fills too; a tensor of several
// values stays a constant (a step has none).
// CHECK-LABEL: func.func @constants
// CHECK-DAG: %[[T:.*]] = arith.constant true
// CHECK-DAG: %[[I:.*]] = arith.constant 7 : i32
// CHECK-DAG: linalg.fill ins(%[[T]] : i1) outs(%{{.*}} : tensor<2xi1>) -> tensor<2xi1>
// CHECK-DAG: linalg.fill ins(%[[I]] : i32) outs(%{{.*}} : tensor<3xi32>) -> tensor<3xi32>
// CHECK-DAG: arith.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
func.func @constants() -> (tensor<2xi1>, tensor<3xi32>, tensor<2xf32>) {
  %b = arith.constant dense<true> : tensor<2xi1>
  %i = arith.constant dense<7> : tensor<3xi32>
  %f = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  return %b, %i, %f : tensor<2xi1>, tensor<3xi32>, tensor<2xf32>
}
