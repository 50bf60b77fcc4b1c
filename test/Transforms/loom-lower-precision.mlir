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

// With micro-batches each pass starts from its part of the scaled mean:
// the scale divided by their count, which the pass also divides its
// gradients by.
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 4, schedule = gpipe, recompute = none, sequence_parallel = false>, loom.training = #loom.training<batch = 8, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = fp16>} {
  func.func @forward_grad(%w: tensor<4x4xf32> {loom.param = "w"}, %x: tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>) {
    %seed = loom.seed : tensor<f32>
    %dy = loom.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %dx, %dw = loom.linear_grad %dy, %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>)
    return %seed, %dw : tensor<f32>, tensor<4x4xf32>
  }
  func.func @train_step(%w: tensor<4x4xf32> {loom.param = "w"}, %x: tensor<2x4xf32>, %m: tensor<4x4xf32>, %v: tensor<4x4xf32>, %lr: tensor<f32>, %step: tensor<f32>, %scale: tensor<f32>) -> (tensor<f32> {loom.output = "grad_norm"}, tensor<4x4xf32>) {
    %l, %g = call @forward_grad(%w, %x) : (tensor<4x4xf32>, tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>)
    %n = loom.sum_squares %g : tensor<4x4xf32> -> tensor<f32>
    %p, %nm, %nv = loom.adamw %w, %g, %m, %v, %lr, %step, %scale {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4x4xf32>
    return %n, %p : tensor<f32>, tensor<4x4xf32>
  }
}
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[MS:[a-z0-9]+]]: tensor<f32> {loom.input = "loss_scale"})
// CHECK: %[[WHOLE:.*]] = tensor.extract %[[MS]][] : tensor<f32>
// CHECK: %[[QUARTER:.*]] = arith.constant 2.500000e-01 : f32
// CHECK: %[[PART:.*]] = arith.mulf %[[WHOLE]], %[[QUARTER]] : f32
// CHECK: %[[PASS:.*]] = tensor.from_elements %[[PART]] : tensor<f32>
// CHECK: call @forward_grad(%{{.*}}, %{{.*}}, %[[PASS]])

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

