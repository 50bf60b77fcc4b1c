// RUN: loom-opt %s --split-input-file --loom-split-reductions=rows=64 | FileCheck %s
// RUN: not loom-opt %s --split-input-file --loom-split-reductions=rows=0 2>&1 | FileCheck %s --check-prefix=BAD

// A bias's gradient over 512 rows: 8 parts of 64 rows summed side by side
// from zero, then the parts folded into the accumulator.
// CHECK-LABEL: func.func @column_sum(
// CHECK-SAME: %[[DY:.*]]: tensor<512x128xf32>, %[[ACC:.*]]: tensor<128xf32>
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[ROWS:.*]] = tensor.expand_shape %[[DY]] {{\[\[}}0, 1], [2]] output_shape [8, 64, 128]
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<8x128xf32>
// CHECK: %[[FILL:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[EMPTY]] : tensor<8x128xf32>)
// CHECK: %[[PARTS:.*]] = linalg.generic {{{.*}}iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[ROWS]] : tensor<8x64x128xf32>) outs(%[[FILL]] : tensor<8x128xf32>)
// CHECK: arith.addf
// CHECK: %[[SUM:.*]] = linalg.generic {{{.*}}iterator_types = ["reduction", "parallel"]} ins(%[[PARTS]] : tensor<8x128xf32>) outs(%[[ACC]] : tensor<128xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %[[OUT:.*]]: f32):
// CHECK-NEXT: %[[ADD:.*]] = arith.addf %[[OUT]], %[[IN]] : f32
// CHECK-NEXT: linalg.yield %[[ADD]]
// CHECK: return %[[SUM]]
// BAD: rows must be at least 1, got 0
func.func @column_sum(%dy: tensor<512x128xf32>, %acc: tensor<128xf32>) -> tensor<128xf32> {
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%dy : tensor<512x128xf32>) outs(%acc : tensor<128xf32>) {
  ^bb0(%in: f32, %out: f32):
    %1 = arith.addf %out, %in : f32
    linalg.yield %1 : f32
  } -> tensor<128xf32>
  return %0 : tensor<128xf32>
}

// -----

// A layer norm's two column sums in one loop, over the rows of each
// sequence of a batch (the reduced dimension in the middle), one input
// read through a broadcast, and a maximum, whose neutral element is -inf:
// each output gets its parts and its own fold. The body's row index is the
// part's first row plus the row within it.
// CHECK-LABEL: func.func @two_outputs(
// CHECK-DAG: %[[NEG:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : index
// CHECK-DAG: tensor.expand_shape %{{.*}} {{\[\[}}0], [1, 2], [3]] output_shape [2, 4, 64, 16] : tensor<2x256x16xf32> into tensor<2x4x64x16xf32>
// CHECK-DAG: linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<4x2x16xf32>)
// CHECK-DAG: linalg.fill ins(%[[NEG]] : f32) outs(%{{.*}} : tensor<4x2x16xf32>)
// CHECK: %[[PARTS:.*]]:2 = linalg.generic {{{.*}}iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
// CHECK-DAG: %[[ROW:.*]] = linalg.index 2 : index
// CHECK-DAG: %[[K:.*]] = linalg.index 0 : index
// CHECK: %[[FIRST:.*]] = arith.muli %[[K]], %[[C64]] : index
// CHECK: arith.addi %[[FIRST]], %[[ROW]] : index
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK: linalg.generic {{{.*}}iterator_types = ["reduction", "parallel", "parallel"]} ins(%[[PARTS]]#0, %[[PARTS]]#1 : tensor<4x2x16xf32>, tensor<4x2x16xf32>)
// CHECK-NEXT: ^bb0(%[[P0:.*]]: f32, %[[P1:.*]]: f32, %[[A0:.*]]: f32, %[[A1:.*]]: f32):
// CHECK-NEXT: arith.addf %[[A0]], %[[P0]] : f32
// CHECK-NEXT: arith.maximumf %[[P1]], %[[A1]] : f32
func.func @two_outputs(%x: tensor<2x256x16xf32>, %scale: tensor<16xf32>, %a: tensor<2x16xf32>, %b: tensor<2x16xf32>) -> (tensor<2x16xf32>, tensor<2x16xf32>) {
  %0:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d0, d2)>], iterator_types = ["parallel", "reduction", "parallel"]} ins(%x, %scale : tensor<2x256x16xf32>, tensor<16xf32>) outs(%a, %b : tensor<2x16xf32>, tensor<2x16xf32>) {
  ^bb0(%in: f32, %s: f32, %out: f32, %out2: f32):
    %row = linalg.index 1 : index
    %i = arith.index_cast %row : index to i32
    %f = arith.sitofp %i : i32 to f32
    %t = arith.mulf %in, %s : f32
    %u = arith.addf %t, %f : f32
    %1 = arith.addf %out, %u : f32
    %2 = arith.maximumf %in, %out2 : f32
    linalg.yield %1, %2 : f32, f32
  } -> (tensor<2x16xf32>, tensor<2x16xf32>)
  return %0#0, %0#1 : tensor<2x16xf32>, tensor<2x16xf32>
}

