// RUN: loom-opt %s --loom-merge-reductions --split-input-file | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#vec = affine_map<(d0) -> (d0)>

// The loss's softmax statistics, computed again by its gradient: the
// maximum of each row and the sum of the exponentials, each from its own
// reshape of the logits and its own fill. The second maximum and the sum
// that reads it are replaced by the first ones, and their fills and
// reshapes go.
// CHECK-LABEL: func.func @statistics(
// CHECK: tensor.collapse_shape
// CHECK: linalg.fill
// CHECK: %[[MAX:.*]] = linalg.generic
// CHECK: arith.maxnumf
// CHECK: linalg.fill
// CHECK: %[[SUM:.*]] = linalg.generic
// CHECK: math.exp
// CHECK-NOT: tensor.collapse_shape
// CHECK-NOT: linalg.fill
// CHECK: linalg.generic {{.*}} ins(%[[MAX]], %[[SUM]], %[[MAX]], %[[SUM]] :
// CHECK-NOT: linalg.generic
func.func @statistics(%logits: tensor<2x4x16xf32>) -> tensor<8xf32> {
  %low = arith.constant -3.4e38 : f32
  %zero = arith.constant 0.0 : f32
  %rows0 = tensor.collapse_shape %logits [[0, 1], [2]] : tensor<2x4x16xf32> into tensor<8x16xf32>
  %e0 = tensor.empty() : tensor<8xf32>
  %f0 = linalg.fill ins(%low : f32) outs(%e0 : tensor<8xf32>) -> tensor<8xf32>
  %m0 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%rows0 : tensor<8x16xf32>) outs(%f0 : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.maxnumf %a, %acc : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %s0 = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%rows0, %m0 : tensor<8x16xf32>, tensor<8xf32>) outs(%f1 : tensor<8xf32>) {
  ^bb0(%a: f32, %m: f32, %acc: f32):
    %0 = arith.subf %a, %m : f32
    %1 = math.exp %0 : f32
    %2 = arith.addf %acc, %1 : f32
    linalg.yield %2 : f32
  } -> tensor<8xf32>
  %rows1 = tensor.collapse_shape %logits [[0, 1], [2]] : tensor<2x4x16xf32> into tensor<8x16xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %f2 = linalg.fill ins(%low : f32) outs(%e2 : tensor<8xf32>) -> tensor<8xf32>
  %m1 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%rows1 : tensor<8x16xf32>) outs(%f2 : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.maxnumf %a, %acc : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e3 = tensor.empty() : tensor<8xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<8xf32>) -> tensor<8xf32>
  %s1 = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%rows1, %m1 : tensor<8x16xf32>, tensor<8xf32>) outs(%f3 : tensor<8xf32>) {
  ^bb0(%a: f32, %m: f32, %acc: f32):
    %0 = arith.subf %a, %m : f32
    %1 = math.exp %0 : f32
    %2 = arith.addf %acc, %1 : f32
    linalg.yield %2 : f32
  } -> tensor<8xf32>
  %e4 = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#vec, #vec, #vec, #vec, #vec], iterator_types = ["parallel"]}
      ins(%m0, %s0, %m1, %s1 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e4 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %d: f32, %o: f32):
    %0 = arith.addf %a, %b : f32
    %1 = arith.addf %c, %d : f32
    %2 = arith.mulf %0, %1 : f32
    linalg.yield %2 : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#vec = affine_map<(d0) -> (d0)>

