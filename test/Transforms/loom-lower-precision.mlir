// RUN: loom-opt %s --loom-lower-precision --split-input-file --verify-diagnostics | FileCheck %s

// bf16: the model's function converts each parameter once, stores what its
// ops and its layer loop make in bf16, gives an op outside the trait (a
// reshape) f32, and returns its gradients in f32; the step function, with
// the optimizer, is left in f32.
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = bf16>} {
  func.func @forward_grad(%x: tensor<2x3x4xf32> {loom.param = "x"}, %w: tensor<2x4x4xf32> {loom.param = "w"}, %w2: tensor<4x4xf32> {loom.param = "w2"}) -> (tensor<f32>, tensor<4x4xf32>) {
    %seed = loom.seed : tensor<f32>
    %y:2 = loom.scan carry(%x : tensor<2x3x4xf32>) over(%w : tensor<2x4x4xf32>) length = 2 -> (tensor<2x3x4xf32>, tensor<2x2x3x4xf32>) {
    ^bb0(%c: tensor<2x3x4xf32>, %wl: tensor<4x4xf32>):
      %h = loom.linear %c, %wl : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
      loom.yield %h, %c : tensor<2x3x4xf32>, tensor<2x3x4xf32>
    }
    %flat = tensor.collapse_shape %y#0 [[0, 1], [2]] : tensor<2x3x4xf32> into tensor<6x4xf32>
    %back = tensor.expand_shape %flat [[0, 1], [2]] output_shape [2, 3, 4] : tensor<6x4xf32> into tensor<2x3x4xf32>
    %g = loom.gelu %back : tensor<2x3x4xf32>
    %dx, %dw = loom.linear_grad %g, %x, %w2 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x4xf32>)
    return %seed, %dw : tensor<f32>, tensor<4x4xf32>
  }
  func.func @train_step(%w: tensor<4xf32> {loom.param = "w"}, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<f32>, %scale: tensor<f32>) -> (tensor<f32> {loom.output = "grad_norm"}, tensor<4xf32>) {
    %n = loom.sum_squares %g : tensor<4xf32> -> tensor<f32>
    %p, %nm, %nv = loom.adamw %w, %g, %m, %v, %lr, %step, %scale {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
    return %n, %p : tensor<f32>, tensor<4xf32>
  }
}

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x4xf32> {loom.param = "x"}, %[[W:[a-z0-9]+]]: tensor<2x4x4xf32> {loom.param = "w"}, %{{.*}}) -> (tensor<f32>, tensor<4x4xf32>)
// CHECK-DAG: %[[WL:.*]] = loom.convert %[[W]] : tensor<2x4x4xf32> to tensor<2x4x4xbf16>
// CHECK-DAG: %[[XL:.*]] = loom.convert %[[X]] : tensor<2x3x4xf32> to tensor<2x3x4xbf16>
// CHECK-DAG: loom.convert %{{.*}} : tensor<4x4xf32> to tensor<4x4xbf16>
// CHECK: %[[SEED:.*]] = loom.seed : tensor<f32>
// CHECK: %[[Y:.*]]:2 = loom.scan carry(%[[XL]] : tensor<2x3x4xbf16>) over(%[[WL]] : tensor<2x4x4xbf16>) length = 2 -> (tensor<2x3x4xbf16>, tensor<2x2x3x4xbf16>)
// CHECK: ^bb0(%[[C:.*]]: tensor<2x3x4xbf16>, %[[L:.*]]: tensor<4x4xbf16>):
// CHECK: %[[H:.*]] = loom.linear %[[C]], %[[L]] : (tensor<2x3x4xbf16>, tensor<4x4xbf16>) -> tensor<2x3x4xbf16>
// CHECK: loom.yield %[[H]], %[[C]] : tensor<2x3x4xbf16>, tensor<2x3x4xbf16>
// CHECK: %[[YW:.*]] = loom.convert %[[Y]]#0 : tensor<2x3x4xbf16> to tensor<2x3x4xf32>
// CHECK: tensor.collapse_shape %[[YW]]
// CHECK: %[[BACK:.*]] = tensor.expand_shape
// CHECK: %[[BL:.*]] = loom.convert %[[BACK]] : tensor<2x3x4xf32> to tensor<2x3x4xbf16>
// CHECK: %[[G:.*]] = loom.gelu %[[BL]] : tensor<2x3x4xbf16>
// CHECK: %{{.*}}, %[[DW:.*]] = loom.linear_grad %[[G]], %[[XL]], %{{.*}} : (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>, tensor<4x4xbf16>) -> (tensor<2x3x4xbf16>, tensor<4x4xbf16>)
// CHECK: %[[DWF:.*]] = loom.convert %[[DW]] : tensor<4x4xbf16> to tensor<4x4xf32>
// CHECK: return %[[SEED]], %[[DWF]] : tensor<f32>, tensor<4x4xf32>

