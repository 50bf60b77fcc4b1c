// RUN: loom-opt %s --loom-hoist-conversions --split-input-file | FileCheck %s

// A conversion of a value the loop does not change leaves the loop (out of
// both loops of a nest); one of a value the loop makes stays; another
// loop-invariant op stays; a second conversion of the same value, type and
// scale is replaced by the first.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<4x4xf32>, %[[X:[a-z0-9]+]]: tensor<2x4xf32>
// CHECK: %[[W16:.*]] = loom.convert %[[W]] : tensor<4x4xf32> to tensor<4x4xbf16>
// CHECK-NOT: loom.convert %[[W]]
// CHECK: scf.for
// CHECK: scf.for
// CHECK: loom.gelu %[[X]]
// CHECK: %[[Y:.*]] = loom.linear %{{.*}}, %[[W16]]
// CHECK: loom.convert %[[Y]] : tensor<2x4xbf16> to tensor<2x4xf32>
// CHECK-NOT: loom.convert %[[W]]
// CHECK: return
func.func @step(%w: tensor<4x4xf32>, %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%acc = %x) -> (tensor<2x4xf32>) {
    %s = scf.for %j = %c0 to %c2 step %c1 iter_args(%in = %acc) -> (tensor<2x4xf32>) {
      %g = loom.gelu %x : tensor<2x4xf32>
      %w16 = loom.convert %w : tensor<4x4xf32> to tensor<4x4xbf16>
      %in16 = loom.convert %in : tensor<2x4xf32> to tensor<2x4xbf16>
      %y = loom.linear %in16, %w16 : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
      %y32 = loom.convert %y : tensor<2x4xbf16> to tensor<2x4xf32>
      %sum = loom.add %y32, %g : tensor<2x4xf32>
      scf.yield %sum : tensor<2x4xf32>
    }
    scf.yield %s : tensor<2x4xf32>
  }
  %w16b = loom.convert %w : tensor<4x4xf32> to tensor<4x4xbf16>
  %z = loom.linear %r, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %z16 = loom.convert %z : tensor<2x4xf32> to tensor<2x4xbf16>
  %u = loom.linear %z16, %w16b : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
  %u32 = loom.convert %u : tensor<2x4xbf16> to tensor<2x4xf32>
  return %u32 : tensor<2x4xf32>
}

// -----

// Conversions in two branches, neither dominating the other, both stay;
// conversions to another type or with another scale are not the same.
// CHECK-LABEL: func.func @branches(
// CHECK: scf.if
// CHECK: loom.convert %{{.*}} : tensor<4xf32> to tensor<4xbf16>
// CHECK: else
// CHECK: loom.convert %{{.*}} : tensor<4xf32> to tensor<4xbf16>
// CHECK: loom.convert %{{.*}} : tensor<4xf32> to tensor<4xf16>
// CHECK: loom.convert %{{.*}} scale %{{.*}} : tensor<4xf32> to tensor<4xf16>
func.func @branches(%c: i1, %v: tensor<4xf32>, %s: tensor<f32>) -> (tensor<4xbf16>, tensor<4xf16>, tensor<4xf16>) {
  %r = scf.if %c -> tensor<4xbf16> {
    %a = loom.convert %v : tensor<4xf32> to tensor<4xbf16>
    scf.yield %a : tensor<4xbf16>
  } else {
    %b = loom.convert %v : tensor<4xf32> to tensor<4xbf16>
    scf.yield %b : tensor<4xbf16>
  }
  %h = loom.convert %v : tensor<4xf32> to tensor<4xf16>
  %k = loom.convert %v scale %s : tensor<4xf32> to tensor<4xf16>
  return %r, %h, %k : tensor<4xbf16>, tensor<4xf16>, tensor<4xf16>
}