// Not merged: sums from different fills; a sum that a loop then updates in
// place (merged, that loop would write what another reads); a loop without
// a reduction.
// CHECK-LABEL: func.func @kept(
// CHECK-COUNT-8: linalg.generic
// CHECK-NOT: linalg.generic
func.func @kept(%x: tensor<8x16xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e0 = tensor.empty() : tensor<8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<8xf32>) -> tensor<8xf32>
  %a = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x16xf32>) outs(%f0 : tensor<8xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %0 = arith.addf %v, %acc : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %f1 = linalg.fill ins(%one : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %b = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x16xf32>) outs(%f1 : tensor<8xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %0 = arith.addf %v, %acc : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<8xf32>) -> tensor<8xf32>
  %c = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x16xf32>) outs(%f2 : tensor<8xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %0 = arith.addf %v, %acc : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %d = linalg.generic {indexing_maps = [#vec], iterator_types = ["parallel"]}
      outs(%c : tensor<8xf32>) {
  ^bb0(%o: f32):
    %0 = arith.mulf %o, %o : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e3 = tensor.empty() : tensor<8x16xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%e3 : tensor<8x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %0 = arith.mulf %v, %v : f32
    linalg.yield %0 : f32
  } -> tensor<8x16xf32>
  %e4 = tensor.empty() : tensor<8x16xf32>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%e4 : tensor<8x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %0 = arith.mulf %v, %v : f32
    linalg.yield %0 : f32
  } -> tensor<8x16xf32>
  %e5 = tensor.empty() : tensor<8xf32>
  %s = linalg.generic {indexing_maps = [#vec, #vec, #vec], iterator_types = ["parallel"]}
      ins(%a, %b : tensor<8xf32>, tensor<8xf32>) outs(%e5 : tensor<8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %0 = arith.addf %p, %q : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e6 = tensor.empty() : tensor<8x16xf32>
  %t = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g, %h : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e6 : tensor<8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %0 = arith.addf %p, %q : f32
    linalg.yield %0 : f32
  } -> tensor<8x16xf32>
  return %s, %d, %t : tensor<8xf32>, tensor<8xf32>, tensor<8x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#vec = affine_map<(d0) -> (d0)>

// A padded vocabulary: both maxima read the real columns through their own
// slice of the logits, the same slice. The second is replaced, and its
// slice goes; a slice of other columns is another tensor.
// CHECK-LABEL: func.func @padded(
// CHECK: %[[COLS:.*]] = tensor.extract_slice %{{.*}}[0, 0] [8, 13] [1, 1]
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}} ins(%[[COLS]] :
// CHECK-NOT: tensor.extract_slice %{{.*}}[0, 0] [8, 13]
// CHECK: %[[OTHER:.*]] = tensor.extract_slice %{{.*}}[0, 1] [8, 13] [1, 1]
// CHECK: %[[SHIFTED:.*]] = linalg.generic {{.*}} ins(%[[OTHER]] :
// CHECK: linalg.generic {{.*}} ins(%[[MAX]], %[[MAX]], %[[SHIFTED]] :
func.func @padded(%logits: tensor<8x16xf32>) -> tensor<8xf32> {
  %low = arith.constant -3.4e38 : f32
  %cols0 = tensor.extract_slice %logits[0, 0] [8, 13] [1, 1] : tensor<8x16xf32> to tensor<8x13xf32>
  %e0 = tensor.empty() : tensor<8xf32>
  %f0 = linalg.fill ins(%low : f32) outs(%e0 : tensor<8xf32>) -> tensor<8xf32>
  %m0 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%cols0 : tensor<8x13xf32>) outs(%f0 : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.maxnumf %a, %acc : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %cols1 = tensor.extract_slice %logits[0, 0] [8, 13] [1, 1] : tensor<8x16xf32> to tensor<8x13xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %f1 = linalg.fill ins(%low : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %m1 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%cols1 : tensor<8x13xf32>) outs(%f1 : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.maxnumf %a, %acc : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %cols2 = tensor.extract_slice %logits[0, 1] [8, 13] [1, 1] : tensor<8x16xf32> to tensor<8x13xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %f2 = linalg.fill ins(%low : f32) outs(%e2 : tensor<8xf32>) -> tensor<8xf32>
  %m2 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%cols2 : tensor<8x13xf32>) outs(%f2 : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.maxnumf %a, %acc : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %e3 = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#vec, #vec, #vec, #vec], iterator_types = ["parallel"]}
      ins(%m0, %m1, %m2 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e3 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %0 = arith.addf %a, %b : f32
    %1 = arith.addf %0, %c : f32
    linalg.yield %1 : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#vec = affine_map<(d0) -> (d0)>

// The merged reduction reads its reshape twice: the reshape goes, once.
// CHECK-LABEL: func.func @read_twice(
// CHECK: %[[ROWS:.*]] = tensor.collapse_shape
// CHECK: %[[DOT:.*]] = linalg.generic {{.*}} ins(%[[ROWS]], %[[ROWS]] :
// CHECK-NOT: tensor.collapse_shape
// CHECK: linalg.generic {{.*}} ins(%[[DOT]], %[[DOT]] :
func.func @read_twice(%x: tensor<2x4x16xf32>) -> tensor<8xf32> {
  %zero = arith.constant 0.0 : f32
  %rows0 = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x4x16xf32> into tensor<8x16xf32>
  %e0 = tensor.empty() : tensor<8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<8xf32>) -> tensor<8xf32>
  %d0 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%rows0, %rows0 : tensor<8x16xf32>, tensor<8x16xf32>) outs(%f0 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %0 = arith.mulf %a, %b : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<8xf32>
  %rows1 = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x4x16xf32> into tensor<8x16xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %d1 = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%rows1, %rows1 : tensor<8x16xf32>, tensor<8x16xf32>) outs(%f1 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %0 = arith.mulf %a, %b : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#vec, #vec, #vec], iterator_types = ["parallel"]}
      ins(%d0, %d1 : tensor<8xf32>, tensor<8xf32>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.addf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// The loss's statistics from the runtime, once for the loss and once for
// its gradient, over reshapes of the same logits, each only read: the
// second's readers read the first's results.
// CHECK-LABEL: func.func @softmax_stats_twice(
// CHECK: %[[MAX:.*]], %[[SUM:.*]] = loom.softmax_stats
// CHECK-NOT: loom.softmax_stats
// CHECK: tensor.extract %[[MAX]]
// CHECK: tensor.extract %[[SUM]]
// CHECK: tensor.extract %[[MAX]]
// CHECK: tensor.extract %[[SUM]]
func.func @softmax_stats_twice(%logits: tensor<2x3x8xbf16>, %i: index) -> (f32, f32, f32, f32) {
  %a = tensor.collapse_shape %logits [[0, 1], [2]] : tensor<2x3x8xbf16> into tensor<6x8xbf16>
  %m1, %s1 = loom.softmax_stats %a {classes = 7 : i64} : tensor<6x8xbf16> -> tensor<6xf32>
  %b = tensor.collapse_shape %logits [[0, 1], [2]] : tensor<2x3x8xbf16> into tensor<6x8xbf16>
  %m2, %s2 = loom.softmax_stats %b {classes = 7 : i64} : tensor<6x8xbf16> -> tensor<6xf32>
  %x1 = tensor.extract %m1[%i] : tensor<6xf32>
  %y1 = tensor.extract %s1[%i] : tensor<6xf32>
  %x2 = tensor.extract %m2[%i] : tensor<6xf32>
  %y2 = tensor.extract %s2[%i] : tensor<6xf32>
  return %x1, %y1, %x2, %y2 : f32, f32, f32, f32
}

// -----

// Over other columns (another number of classes) they differ: both stay.
// CHECK-LABEL: func.func @softmax_stats_other_classes(
// CHECK-COUNT-2: loom.softmax_stats
func.func @softmax_stats_other_classes(%logits: tensor<6x8xbf16>, %i: index) -> (f32, f32) {
  %m1, %s1 = loom.softmax_stats %logits {classes = 7 : i64} : tensor<6x8xbf16> -> tensor<6xf32>
  %m2, %s2 = loom.softmax_stats %logits {classes = 8 : i64} : tensor<6x8xbf16> -> tensor<6xf32>
  %x = tensor.extract %m1[%i] : tensor<6xf32>
  %y = tensor.extract %s2[%i] : tensor<6xf32>
  return %x, %y : f32, f32
}