// fp16 in a pipeline: the last stage's backward passes are seeded in its
// step, whose loss scale goes to every backward half; a backward half
// divides its parameters' gradients by it and hands the gradient of the
// activations it received on still scaled. What a forward half computes
// and keeps for its backward half stays f16 between them; what the step
// itself reads (the output, the gradients) is f32, as is what the stage
// received and keeps.
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = fp16>} {
  func.func private @stage_forward(%w: tensor<4x4xf32> {loom.param = "w"}, %x: tensor<2x3x4xf32> {loom.input = "activations"}, %t: tensor<2x3xi32> {loom.input = "targets"}) -> (tensor<f32> {loom.output = "loss"}, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
    %y = loom.linear %x, %w : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
    %loss = loom.cross_entropy %y, %t {num_classes = 4 : i64} : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
    return %loss, %y, %x : tensor<f32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
  }
  func.func private @stage_backward(%w: tensor<4x4xf32> {loom.param = "w"}, %t: tensor<2x3xi32> {loom.input = "targets"}, %y: tensor<2x3x4xf32>, %x: tensor<2x3x4xf32>, %seed: tensor<f32> {loom.input = "loss_grad"}) -> (tensor<2x3x4xf32> {loom.output = "activations_grad"}, tensor<4x4xf32> {loom.grad = "w"}) {
    %dy = loom.cross_entropy_grad %seed, %y, %t {num_classes = 4 : i64} : (tensor<f32>, tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
    %dx, %dw = loom.linear_grad %dy, %x, %w : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x4xf32>)
    return %dx, %dw : tensor<2x3x4xf32>, tensor<4x4xf32>
  }
  func.func @train_step_stage1(%w: tensor<4x4xf32> {loom.param = "w"}, %m: tensor<4x4xf32>, %v: tensor<4x4xf32>, %t: tensor<2x3xi32>, %lr: tensor<f32>, %step: tensor<f32>) -> (tensor<f32> {loom.output = "grad_norm"}, tensor<4x4xf32>) attributes {loom.stage = 1 : i64} {
    %x = loom.recv from 0 tag 0 : tensor<2x3x4xf32>
    %loss, %y, %kept = call @stage_forward(%w, %x, %t) : (tensor<4x4xf32>, tensor<2x3x4xf32>, tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>)
    %seed = loom.seed : tensor<f32>
    %dx, %dw = call @stage_backward(%w, %t, %y, %kept, %seed) : (tensor<4x4xf32>, tensor<2x3xi32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<f32>) -> (tensor<2x3x4xf32>, tensor<4x4xf32>)
    loom.send %dx to 0 tag 1 : tensor<2x3x4xf32>
    %n = loom.sum_squares %dw : tensor<4x4xf32> -> tensor<f32>
    %p, %nm, %nv = loom.adamw %w, %dw, %m, %v, %lr, %step, %n {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4x4xf32>
    return %n, %p : tensor<f32>, tensor<4x4xf32>
  }
}

// CHECK-LABEL: func.func private @stage_forward(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x4xf32> {loom.input = "activations"}, %{{.*}}) -> (tensor<f32> {loom.output = "loss"}, tensor<2x3x4xf16>, tensor<2x3x4xf32>)
// CHECK-DAG: %[[X16:.*]] = loom.convert %[[X]] : tensor<2x3x4xf32> to tensor<2x3x4xf16>
// CHECK-DAG: %[[Y16:.*]] = loom.linear %[[X16]], %{{.*}} -> tensor<2x3x4xf16>
// CHECK: return %{{.*}}, %[[Y16]], %[[X]] : tensor<f32>, tensor<2x3x4xf16>, tensor<2x3x4xf32>

// CHECK-LABEL: func.func private @stage_backward(
// CHECK-SAME: %[[Y:[a-z0-9]+]]: tensor<2x3x4xf16>, %[[KEPT:[a-z0-9]+]]: tensor<2x3x4xf32>, %[[SEED:[a-z0-9]+]]: tensor<f32> {loom.input = "loss_grad"}, %[[S:[a-z0-9]+]]: tensor<f32> {loom.input = "loss_scale"}) -> (tensor<2x3x4xf32> {loom.output = "activations_grad"}, tensor<4x4xf32> {loom.grad = "w"})
// CHECK: %[[SV:.*]] = tensor.extract %[[S]][] : tensor<f32>
// CHECK: %[[INV:.*]] = tensor.from_elements
// CHECK: %[[K16:.*]] = loom.convert %[[KEPT]] : tensor<2x3x4xf32> to tensor<2x3x4xf16>
// CHECK: loom.cross_entropy_grad %[[SEED]], %[[Y]]
// CHECK: %[[DX:.*]], %[[DW:.*]] = loom.linear_grad %{{.*}}, %[[K16]], %{{.*}} -> (tensor<2x3x4xf16>, tensor<4x4xf16>)
// CHECK-DAG: %[[DXF:.*]] = loom.convert %[[DX]] : tensor<2x3x4xf16> to tensor<2x3x4xf32>
// CHECK-DAG: %[[DWF:.*]] = loom.convert %[[DW]] scale %[[INV]] : tensor<4x4xf16> to tensor<4x4xf32>
// CHECK: return %[[DXF]], %[[DWF]]

// CHECK-LABEL: func.func @train_step_stage1(
// CHECK-SAME: %[[SS:[a-z0-9]+]]: tensor<f32> {loom.input = "loss_scale"})
// CHECK: %[[F:.*]]:3 = call @stage_forward({{.*}}) : ({{.*}}) -> (tensor<f32>, tensor<2x3x4xf16>, tensor<2x3x4xf32>)
// CHECK-NOT: loom.seed
// CHECK: call @stage_backward(%{{.*}}, %{{.*}}, %[[F]]#1, %[[F]]#2, %[[SS]], %[[SS]])
// CHECK: loom.adamw {{.*}} skip if

// -----

// A value handed from one function to another stays f32 when the
// argument taking it also takes an f32 value of the step's elsewhere
// (@second's %x), and a result the step reads itself stays f32 (@second's).
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = bf16>} {
  func.func private @first(%w: tensor<4x4xf32> {loom.param = "w"}, %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %y = loom.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func private @second(%w: tensor<4x4xf32> {loom.param = "w"}, %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %y = loom.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func @train_step(%w: tensor<4x4xf32> {loom.param = "w"}, %x: tensor<2x4xf32>, %m: tensor<4x4xf32>, %v: tensor<4x4xf32>, %lr: tensor<f32>, %step: tensor<f32>) -> (tensor<f32> {loom.output = "grad_norm"}, tensor<4x4xf32>) {
    %a = call @first(%w, %x) : (tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %b = call @second(%w, %a) : (tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %c = call @second(%w, %x) : (tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %n = loom.sum_squares %b : tensor<2x4xf32> -> tensor<f32>
    %p, %nm, %nv = loom.adamw %w, %w, %m, %v, %lr, %step, %n {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4x4xf32>
    return %n, %p : tensor<f32>, tensor<4x4xf32>
  }
}

// CHECK-LABEL: func.func private @first(
// CHECK-SAME: -> tensor<2x4xf32>
// CHECK-LABEL: func.func private @second(
// CHECK-SAME: %{{.*}}: tensor<2x4xf32>) -> tensor<2x4xf32>

// -----

// Attention's log-sum-exp keeps f32 under bf16: as the op's result, as what
// the layer loop stacks of it, and as the gradient's operand.
module attributes {loom.training = #loom.training<batch = 1, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = bf16>} {
  func.func @forward_grad(%x: tensor<1x3x4xf32> {loom.param = "x"}, %qkv: tensor<2x1x3x12xf32> {loom.param = "qkv"}) -> (tensor<f32>, tensor<1x3x12xf32>) {
    %seed = loom.seed : tensor<f32>
    %y:3 = loom.scan carry(%x : tensor<1x3x4xf32>) over(%qkv : tensor<2x1x3x12xf32>) length = 2 -> (tensor<1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x2x3xf32>) {
    ^bb0(%c: tensor<1x3x4xf32>, %q: tensor<1x3x12xf32>):
      %a, %lse = loom.causal_attention %q {num_heads = 2 : i64} : tensor<1x3x12xf32> -> tensor<1x3x4xf32>, tensor<1x2x3xf32>
      %s = loom.add %c, %a : tensor<1x3x4xf32>
      loom.yield %s, %a, %lse : tensor<1x3x4xf32>, tensor<1x3x4xf32>, tensor<1x2x3xf32>
    }
    %q0 = tensor.extract_slice %qkv[0, 0, 0, 0] [1, 1, 3, 12] [1, 1, 1, 1] : tensor<2x1x3x12xf32> to tensor<1x3x12xf32>
    %a0 = tensor.extract_slice %y#1[0, 0, 0, 0] [1, 1, 3, 4] [1, 1, 1, 1] : tensor<2x1x3x4xf32> to tensor<1x3x4xf32>
    %lse0 = tensor.extract_slice %y#2[0, 0, 0, 0] [1, 1, 2, 3] [1, 1, 1, 1] : tensor<2x1x2x3xf32> to tensor<1x2x3xf32>
    %dq = loom.causal_attention_grad %y#0, %q0, %a0, %lse0 {num_heads = 2 : i64} : (tensor<1x3x4xf32>, tensor<1x3x12xf32>, tensor<1x3x4xf32>, tensor<1x2x3xf32>) -> tensor<1x3x12xf32>
    return %seed, %dq : tensor<f32>, tensor<1x3x12xf32>
  }
}

// CHECK-LABEL: func.func @forward_grad(
// CHECK: %[[Y:.*]]:3 = loom.scan {{.*}} -> (tensor<1x3x4xbf16>, tensor<2x1x3x4xbf16>, tensor<2x1x2x3xf32>)
// CHECK: %[[A:[^,]*]], %[[LSE:[^ ]*]] = loom.causal_attention %{{.*}} : tensor<1x3x12xbf16> -> tensor<1x3x4xbf16>, tensor<1x2x3xf32>
// CHECK: loom.yield %{{.*}}, %[[A]], %[[LSE]] : tensor<1x3x4xbf16>, tensor<1x3x4xbf16>, tensor<1x2x3xf32>
// CHECK: %[[LSE0:.*]] = tensor.extract_slice %[[Y]]#2{{.*}} to tensor<1x2x3xf32>
// CHECK-NOT: loom.convert %[[LSE0]]
// CHECK: loom.causal_attention_grad {{.*}}, %[[LSE0]] {num_heads = 2 : i64} : (tensor<1x3x4xbf16>, tensor<1x3x12xbf16>, tensor<1x3x4xbf16>, tensor<1x2x3xf32>) -> tensor<1x3x12xbf16>

// -----

// In a pipeline stage, the log-sum-exp that the forward half's layer loop
// stacks goes to the backward half f32, while the attention output it
// also keeps goes bf16; the backward half's layer loop takes it as it
// came, f32 in the loop's operand, body argument and gradient.
module attributes {loom.training = #loom.training<batch = 1, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = bf16>} {
  func.func private @stage_forward(%qkv: tensor<2x1x3x12xf32> {loom.param = "qkv"}, %x: tensor<1x3x4xf32> {loom.input = "activations"}) -> (tensor<1x3x4xf32> {loom.output = "activations"}, tensor<2x1x3x4xf32>, tensor<2x1x2x3xf32>) {
    %y:3 = loom.scan carry(%x : tensor<1x3x4xf32>) over(%qkv : tensor<2x1x3x12xf32>) length = 2 -> (tensor<1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x2x3xf32>) {
    ^bb0(%c: tensor<1x3x4xf32>, %q: tensor<1x3x12xf32>):
      %a, %lse = loom.causal_attention %q {num_heads = 2 : i64} : tensor<1x3x12xf32> -> tensor<1x3x4xf32>, tensor<1x2x3xf32>
      %s = loom.add %c, %a : tensor<1x3x4xf32>
      loom.yield %s, %a, %lse : tensor<1x3x4xf32>, tensor<1x3x4xf32>, tensor<1x2x3xf32>
    }
    return %y#0, %y#1, %y#2 : tensor<1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x2x3xf32>
  }
  func.func private @stage_backward(%qkv: tensor<2x1x3x12xf32> {loom.param = "qkv"}, %a: tensor<2x1x3x4xf32>, %lse: tensor<2x1x2x3xf32>, %g: tensor<1x3x4xf32>) -> (tensor<1x3x4xf32> {loom.output = "activations_grad"}, tensor<2x1x3x12xf32> {loom.grad = "qkv"}) {
    %d:2 = loom.scan carry(%g : tensor<1x3x4xf32>) over(%qkv, %a, %lse : tensor<2x1x3x12xf32>, tensor<2x1x3x4xf32>, tensor<2x1x2x3xf32>) length = 2 reverse -> (tensor<1x3x4xf32>, tensor<2x1x3x12xf32>) {
    ^bb0(%gc: tensor<1x3x4xf32>, %q: tensor<1x3x12xf32>, %al: tensor<1x3x4xf32>, %l: tensor<1x2x3xf32>):
      %dq = loom.causal_attention_grad %gc, %q, %al, %l {num_heads = 2 : i64} : (tensor<1x3x4xf32>, tensor<1x3x12xf32>, tensor<1x3x4xf32>, tensor<1x2x3xf32>) -> tensor<1x3x12xf32>
      loom.yield %gc, %dq : tensor<1x3x4xf32>, tensor<1x3x12xf32>
    }
    return %d#0, %d#1 : tensor<1x3x4xf32>, tensor<2x1x3x12xf32>
  }
  func.func @train_step_stage0(%qkv: tensor<2x1x3x12xf32> {loom.param = "qkv"}, %x: tensor<1x3x4xf32>, %m: tensor<2x1x3x12xf32>, %v: tensor<2x1x3x12xf32>, %lr: tensor<f32>, %step: tensor<f32>) -> (tensor<f32> {loom.output = "grad_norm"}, tensor<2x1x3x12xf32>) attributes {loom.stage = 0 : i64} {
    %y:3 = call @stage_forward(%qkv, %x) : (tensor<2x1x3x12xf32>, tensor<1x3x4xf32>) -> (tensor<1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x2x3xf32>)
    loom.send %y#0 to 1 tag 0 : tensor<1x3x4xf32>
    %g = loom.recv from 1 tag 1 : tensor<1x3x4xf32>
    %d:2 = call @stage_backward(%qkv, %y#1, %y#2, %g) : (tensor<2x1x3x12xf32>, tensor<2x1x3x4xf32>, tensor<2x1x2x3xf32>, tensor<1x3x4xf32>) -> (tensor<1x3x4xf32>, tensor<2x1x3x12xf32>)
    %n = loom.sum_squares %d#1 : tensor<2x1x3x12xf32> -> tensor<f32>
    %p, %nm, %nv = loom.adamw %qkv, %d#1, %m, %v, %lr, %step, %n {beta1 = 0.9 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<2x1x3x12xf32>
    return %n, %p : tensor<f32>, tensor<2x1x3x12xf32>
  }
}

// CHECK-LABEL: func.func private @stage_forward(
// CHECK-SAME: -> (tensor<1x3x4xf32> {loom.output = "activations"}, tensor<2x1x3x4xbf16>, tensor<2x1x2x3xf32>)
// CHECK: %[[FY:.*]]:3 = loom.scan {{.*}} -> (tensor<1x3x4xbf16>, tensor<2x1x3x4xbf16>, tensor<2x1x2x3xf32>)
// CHECK: return %{{.*}}, %[[FY]]#1, %[[FY]]#2 : tensor<1x3x4xf32>, tensor<2x1x3x4xbf16>, tensor<2x1x2x3xf32>

// CHECK-LABEL: func.func private @stage_backward(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<2x1x3x4xbf16>, %[[BLSE:[a-z0-9]+]]: tensor<2x1x2x3xf32>, %{{[a-z0-9]+}}: tensor<1x3x4xf32>)
// CHECK-NOT: loom.convert %[[BLSE]]
// CHECK: loom.scan carry(%{{.*}} : tensor<1x3x4xbf16>) over(%{{.*}}, %{{.*}}, %[[BLSE]] : tensor<2x1x3x12xbf16>, tensor<2x1x3x4xbf16>, tensor<2x1x2x3xf32>) length = 2 reverse
// CHECK-NEXT: ^bb0(%{{[^:]*}}: tensor<1x3x4xbf16>, %{{[^:]*}}: tensor<1x3x12xbf16>, %{{[^:]*}}: tensor<1x3x4xbf16>, %[[L:[^:]*]]: tensor<1x2x3xf32>):
// CHECK: loom.causal_attention_grad {{.*}}, %[[L]] {num_heads = 2 : i64} : (tensor<1x3x4xbf16>, tensor<1x3x12xbf16>, tensor<1x3x4xbf16>, tensor<1x2x3xf32>) -> tensor<1x3x12xbf16>

// CHECK-LABEL: func.func @train_step_stage0(
// CHECK: %[[S:.*]]:3 = call @stage_forward({{.*}}) -> (tensor<1x3x4xf32>, tensor<2x1x3x4xbf16>, tensor<2x1x2x3xf32>)
// CHECK: call @stage_backward(%{{.*}}, %[[S]]#1, %[[S]]#2, %{{.*}})

// -----

// A layer norm's row statistics keep f32 under bf16, as its result and as
// its gradient's operands.
module attributes {loom.training = #loom.training<batch = 2, sequence = 3, optimizer = adamw, lr = 0.001, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1, grad_clip = 1.0, precision = bf16>} {
  func.func @forward_grad(%x: tensor<2x3x4xf32> {loom.param = "x"}, %w: tensor<4xf32> {loom.param = "w"}, %b: tensor<4xf32> {loom.param = "b"}) -> (tensor<f32>, tensor<4xf32>) {
    %seed = loom.seed : tensor<f32>
    %y, %mean, %rstd = loom.layer_norm %x, %w, %b {epsilon = 1.0e-5 : f64} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
    %dx, %dw, %db = loom.layer_norm_grad %y, %x, %w, %mean, %rstd : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>)
    return %seed, %dw : tensor<f32>, tensor<4xf32>
  }
}

// CHECK-LABEL: func.func @forward_grad(
// CHECK: %[[Y:[^,]*]], %[[M:[^,]*]], %[[R:[^ ]*]] = loom.layer_norm {{.*}} -> (tensor<2x3x4xbf16>, tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK-NOT: loom.convert %[[M]]
// CHECK-NOT: loom.convert %[[R]]
// CHECK: loom.layer_norm_grad %[[Y]], %{{.*}}, %{{.*}}, %[[M]], %[[R]] : (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>, tensor<4xbf16>, tensor<2x3xf32>, tensor<2x3xf32>)