// -----

// A row's reduction 16 times longer than `rows` or more (a softmax over
// the vocabulary) is split too: 2,048 columns into 32 parts of 64, the
// parts then folded for each row.
// CHECK-LABEL: func.func @long_rows(
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0], [1, 2]] output_shape [4, 32, 64] : tensor<4x2048xf32> into tensor<4x32x64xf32>
// CHECK: %[[PARTS:.*]] = linalg.generic {{{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.*}} : tensor<4x32x64xf32>) outs(%{{.*}} : tensor<32x4xf32>)
// CHECK: arith.maximumf
// CHECK: linalg.generic {{{.*}}iterator_types = ["reduction", "parallel"]} ins(%[[PARTS]] : tensor<32x4xf32>) outs(%{{.*}} : tensor<4xf32>)
func.func @long_rows(%x: tensor<4x2048xf32>, %m: tensor<4xf32>) -> tensor<4xf32> {
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x2048xf32>) outs(%m : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %1 = arith.maximumf %in, %out : f32
    linalg.yield %1 : f32
  } -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Left alone: a row's sum of fewer than 16 x 64 elements, a column of too
// few rows, a prime number of rows, and a fold with no neutral element.
// CHECK-LABEL: func.func @unchanged(
// CHECK-NOT: tensor.expand_shape
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: linalg.generic
func.func @unchanged(%rows: tensor<128x512xf32>, %short: tensor<100x8xf32>, %prime: tensor<509x8xf32>, %r: tensor<128xf32>, %c: tensor<8xf32>, %w: tensor<512xf32>) -> (tensor<128xf32>, tensor<8xf32>, tensor<8xf32>, tensor<512xf32>) {
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%rows : tensor<128x512xf32>) outs(%r : tensor<128xf32>) {
  ^bb0(%in: f32, %out: f32):
    %1 = arith.addf %out, %in : f32
    linalg.yield %1 : f32
  } -> tensor<128xf32>
  %2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%short : tensor<100x8xf32>) outs(%c : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %3 = arith.addf %out, %in : f32
    linalg.yield %3 : f32
  } -> tensor<8xf32>
  %4 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%prime : tensor<509x8xf32>) outs(%c : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %5 = arith.addf %out, %in : f32
    linalg.yield %5 : f32
  } -> tensor<8xf32>
  %6 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%rows : tensor<128x512xf32>) outs(%w : tensor<512xf32>) {
  ^bb0(%in: f32, %out: f32):
    %7 = arith.subf %out, %in : f32
    linalg.yield %7 : f32
  } -> tensor<512xf32>
  return %0, %2, %4, %6 : tensor<128xf32>, tensor<8xf32>, tensor<8xf32>, tensor<512xf32>
}

// -----

// A full sum of 8,192 elements (a row's reduction 16 times 64 or longer):
// 128 parts of 64, then the fold of the 128 parts, a row too short to split
// again.
// CHECK-LABEL: func.func @full_sum(
// CHECK: linalg.generic {{{.*}}iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<128x64xf32>) outs(%{{.*}} : tensor<128xf32>)
// CHECK: linalg.generic {{{.*}}iterator_types = ["reduction"]} ins(%{{.*}} : tensor<128xf32>) outs(%{{.*}} : tensor<f32>)
// CHECK-NOT: linalg.generic
func.func @full_sum(%x: tensor<8192xf32>, %acc: tensor<f32>) -> tensor<f32> {
  %0 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]} ins(%x : tensor<8192xf32>) outs(%acc : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %1 = arith.addf %out, %in : f32
    linalg.yield %1 : f32
  } -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Left alone: an output indexed by the reduced dimension (a mislabelled
// loop, whose parts would each hold the whole sum), a dynamic shape, and an
// integer sum (its overflow flags need not hold in another order).
// CHECK-LABEL: func.func @not_split(
// CHECK-NOT: tensor.expand_shape
// CHECK-COUNT-3: linalg.generic
// CHECK-NOT: linalg.generic
func.func @not_split(%x: tensor<4x2048xf32>, %acc: tensor<2048xf32>, %d: tensor<?x8xf32>, %c: tensor<8xf32>, %i: tensor<1024x8xi32>, %ci: tensor<8xi32>) -> (tensor<2048xf32>, tensor<8xf32>, tensor<8xi32>) {
  %0 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x2048xf32>) outs(%acc : tensor<2048xf32>) {
  ^bb0(%in: f32, %out: f32):
    %1 = arith.addf %out, %in : f32
    linalg.yield %1 : f32
  } -> tensor<2048xf32>
  %2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%d : tensor<?x8xf32>) outs(%c : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %3 = arith.addf %out, %in : f32
    linalg.yield %3 : f32
  } -> tensor<8xf32>
  %4 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%i : tensor<1024x8xi32>) outs(%ci : tensor<8xi32>) {
  ^bb0(%in: i32, %out: i32):
    %5 = arith.addi %out, %in overflow<nsw> : i32
    linalg.yield %5 : i32
  } -> tensor<8xi32>
  return %0, %2, %4 : tensor<2048xf32>, tensor<8xf32>, tensor<8xi32>
}
