// RUN: loom-opt %s --loom-fuse-elementwise --split-input-file | FileCheck %s

#id = affine_map<(d0) -> (d0)>

// A bf16 tensor widened for the one loop that reads it: one loop, which
// widens each element as it reads it.
// CHECK-LABEL: func.func @widen_into_consumer(
// CHECK-SAME: %[[X:.*]]: tensor<8xbf16>, %[[Y:.*]]: tensor<8xf32>
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[Y]] : tensor<8xbf16>, tensor<8xf32>)
// CHECK: arith.extf
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]
func.func @widen_into_consumer(%x: tensor<8xbf16>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %e0 = tensor.empty() : tensor<8xf32>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xbf16>) outs(%e0 : tensor<8xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %p = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %y : tensor<8xf32>, tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.mulf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  return %p : tensor<8xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>

// Read twice, the widening dissolves into both readers: each widens the
// element it reads, and the f32 copy goes.
// CHECK-LABEL: func.func @two_readers(
// CHECK-SAME: %[[X:.*]]: tensor<8xbf16>
// CHECK: linalg.generic {{.*}} ins(%[[X]], %{{.*}} : tensor<8xbf16>, tensor<8xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.extf
// CHECK-NEXT: arith.mulf
// CHECK: linalg.generic {{.*}} ins(%[[X]], %{{.*}} : tensor<8xbf16>, tensor<8xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.extf
// CHECK-NEXT: arith.addf
// CHECK-NOT: linalg.generic
func.func @two_readers(%x: tensor<8xbf16>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e0 = tensor.empty() : tensor<8xf32>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xbf16>) outs(%e0 : tensor<8xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %p = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %y : tensor<8xf32>, tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.mulf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %q = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %y : tensor<8xf32>, tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.addf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  return %p, %q : tensor<8xf32>, tensor<8xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>

// A conversion made once before a loop stays there.
// CHECK-LABEL: func.func @hoisted(
// CHECK: %[[W:.*]] = linalg.generic
// CHECK: scf.for
// CHECK: linalg.generic {{.*}} ins(%[[W]],
func.func @hoisted(%x: tensor<8xbf16>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %e0 = tensor.empty() : tensor<8xf32>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xbf16>) outs(%e0 : tensor<8xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %y) -> (tensor<8xf32>) {
    %e1 = tensor.empty() : tensor<8xf32>
    %p = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
        ins(%w, %acc : tensor<8xf32>, tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %0 = arith.addf %a, %b : f32
      linalg.yield %0 : f32
    } -> tensor<8xf32>
    scf.yield %p : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>

#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// An f32 tensor (a row sum) rounded to bf16, other work, then widened
// again: fused, the f32 tensor would outlive its bf16 copy through the
// work between.
// CHECK-LABEL: func.func @round_then_work(
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: linalg.generic
func.func @round_then_work(%m: tensor<8x4xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %x = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%m : tensor<8x4xf32>) outs(%f : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.addf %a, %o : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e0 = tensor.empty() : tensor<8xbf16>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e0 : tensor<8xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %0 = arith.truncf %a : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<8xbf16>
  %e1 = tensor.empty() : tensor<8xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%y : tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = math.exp %a : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%n : tensor<8xbf16>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  return %w, %t : tensor<8xf32>, tensor<8xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>

// Rounded and widened back into a sum the loop updates in place, with
// nothing between: the fused loop holds the f32 tensor and no new one.
// CHECK-LABEL: func.func @round_into_sum(
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<8xf32>) outs(%{{.*}} : tensor<8xf32>)
// CHECK: arith.truncf
// CHECK: arith.extf
// CHECK-NOT: linalg.generic
func.func @round_into_sum(%x: tensor<8xf32>, %s: tensor<8xf32>) -> tensor<8xf32> {
  %e0 = tensor.empty() : tensor<8xbf16>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e0 : tensor<8xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %0 = arith.truncf %a : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<8xbf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%n : tensor<8xbf16>) outs(%s : tensor<8xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    %1 = arith.addf %0, %o : f32
    linalg.yield %1 : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// A GEMM of two widened bf16 matrices (the rows of activations, a weight)
// reads the bf16 matrices; the widened copies go.
// CHECK-LABEL: func.func @gemm_reads_narrow(
// CHECK-SAME: %[[X:.*]]: tensor<2x4x8xbf16>, %[[W:.*]]: tensor<16x8xbf16>
// CHECK-NOT: linalg.generic
// CHECK: %[[ROWS:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<2x4x8xbf16> into tensor<8x8xbf16>
// CHECK: linalg.matmul {{.*}} ins(%[[ROWS]], %[[W]] : tensor<8x8xbf16>, tensor<16x8xbf16>) outs(%{{.*}} : tensor<8x16xf32>)
// CHECK-NOT: linalg.generic
func.func @gemm_reads_narrow(%x: tensor<2x4x8xbf16>, %w: tensor<16x8xbf16>, %c: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %e0 = tensor.empty() : tensor<2x4x8xf32>
  %xw = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<2x4x8xbf16>) outs(%e0 : tensor<2x4x8xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<2x4x8xf32>
  %rows = tensor.collapse_shape %xw [[0, 1], [2]] : tensor<2x4x8xf32> into tensor<8x8xf32>
  %e1 = tensor.empty() : tensor<16x8xf32>
  %ww = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<16x8xbf16>) outs(%e1 : tensor<16x8xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<16x8xf32>
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%rows, %ww : tensor<8x8xf32>, tensor<16x8xf32>) outs(%c : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// Only one operand narrow: the runtime has no GEMM of bf16 by f32, and the
// product stays on f32 copies.
// CHECK-LABEL: func.func @one_narrow(
// CHECK: %[[WIDE:.*]] = linalg.generic
// CHECK: linalg.matmul ins(%[[WIDE]], %{{.*}} : tensor<8x8xf32>, tensor<8x16xf32>)
func.func @one_narrow(%x: tensor<8x8xbf16>, %w: tensor<8x16xf32>, %c: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %e0 = tensor.empty() : tensor<8x8xf32>
  %xw = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xbf16>) outs(%e0 : tensor<8x8xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<8x8xf32>
  %y = linalg.matmul ins(%xw, %w : tensor<8x8xf32>, tensor<8x16xf32>) outs(%c : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Read through a broadcast (a row's statistic over its columns), a cheap
// producer (here one operation per element) fuses: computing it again for
// each column costs less than reading it. One of more than four operations
// per element stays.
// CHECK-LABEL: func.func @broadcast(
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4x8xf32>)
// CHECK: math.rsqrt
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
// CHECK-LABEL: func.func @costly_broadcast(
// CHECK-COUNT-2: linalg.generic
func.func @broadcast(%x: tensor<4xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e0 = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e0 : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = math.rsqrt %a : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %z = linalg.generic {indexing_maps = [#row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %y : tensor<4xf32>, tensor<4x8xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.mulf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}
func.func @costly_broadcast(%x: tensor<4xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e0 = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e0 : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = math.rsqrt %a : f32
    %1 = math.exp %0 : f32
    %2 = math.log %1 : f32
    %3 = math.tanh %2 : f32
    %4 = math.sqrt %3 : f32
    linalg.yield %4 : f32
  } -> tensor<4xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %z = linalg.generic {indexing_maps = [#row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %y : tensor<4xf32>, tensor<4x8xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.mulf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#rows3 = affine_map<(d0, d1, d2) -> (d0, d1)>

// A cheap loop that two loops read through broadcasts, one of them through
// a reshape (a layer norm's reciprocal standard deviation, read by its
// gradient's two loops), is computed again in each: a copy of it for the
// second reader, in the reshaped shape, and no loop of its own is left.
// CHECK-LABEL: func.func @two_broadcast_readers(
// CHECK: linalg.generic
// CHECK: math.sqrt
// CHECK: arith.mulf
// CHECK: linalg.generic
// CHECK: math.sqrt
// CHECK: arith.subf
// CHECK-NOT: linalg.generic
func.func @two_broadcast_readers(%var: tensor<8xf32>, %x: tensor<8x16xf32>, %y: tensor<2x4x16xf32>) -> (tensor<8x16xf32>, tensor<2x4x16xf32>) {
  %e0 = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%var : tensor<8xf32>) outs(%e0 : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = math.sqrt %a : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e1 = tensor.empty() : tensor<8x16xf32>
  %p = linalg.generic {indexing_maps = [#row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %x : tensor<8xf32>, tensor<8x16xf32>) outs(%e1 : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.mulf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<8x16xf32>
  %rs = tensor.expand_shape %r [[0, 1]] output_shape [2, 4] : tensor<8xf32> into tensor<2x4xf32>
  %e2 = tensor.empty() : tensor<2x4x16xf32>
  %q = linalg.generic {indexing_maps = [#rows3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%rs, %y : tensor<2x4xf32>, tensor<2x4x16xf32>) outs(%e2 : tensor<2x4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.subf %b, %a : f32
    linalg.yield %0 : f32
  } -> tensor<2x4x16xf32>
  return %p, %q : tensor<8x16xf32>, tensor<2x4x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// A widening read through a broadcast (a layer norm's weight, a bias)
// fuses all the same: each element is widened once per row, which costs
// less than reading it wide.
// CHECK-LABEL: func.func @widen_into_broadcast(
// CHECK-SAME: %[[X:.*]]: tensor<8xbf16>, %[[Y:.*]]: tensor<4x8xf32>
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[Y]], %[[X]] : tensor<4x8xf32>, tensor<8xbf16>)
// CHECK: arith.extf
// CHECK: arith.addf
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]
func.func @widen_into_broadcast(%x: tensor<8xbf16>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e0 = tensor.empty() : tensor<8xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%x : tensor<8xbf16>) outs(%e0 : tensor<8xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %z = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %w : tensor<4x8xf32>, tensor<8xf32>) outs(%y : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.addf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// A loop over rows whose result is expanded back to the activation's shape
// (a layer norm's normalization) computes in that shape instead, reading
// its operands expanded, so that the loop reading the result (its rounding
// to bf16) takes it in.
// CHECK-LABEL: func.func @through_reshape(
// CHECK-SAME: %[[X:.*]]: tensor<2x4x16xf32>, %[[M:.*]]: tensor<8xf32>
// CHECK: %[[MEANS:.*]] = tensor.expand_shape %[[M]] {{\[\[}}0, 1]] output_shape [2, 4] : tensor<8xf32> into tensor<2x4xf32>
// CHECK: %[[R:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[X]], %[[MEANS]] : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%{{.*}} : tensor<2x4x16xbf16>)
// CHECK: arith.subf
// CHECK: arith.truncf
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]
func.func @through_reshape(%x: tensor<2x4x16xf32>, %m: tensor<8xf32>) -> tensor<2x4x16xbf16> {
  %rows = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x4x16xf32> into tensor<8x16xf32>
  %e0 = tensor.empty() : tensor<8x16xf32>
  %c = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%rows, %m : tensor<8x16xf32>, tensor<8xf32>) outs(%e0 : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.subf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<8x16xf32>
  %back = tensor.expand_shape %c [[0, 1], [2]] output_shape [2, 4, 16] : tensor<8x16xf32> into tensor<2x4x16xf32>
  %e1 = tensor.empty() : tensor<2x4x16xbf16>
  %n = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%back : tensor<2x4x16xf32>) outs(%e1 : tensor<2x4x16xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %0 = arith.truncf %a : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<2x4x16xbf16>
  return %n : tensor<2x4x16xbf16>
}

// -----

// The logits of a bf16 step, widened for the loss: read by the maximum
// (through the rows' reshape), by the target's logit (a tensor.extract),
// and as the destination of the gradient, which is only rounded back to
// bf16 (through a reshape). The widening dissolves: the maximum widens as
// it reads, the extract widens its element, and the gradient computes
// into the bf16 logits, widening each element it reads and rounding each
// it writes. No f32 copy of the logits is left.
// CHECK-LABEL: func.func @logits(
// CHECK-SAME: %[[X:.*]]: tensor<2x4x16xbf16>
// CHECK-NOT: tensor<2x4x16xf32>
// CHECK-NOT: tensor<8x16xf32>
// CHECK: %[[ROWS:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<2x4x16xbf16> into tensor<8x16xbf16>
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}} ins(%[[ROWS]] : tensor<8x16xbf16>)
// CHECK-NEXT: ^bb0(%[[E:.*]]: bf16, %{{.*}}: f32):
// CHECK-NEXT: arith.extf %[[E]] : bf16 to f32
// CHECK: %[[PICKED:.*]] = tensor.collapse_shape %[[X]]
// CHECK: linalg.generic
// CHECK: %[[T:.*]] = tensor.extract %[[PICKED]]
// CHECK-NEXT: arith.extf %[[T]] : bf16 to f32
// CHECK: %[[DEST:.*]] = tensor.collapse_shape %[[X]]
// CHECK: %[[GRAD:.*]] = linalg.generic {{.*}} ins(%[[MAX]] : tensor<8xf32>) outs(%[[DEST]] : tensor<8x16xbf16>)
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %[[OUT:.*]]: bf16):
// CHECK-NEXT: %[[WIDE:.*]] = arith.extf %[[OUT]] : bf16 to f32
// CHECK-NEXT: %[[D:.*]] = arith.subf %[[WIDE]]
// CHECK-NEXT: %[[R:.*]] = arith.truncf %[[D]] : f32 to bf16
// CHECK-NEXT: linalg.yield %[[R]] : bf16
// CHECK: %[[BACK:.*]] = tensor.expand_shape %[[GRAD]] {{\[\[}}0, 1], [2]] output_shape [2, 4, 16] : tensor<8x16xbf16> into tensor<2x4x16xbf16>
// CHECK: return %[[BACK]], %{{.*}} : tensor<2x4x16xbf16>, tensor<8xf32>
func.func @logits(%x: tensor<2x4x16xbf16>, %t: tensor<8xi32>) -> (tensor<2x4x16xbf16>, tensor<8xf32>) {
  %cst = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<2x4x16xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<2x4x16xbf16>) outs(%e : tensor<2x4x16xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<2x4x16xf32>
  %rows = tensor.collapse_shape %w [[0, 1], [2]] : tensor<2x4x16xf32> into tensor<8x16xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %init = linalg.fill ins(%cst : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%rows : tensor<8x16xf32>) outs(%init : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.maxnumf %a, %o : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %picked = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%t : tensor<8xi32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%i: i32, %o: f32):
    %r = linalg.index 0 : index
    %j = arith.index_cast %i : i32 to index
    %v = tensor.extract %rows[%r, %j] : tensor<8x16xf32>
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %grad = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%max : tensor<8xf32>) outs(%rows : tensor<8x16xf32>) {
  ^bb0(%m: f32, %l: f32):
    %0 = arith.subf %l, %m : f32
    linalg.yield %0 : f32
  } -> tensor<8x16xf32>
  %back = tensor.expand_shape %grad [[0, 1], [2]] output_shape [2, 4, 16] : tensor<8x16xf32> into tensor<2x4x16xf32>
  %e2 = tensor.empty() : tensor<2x4x16xbf16>
  %narrow = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%back : tensor<2x4x16xf32>) outs(%e2 : tensor<2x4x16xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %0 = arith.truncf %a : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<2x4x16xbf16>
  return %narrow, %picked : tensor<2x4x16xbf16>, tensor<8xf32>
}

// -----

// Logits padded past the vocabulary (loomc --pad-vocab): the loss reads
// the vocabulary's columns through a slice of the rows. The slice is read
// from the bf16 logits as the reshape is, and no f32 copy is left.
// CHECK-LABEL: func.func @padded_logits(
// CHECK-SAME: %[[X:.*]]: tensor<2x4x16xbf16>
// CHECK-NOT: x16xf32>
// CHECK: %[[ROWS:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<2x4x16xbf16> into tensor<8x16xbf16>
// CHECK-NOT: x16xf32>
// CHECK: %[[VOCAB:.*]] = tensor.extract_slice %[[ROWS]][0, 0] [8, 12] [1, 1] : tensor<8x16xbf16> to tensor<8x12xbf16>
// CHECK: linalg.generic {{.*}} ins(%[[VOCAB]] : tensor<8x12xbf16>)
// CHECK-NEXT: ^bb0(%[[E:.*]]: bf16, %{{.*}}: f32):
// CHECK-NEXT: arith.extf %[[E]] : bf16 to f32
func.func @padded_logits(%x: tensor<2x4x16xbf16>) -> (tensor<8xf32>, tensor<8xf32>) {
  %cst = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<2x4x16xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<2x4x16xbf16>) outs(%e : tensor<2x4x16xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<2x4x16xf32>
  %rows = tensor.collapse_shape %w [[0, 1], [2]] : tensor<2x4x16xf32> into tensor<8x16xf32>
  %vocab = tensor.extract_slice %rows[0, 0] [8, 12] [1, 1] : tensor<8x16xf32> to tensor<8x12xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %init = linalg.fill ins(%cst : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%vocab : tensor<8x12xf32>) outs(%init : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.maxnumf %a, %o : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%vocab : tensor<8x12xf32>) outs(%init : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.addf %a, %o : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  return %max, %sum : tensor<8xf32>, tensor<8xf32>
}

// -----

// A slice of a size known only at run time is no view to widen from: the
// widening stays, read through it.
// CHECK-LABEL: func.func @dynamic_slice(
// CHECK: %[[W:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<8x16xbf16>) outs(%{{.*}} : tensor<8x16xf32>)
// CHECK: tensor.extract_slice %[[W]][0, 0] [%{{.*}}, 12] [1, 1] : tensor<8x16xf32> to tensor<?x12xf32>
func.func @dynamic_slice(%x: tensor<8x16xbf16>, %n: index) -> (tensor<?xf32>, tensor<?xf32>) {
  %cst = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xbf16>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<8x16xf32>
  %rows = tensor.extract_slice %w[0, 0] [%n, 12] [1, 1] : tensor<8x16xf32> to tensor<?x12xf32>
  %e1 = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%cst : f32) outs(%e1 : tensor<?xf32>) -> tensor<?xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%rows : tensor<?x12xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.maxnumf %a, %o : f32
    linalg.yield %0 : f32
  } -> tensor<?xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%rows : tensor<?x12xf32>) outs(%init : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.addf %a, %o : f32
    linalg.yield %0 : f32
  } -> tensor<?xf32>
  return %max, %sum : tensor<?xf32>, tensor<?xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// The widening stays where one of its uses cannot read the narrow tensor:
// a loop computing into the copy that is not narrowed back, or a reduction
// computing into it (rounding every partial sum is not rounding the sum).
// The loop reading it through a broadcast reads the copy then.
// CHECK-LABEL: func.func @stays(
// CHECK-COUNT-2: arith.extf
// CHECK-NOT: arith.extf
func.func @stays(%x: tensor<4xbf16>, %y: tensor<4x8xf32>, %z: tensor<4x8xbf16>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xbf16>) {
  %e0 = tensor.empty() : tensor<4xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%x : tensor<4xbf16>) outs(%e0 : tensor<4xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w, %y : tensor<4xf32>, tensor<4x8xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %0 = arith.mulf %a, %c : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%w : tensor<4xf32>) {
  ^bb0(%o: f32):
    %0 = arith.addf %o, %o : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %w2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%x : tensor<4xbf16>) outs(%e2 : tensor<4xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<4x8xf32>) outs(%w2 : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.addf %a, %o : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %e3 = tensor.empty() : tensor<4xbf16>
  %n = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%sum : tensor<4xf32>) outs(%e3 : tensor<4xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %0 = arith.truncf %a : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<4xbf16>
  return %b, %s, %n : tensor<4x8xf32>, tensor<4xf32>, tensor<4xbf16>
}

// -----

// A widening whose only use is a destination narrowed back, with no
// reshape between: the loop computes into the narrow tensor.
// CHECK-LABEL: func.func @destination(
// CHECK-SAME: %[[X:.*]]: tensor<8xbf16>
// CHECK: %[[G:.*]] = linalg.generic {{.*}} outs(%[[X]] : tensor<8xbf16>)
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %[[OUT:.*]]: bf16):
// CHECK-NEXT: arith.extf %[[OUT]] : bf16 to f32
// CHECK-NEXT: arith.subf
// CHECK-NEXT: arith.truncf
// CHECK: return %[[G]] : tensor<8xbf16>
func.func @destination(%x: tensor<8xbf16>, %y: tensor<8xf32>) -> tensor<8xbf16> {
  %e = tensor.empty() : tensor<8xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%x : tensor<8xbf16>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%y : tensor<8xf32>) outs(%w : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.subf %o, %a : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xbf16>
  %n = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%g : tensor<8xf32>) outs(%e2 : tensor<8xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %0 = arith.truncf %a : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<8xbf16>
  return %n : tensor<8xbf16>
}

// -----

// Left alone: a destination written through a map that is not a
// permutation (each element many times: rounding each partial sum is not
// rounding the sum), a destination narrowed to another type than the
// source's, and a widening a function returns.
// CHECK-LABEL: func.func @kept(
// CHECK-COUNT-3: arith.extf %{{.*}} : {{.*}} to f32
// CHECK-NOT: arith.extf
func.func @kept(%x: tensor<4xbf16>, %y: tensor<4x8xf32>, %h: tensor<4xf16>, %z: tensor<4xbf16>) -> (tensor<4xbf16>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%x : tensor<4xbf16>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<4x8xf32>) outs(%w : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.addf %o, %a : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4xbf16>
  %n = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%g : tensor<4xf32>) outs(%e2 : tensor<4xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %0 = arith.truncf %a : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<4xbf16>
  %wh = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%h : tensor<4xf16>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f16, %o: f32):
    %0 = arith.extf %a : f16 to f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %gh = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%wh : tensor<4xf32>) {
  ^bb0(%o: f32):
    %0 = arith.addf %o, %o : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %nh = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%gh : tensor<4xf32>) outs(%e2 : tensor<4xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %0 = arith.truncf %a : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<4xbf16>
  %wz = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%z : tensor<4xbf16>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %u = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%wz : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.mulf %a, %a : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  return %n, %nh, %wz, %u : tensor<4xbf16>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>

// As @round_then_work, but what is rounded is a slice of an argument: the
// fused loop keeps nothing alive that was not anyway.
// CHECK-LABEL: func.func @round_slice_then_work(
// CHECK-SAME: %[[X:.*]]: tensor<16xf32>
// CHECK: %[[S:.*]] = tensor.extract_slice %[[X]]
// CHECK: math.exp
// CHECK: linalg.generic {{.*}} ins(%[[S]] : tensor<8xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.truncf
// CHECK-NEXT: arith.extf
// CHECK-NOT: linalg.generic
func.func @round_slice_then_work(%x: tensor<16xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %s = tensor.extract_slice %x[0] [8] [1] : tensor<16xf32> to tensor<8xf32>
  %e0 = tensor.empty() : tensor<8xbf16>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%s : tensor<8xf32>) outs(%e0 : tensor<8xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %0 = arith.truncf %a : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<8xbf16>
  %e1 = tensor.empty() : tensor<8xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%y : tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = math.exp %a : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%n : tensor<8xbf16>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %0 = arith.extf %a : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  return %w, %t : tensor<8xf32>, tensor<8xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A layer norm's input gradient (rounded to bf16 from an f32 tensor that
// dies with it), the rounding of a weight's gradient, then the residual add
// that reads the input gradient: the add moves up to the gradient's loop
// and the two fuse. Its new bf16 result weighs what the gradient's did.
// CHECK-LABEL: func.func @hoist_consumer(
// CHECK-SAME: %{{[^:]*}}: tensor<8x4xf32>, %[[R:[^:]*]]: tensor<8xbf16>, %[[G:[^:]*]]: tensor<4xf32>
// CHECK: %[[X:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[R]] : tensor<8xf32>, tensor<8xbf16>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: arith.truncf
// CHECK-NEXT: arith.extf
// CHECK-NEXT: arith.extf
// CHECK-NEXT: arith.addf
// CHECK-NEXT: arith.truncf
// CHECK: %[[W:.*]] = linalg.generic {{.*}} ins(%[[G]] : tensor<4xf32>)
// CHECK-NOT: linalg.generic
// CHECK: return %[[SUM]], %[[W]]
func.func @hoist_consumer(%m: tensor<8x4xf32>, %r: tensor<8xbf16>, %g: tensor<4xf32>) -> (tensor<8xbf16>, tensor<4xbf16>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %x = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%m : tensor<8x4xf32>) outs(%f : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.addf %a, %o : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e0 = tensor.empty() : tensor<8xbf16>
  %dx = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e0 : tensor<8xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %0 = arith.mulf %a, %a : f32
    %1 = arith.truncf %0 : f32 to bf16
    linalg.yield %1 : bf16
  } -> tensor<8xbf16>
  %e1 = tensor.empty() : tensor<4xbf16>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%g : tensor<4xf32>) outs(%e1 : tensor<4xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %0 = arith.truncf %a : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<4xbf16>
  %e2 = tensor.empty() : tensor<8xbf16>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%dx, %r : tensor<8xbf16>, tensor<8xbf16>) outs(%e2 : tensor<8xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %o: bf16):
    %0 = arith.extf %a : bf16 to f32
    %1 = arith.extf %b : bf16 to f32
    %2 = arith.addf %0, %1 : f32
    %3 = arith.truncf %2 : f32 to bf16
    linalg.yield %3 : bf16
  } -> tensor<8xbf16>
  return %sum, %w : tensor<8xbf16>, tensor<4xbf16>
}

// -----

#id = affine_map<(d0) -> (d0)>
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// The same, but the add also reads what the work between computes, which
// is returned too: the add cannot run before it, and the three loops stay.
// CHECK-LABEL: func.func @consumer_needs_work(
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: linalg.generic
func.func @consumer_needs_work(%m: tensor<8x4xf32>, %g: tensor<8xf32>) -> (tensor<8xbf16>, tensor<8xbf16>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %x = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%m : tensor<8x4xf32>) outs(%f : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.addf %a, %o : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e0 = tensor.empty() : tensor<8xbf16>
  %dx = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e0 : tensor<8xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %0 = arith.mulf %a, %a : f32
    %1 = arith.truncf %0 : f32 to bf16
    linalg.yield %1 : bf16
  } -> tensor<8xbf16>
  %e1 = tensor.empty() : tensor<8xbf16>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%g : tensor<8xf32>) outs(%e1 : tensor<8xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %0 = arith.truncf %a : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<8xbf16>
  %e2 = tensor.empty() : tensor<8xbf16>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%dx, %w : tensor<8xbf16>, tensor<8xbf16>) outs(%e2 : tensor<8xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %o: bf16):
    %0 = arith.extf %a : bf16 to f32
    %1 = arith.extf %b : bf16 to f32
    %2 = arith.addf %0, %1 : f32
    %3 = arith.truncf %2 : f32 to bf16
    linalg.yield %3 : bf16
  } -> tensor<8xbf16>
  return %sum, %w : tensor<8xbf16>, tensor<8xbf16>
}

// -----

#id = affine_map<(d0) -> (d0)>
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A chain of three loops, each the only reader of the one before, with
// work between them, the last also reading %x, computed after the first:
// the second moves up to the first and they fuse, but the last cannot run
// before %x and stays where it was (moves checked one at a time, where
// the ops are then: the IR stays valid).
// CHECK-LABEL: func.func @chain(
// CHECK: %[[AB:.*]] = linalg.generic {{.*}} iterator_types = ["parallel"]} ins(%{{.*}} : tensor<8xf32>) outs(%{{.*}} : tensor<8xbf16>)
// CHECK: math.exp
// CHECK: %[[X:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<8xf32>) outs(%{{.*}} : tensor<8xbf16>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.negf
// CHECK: math.exp
// CHECK: linalg.generic {{.*}} ins(%[[AB]], %[[X]] : tensor<8xbf16>, tensor<8xbf16>)
func.func @chain(%m: tensor<8x4xf32>, %y: tensor<8xf32>, %z: tensor<8xf32>) -> (tensor<8xbf16>, tensor<8xf32>, tensor<8xbf16>, tensor<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %s = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%m : tensor<8x4xf32>) outs(%f : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.addf %a, %o : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e0 = tensor.empty() : tensor<8xbf16>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%s : tensor<8xf32>) outs(%e0 : tensor<8xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %0 = arith.mulf %v, %v : f32
    %1 = arith.truncf %0 : f32 to bf16
    linalg.yield %1 : bf16
  } -> tensor<8xbf16>
  %e1 = tensor.empty() : tensor<8xf32>
  %w1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%y : tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %0 = math.exp %v : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xbf16>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%z : tensor<8xf32>) outs(%e2 : tensor<8xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %0 = arith.negf %v : f32
    %1 = arith.truncf %0 : f32 to bf16
    linalg.yield %1 : bf16
  } -> tensor<8xbf16>
  %e3 = tensor.empty() : tensor<8xbf16>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : tensor<8xbf16>) outs(%e3 : tensor<8xbf16>) {
  ^bb0(%v: bf16, %o: bf16):
    %0 = arith.extf %v : bf16 to f32
    %1 = arith.addf %0, %0 : f32
    %2 = arith.truncf %1 : f32 to bf16
    linalg.yield %2 : bf16
  } -> tensor<8xbf16>
  %e4 = tensor.empty() : tensor<8xf32>
  %w2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%y : tensor<8xf32>) outs(%e4 : tensor<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %0 = math.exp %v : f32
    %1 = math.exp %0 : f32
    linalg.yield %1 : f32
  } -> tensor<8xf32>
  %e5 = tensor.empty() : tensor<8xbf16>
  %c = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%b, %x : tensor<8xbf16>, tensor<8xbf16>) outs(%e5 : tensor<8xbf16>) {
  ^bb0(%v: bf16, %u: bf16, %o: bf16):
    %0 = arith.extf %v : bf16 to f32
    %1 = arith.extf %u : bf16 to f32
    %2 = arith.addf %0, %1 : f32
    %3 = arith.truncf %2 : f32 to bf16
    linalg.yield %3 : bf16
  } -> tensor<8xbf16>
  return %c, %w1, %x, %w2 : tensor<8xbf16>, tensor<8xf32>, tensor<8xbf16>, tensor<8xf32>
}