// CHECK-LABEL: func.func @train_step(
// CHECK-NOT: loom.convert
// CHECK-NOT: bf16
// CHECK: loom.adamw %{{.*}} : tensor<4xf32>
// CHECK-NOT: skip

// -----

// fp16: the gradient function and the step take the loss scale; it seeds
// the backward pass and divides the returned gradients; an overflowed norm
// skips the update.
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = fp16>} {
  func.func @forward(%w: tensor<4x4xf32> {loom.param = "w"}, %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %y = loom.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func @forward_grad(%w: tensor<4x4xf32> {loom.param = "w"}, %x: tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>) {
    %seed = loom.seed : tensor<f32>
    %dy = loom.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %dx, %dw = loom.linear_grad %dy, %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>)
    %loss = loom.sum_squares %x : tensor<2x4xf32> -> tensor<f32>
    return %seed, %dw : tensor<f32>, tensor<4x4xf32>
  }
  func.func @train_step(%w: tensor<4x4xf32> {loom.param = "w"}, %x: tensor<2x4xf32>, %m: tensor<4x4xf32>, %v: tensor<4x4xf32>, %lr: tensor<f32>, %step: tensor<f32>, %scale: tensor<f32>) -> (tensor<f32> {loom.output = "grad_norm"}, tensor<4x4xf32>) {
    %l, %g = call @forward_grad(%w, %x) : (tensor<4x4xf32>, tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>)
    %n = loom.sum_squares %g : tensor<4x4xf32> -> tensor<f32>
    %p, %nm, %nv = loom.adamw %w, %g, %m, %v, %lr, %step, %scale {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4x4xf32>
    return %n, %p : tensor<f32>, tensor<4x4xf32>
  }
}

// The forward pass has no seed: no loss scale.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %{{.*}}: tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK: loom.linear {{.*}} -> tensor<2x4xf16>
// CHECK: %[[Y:.*]] = loom.convert %{{.*}} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK: return %[[Y]]

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: %[[S:[a-z0-9]+]]: tensor<f32> {loom.input = "loss_scale"}) -> (tensor<f32>, tensor<4x4xf32>)
// CHECK: %[[SV:.*]] = tensor.extract %[[S]][] : tensor<f32>
// CHECK: %[[INV:.*]] = arith.divf %{{.*}}, %[[SV]] : f32
// CHECK: %[[INVT:.*]] = tensor.from_elements %[[INV]] : tensor<f32>
// CHECK-NOT: loom.seed
// CHECK: %{{.*}}, %[[DW:.*]] = loom.linear_grad {{.*}} -> (tensor<2x4xf16>, tensor<4x4xf16>)
// CHECK: loom.sum_squares %{{.*}} : tensor<2x4xf32> -> tensor<f32>
// CHECK: %[[G:.*]] = loom.convert %[[DW]] scale %[[INVT]] : tensor<4x4xf16> to tensor<4x4xf32>
// CHECK: return %[[S]], %[[G]] : tensor<f32>, tensor<4x4xf32>

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[SS:[a-z0-9]+]]: tensor<f32> {loom.input = "loss_scale"})
// CHECK: call @forward_grad(%{{.*}}, %{{.*}}, %[[SS]])
// CHECK: %[[N:.*]] = loom.sum_squares
// CHECK: %[[NV:.*]] = tensor.extract %[[N]][] : tensor<f32>
// CHECK: %[[ABS:.*]] = math.absf %[[NV]] : f32
// CHECK: %[[OVER:.*]] = arith.cmpf uge, %[[ABS]], %{{.*}} : f32
// CHECK: %[[SKIP:.*]] = tensor.from_elements %[[OVER]] : tensor<i1>
// CHECK: loom.adamw {{.*}} skip if %[[SKIP]]

// -----

// Loss scaling tells an overflowed step by its gradient norm.
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = fp16>} {
  // expected-error@+1 {{has no 'grad_norm' output to tell an overflowed step by (loss scaling)}}
  func.func @train_step(%w: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<f32>, %scale: tensor<f32>) -> tensor<4xf32> {
    %p, %nm, %nv = loom.adamw %w, %g, %m, %v, %lr, %step, %scale {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
    return %p : tensor<4xf32>
  }
}

// -----

// The norm must be known before the updates it may skip.
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = fp16>} {
  func.func @train_step(%w: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<f32>, %scale: tensor<f32>) -> (tensor<f32> {loom.output = "grad_norm"}, tensor<4xf32>) {
    // expected-error@+1 {{comes before the step's gradient norm is known}}
    %p, %nm, %nv = loom.adamw %w, %g, %m, %v, %lr, %step, %scale {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
    %n = loom.sum_squares %g : tensor<4xf32> -> tensor<f32>
    return %n, %p : tensor<f32>, tensor<4xf32>
  }
}

// -----

// expected-error@+1 {{precision bf16 is not compiled for pipeline plans yet (pp = 2); use fp32}}
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 2, zero = 0, micro_batches = 2, schedule = gpipe, recompute = none, sequence_parallel = false>, loom.training = #loom.training<batch = 4, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = bf16>} {
}
