// RUN: loom-opt %s --loom-place-offload --split-input-file | FileCheck %s

// offload=optimizer: the master weights and state stay the step's arguments,
// marked host; the device computes with a bf16 copy (the gradient function
// converts the parameter to bf16 at once), which the host function refreshes
// through an explicit transfer after its update. The gradient crosses as
// soon as the device has it, into host memory the runtime holds (an output
// `grad.w`), which the host function reads where it lies.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: {loom.host, loom.param = "w"}
// CHECK-SAME: {loom.host, loom.state = "m.w"}
// CHECK-SAME: %[[COPY:[a-z0-9]+]]: tensor<4x8xbf16> {loom.param_copy = "w"}
// CHECK-SAME: %[[SENT:[a-z0-9]+]]: tensor<4x8xf32> {loom.host, loom.output = "grad.w"}
// CHECK-SAME: tensor<4x8xbf16> {loom.updates = 6 : i64})
// CHECK: %[[WIDE:.*]] = loom.convert %[[COPY]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK: %[[GRAD:.*]]:2 = call @forward_grad(%[[WIDE]],
// CHECK-NEXT: %[[G:.*]] = loom.transfer %[[GRAD]]#1 into %[[SENT]] to host : tensor<4x8xf32>
// The timeline's optimizer span is the host's call.
// CHECK: loom.trace_begin optimizer
// CHECK-NEXT: call @loom_rt_host_begin()
// CHECK-NEXT: %[[HOST:.*]]:4 = call @train_step_host(%arg0, %[[G]], %arg1, %arg2, %arg4, %arg5, %[[COPY]]) {no_inline}
// CHECK-NEXT: call @loom_rt_host_end()
// CHECK-NEXT: loom.trace_end optimizer
// CHECK-NEXT: return %[[GRAD]]#0, %[[HOST]]#0, %[[HOST]]#1, %[[HOST]]#2, %[[HOST]]#3
// CHECK-LABEL: func.func private @train_step_host
// CHECK-SAME: attributes {loom.host, no_inline}
// CHECK-NOT: loom.transfer %arg1
// CHECK: %[[LR:.*]] = loom.transfer %arg4 into %{{.*}} to host : tensor<f32>
// CHECK: %[[NEW:.*]], %{{.*}}, %{{.*}} = loom.adamw %arg0, %arg1, %arg2, %arg3, %[[LR]]
// CHECK: %[[NARROW:.*]] = loom.convert %[[NEW]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK: %[[BACK:.*]] = loom.transfer %[[NARROW]] into %arg6 to device : tensor<4x8xbf16>
// CHECK: return %[[NEW]], %{{.*}}, %{{.*}}, %[[BACK]]
// CHECK: func.func private @loom_rt_host_begin()
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false, offload = optimizer>} {
  func.func @forward_grad(%w: tensor<4x8xf32> {loom.param = "w"}, %t: tensor<2x4xi32> {loom.input = "tokens"}) -> (tensor<f32> {loom.output = "loss"}, tensor<4x8xf32> {loom.grad = "w"}) {
    %n = loom.convert %w : tensor<4x8xf32> to tensor<4x8xbf16>
    %back = loom.convert %n : tensor<4x8xbf16> to tensor<4x8xf32>
    %s = loom.sum_squares %back : tensor<4x8xf32> -> tensor<f32>
    return %s, %back : tensor<f32>, tensor<4x8xf32>
  }
  func.func @train_step(%w: tensor<4x8xf32> {loom.param = "w"}, %m: tensor<4x8xf32> {loom.state = "m.w"}, %v: tensor<4x8xf32> {loom.state = "v.w"}, %t: tensor<2x4xi32> {loom.input = "tokens"}, %lr: tensor<f32> {loom.input = "lr"}, %step: tensor<f32> {loom.input = "step"}) -> (tensor<f32> {loom.output = "loss"}, tensor<4x8xf32> {loom.updates = 0 : i64}, tensor<4x8xf32> {loom.updates = 1 : i64}, tensor<4x8xf32> {loom.updates = 2 : i64}) {
    %loss, %g = call @forward_grad(%w, %t) : (tensor<4x8xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<4x8xf32>)
    %one = arith.constant dense<1.0> : tensor<f32>
    loom.trace_begin optimizer micro_batch -1 chunk -1
    %p, %m2, %v2 = loom.adamw %w, %g, %m, %v, %lr, %step, %one {beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4x8xf32>
    loom.trace_end optimizer
    return %loss, %p, %m2, %v2 : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  }
}

// -----

// The clipping norm reads the gradients on their way to the updates: with
// every gradient on the host and nothing summing the norm over ranks, the
// host computes it, and the gradient norm the step outputs crosses back.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[SENT:[a-z0-9]+]]: tensor<4xf32> {loom.host, loom.output = "grad.w"}
// CHECK: %[[GRAD:.*]] = loom.add
// CHECK-NEXT: %[[G:.*]] = loom.transfer %[[GRAD]] into %[[SENT]] to host
// CHECK-NOT: loom.sum_squares
// CHECK: %[[NORM:.*]] = tensor.empty() : tensor<f32>
// CHECK: %[[HOST:.*]]:5 = call @train_step_host(%[[G]], %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %[[NORM]])
// CHECK: return %[[HOST]]#0, %[[HOST]]#1, %[[HOST]]#2, %[[HOST]]#4, %[[HOST]]#3
// CHECK-LABEL: func.func private @train_step_host
// CHECK: %[[SQ:.*]] = loom.sum_squares %arg0
// CHECK: loom.adamw %arg1, %arg0, %arg2, %arg3, %{{.*}}, %{{.*}}, %[[SQ]]
// CHECK: loom.transfer %[[SQ]] into %arg7 to device : tensor<f32>
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false, offload = optimizer>} {
  func.func @train_step(%g: tensor<4xf32> {loom.input = "g"}, %w: tensor<4xf32> {loom.param = "w"}, %m: tensor<4xf32> {loom.state = "m.w"}, %v: tensor<4xf32> {loom.state = "v.w"}, %lr: tensor<f32> {loom.input = "lr"}, %step: tensor<f32> {loom.input = "step"}) -> (tensor<4xf32> {loom.updates = 1 : i64}, tensor<4xf32> {loom.updates = 2 : i64}, tensor<4xf32> {loom.updates = 3 : i64}, tensor<f32> {loom.output = "grad_norm"}) {
    %grad = loom.add %g, %g : tensor<4xf32>
    %sq = loom.sum_squares %grad : tensor<4xf32> -> tensor<f32>
    %p, %m2, %v2 = loom.adamw %w, %grad, %m, %v, %lr, %step, %sq {beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
    return %p, %m2, %v2, %sq : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>
  }
}

// -----

// Where a collective sums the norm over ranks (tensor parallelism, ZeRO-2
// and 3, pipelines), the host computes its rank's sum of squares in a
// function of its own, called before the collective, and sends it back;
// the device sums it over the ranks, and the host receives the factor.
// The device reads its gradient no more.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[GRAD:.*]] = loom.add
// CHECK-NEXT: %[[G:.*]] = loom.transfer %[[GRAD]] into %{{.*}} to host
// CHECK-NEXT: %[[BUF:.*]] = tensor.empty() : tensor<f32>
// CHECK-NEXT: call @loom_rt_host_begin()
// CHECK-NEXT: %[[SQ:.*]] = call @train_step_host_sums(%[[G]], %[[BUF]]) {no_inline}
// CHECK-NEXT: call @loom_rt_host_end()
// CHECK-NEXT: shard.all_reduce %[[SQ]]
// CHECK-NOT: %[[GRAD]]
// CHECK: call @train_step_host(%arg1, %[[G]],
// CHECK-LABEL: func.func private @train_step_host_sums
// CHECK-SAME: attributes {loom.host, no_inline}
// CHECK: %[[S:.*]] = loom.sum_squares %arg0
// CHECK: loom.transfer %[[S]] into %arg1 to device : tensor<f32>
module attributes {loom.plan = #loom.plan<dp = 1, tp = 2, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false, offload = optimizer>} {
  shard.grid @loom_grid(shape = 1x1x2)
  func.func @train_step(%g: tensor<4xf32> {loom.input = "g"}, %w: tensor<4xf32> {loom.param = "w"}, %m: tensor<4xf32> {loom.state = "m.w"}, %v: tensor<4xf32> {loom.state = "v.w"}, %lr: tensor<f32> {loom.input = "lr"}, %step: tensor<f32> {loom.input = "step"}) -> (tensor<4xf32> {loom.updates = 1 : i64}, tensor<4xf32> {loom.updates = 2 : i64}, tensor<4xf32> {loom.updates = 3 : i64}, tensor<f32> {loom.output = "grad_norm"}) {
    %grad = loom.add %g, %g : tensor<4xf32>
    %sq = loom.sum_squares %grad : tensor<4xf32> -> tensor<f32>
    %sum = shard.all_reduce %sq on @loom_grid grid_axes = [2] : tensor<f32> -> tensor<f32>
    %p, %m2, %v2 = loom.adamw %w, %grad, %m, %v, %lr, %step, %sum {beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
    return %p, %m2, %v2, %sum : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>
  }
}

// -----

// offload=parameters in f32: a copy would hold the master's own values; the
// device fetches the master itself, layer by layer, and the host's update
// writes the master alone.
// CHECK-LABEL: func.func @forward_grad
// CHECK: loom.scan
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<8xf32>, %[[SLICE:.*]]: tensor<8xf32>):
// CHECK-NEXT: %[[BUF:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT: loom.transfer %[[SLICE]] into %[[BUF]] to device : tensor<8xf32>
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: loom.param_copy
// CHECK: call @forward_grad(%arg0,
// CHECK-LABEL: func.func private @train_step_host
// CHECK-NOT: to device : tensor<4x8xf32>
// CHECK: return
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false, offload = parameters>} {
  func.func @forward_grad(%w: tensor<4x8xf32> {loom.param = "h.*.w"}, %x: tensor<8xf32> {loom.input = "x"}) -> (tensor<f32> {loom.output = "loss"}, tensor<4x8xf32> {loom.grad = "h.*.w"}) {
    %y:2 = loom.scan carry(%x : tensor<8xf32>) over(%w : tensor<4x8xf32>) length = 4 -> (tensor<8xf32>, tensor<4x8xf32>) {
    ^bb0(%xl: tensor<8xf32>, %wl: tensor<8xf32>):
      %s = loom.add %xl, %wl : tensor<8xf32>
      loom.yield %s, %s : tensor<8xf32>, tensor<8xf32>
    }
    %sq = loom.sum_squares %y#0 : tensor<8xf32> -> tensor<f32>
    return %sq, %y#1 : tensor<f32>, tensor<4x8xf32>
  }
  func.func @train_step(%w: tensor<4x8xf32> {loom.param = "h.*.w"}, %m: tensor<4x8xf32> {loom.state = "m.h.*.w"}, %v: tensor<4x8xf32> {loom.state = "v.h.*.w"}, %x: tensor<8xf32> {loom.input = "x"}, %lr: tensor<f32> {loom.input = "lr"}, %step: tensor<f32> {loom.input = "step"}) -> (tensor<f32> {loom.output = "loss"}, tensor<4x8xf32> {loom.updates = 0 : i64}, tensor<4x8xf32> {loom.updates = 1 : i64}, tensor<4x8xf32> {loom.updates = 2 : i64}) {
    %loss, %g = call @forward_grad(%w, %x) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<f32>, tensor<4x8xf32>)
    %one = arith.constant dense<1.0> : tensor<f32>
    %p, %m2, %v2 = loom.adamw %w, %g, %m, %v, %lr, %step, %one {beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4x8xf32>
    return %loss, %p, %m2, %v2 : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  }
}

// -----

// Mixed precision: the backward loop stacks a layer gradient in bf16, which
// the gradient function widens after the loop. The stack crosses to the
// host and the device reads it no more, so each layer's is widened in the
// loop instead, for it to cross layer by layer.
// CHECK-LABEL: func.func @forward_grad
// CHECK: %[[Y:.*]]:2 = loom.scan {{.*}} -> (tensor<8xbf16>, tensor<4x8xf32>)
// CHECK: %[[WIDE:.*]] = loom.convert %{{.*}} : tensor<8xbf16> to tensor<8xf32>
// CHECK-NEXT: loom.yield %{{.*}}, %[[WIDE]] : tensor<8xbf16>, tensor<8xf32>
// CHECK-NOT: loom.convert
// CHECK: return %{{.*}}, %[[Y]]#1
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[G:.*]]:2 = call @forward_grad
// CHECK-NEXT: loom.transfer %[[G]]#1 into %{{.*}} to host : tensor<4x8xf32>
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false, offload = optimizer>} {
  func.func @forward_grad(%w: tensor<4x8xf32> {loom.param = "h.*.w"}, %x: tensor<8xbf16> {loom.input = "x"}) -> (tensor<f32> {loom.output = "loss"}, tensor<4x8xf32> {loom.grad = "h.*.w"}) {
    %n = loom.convert %w : tensor<4x8xf32> to tensor<4x8xbf16>
    %y:2 = loom.scan carry(%x : tensor<8xbf16>) over(%n : tensor<4x8xbf16>) length = 4 reverse -> (tensor<8xbf16>, tensor<4x8xbf16>) {
    ^bb0(%xl: tensor<8xbf16>, %wl: tensor<8xbf16>):
      %s = loom.add %xl, %wl : tensor<8xbf16>
      loom.yield %s, %s : tensor<8xbf16>, tensor<8xbf16>
    }
    %sq = loom.sum_squares %n : tensor<4x8xbf16> -> tensor<f32>
    %grad = loom.convert %y#1 : tensor<4x8xbf16> to tensor<4x8xf32>
    return %sq, %grad : tensor<f32>, tensor<4x8xf32>
  }
  func.func @train_step(%w: tensor<4x8xf32> {loom.param = "h.*.w"}, %m: tensor<4x8xf32> {loom.state = "m.h.*.w"}, %v: tensor<4x8xf32> {loom.state = "v.h.*.w"}, %x: tensor<8xbf16> {loom.input = "x"}, %lr: tensor<f32> {loom.input = "lr"}, %step: tensor<f32> {loom.input = "step"}) -> (tensor<f32> {loom.output = "loss"}, tensor<4x8xf32> {loom.updates = 0 : i64}, tensor<4x8xf32> {loom.updates = 1 : i64}, tensor<4x8xf32> {loom.updates = 2 : i64}) {
    %loss, %g = call @forward_grad(%w, %x) : (tensor<4x8xf32>, tensor<8xbf16>) -> (tensor<f32>, tensor<4x8xf32>)
    %one = arith.constant dense<1.0> : tensor<f32>
    %p, %m2, %v2 = loom.adamw %w, %g, %m, %v, %lr, %step, %one {beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4x8xf32>
    return %loss, %p, %m2, %v2 : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  }
}

// -----

// fp16: the gradient function widens the stack dividing it by the loss
// scale. The scale, computed before the loop, is carried through the loop
// unchanged (its body is isolated from above), once for every gradient,
// and each layer's gradient is widened and divided in the loop.
// CHECK-LABEL: func.func @forward_grad
// CHECK: %[[INV:.*]] = tensor.from_elements
// CHECK: %[[Y:.*]]:4 = loom.scan carry(%{{.*}}, %[[INV]] : tensor<8xf16>, tensor<f32>) {{.*}} -> (tensor<8xf16>, tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<8xf16>, %[[S:.*]]: tensor<f32>,
// CHECK: %[[A:.*]] = loom.convert %{{.*}} scale %[[S]] : tensor<8xf16> to tensor<8xf32>
// CHECK: %[[B:.*]] = loom.convert %{{.*}} scale %[[S]] : tensor<8xf16> to tensor<8xf32>
// CHECK-NEXT: loom.yield %{{.*}}, %[[S]], %[[A]], %[[B]] : tensor<8xf16>, tensor<f32>, tensor<8xf32>, tensor<8xf32>
// CHECK-NOT: loom.convert
// CHECK: return %{{.*}}, %[[Y]]#2, %[[Y]]#3
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[G:.*]]:3 = call @forward_grad
// CHECK-NEXT: loom.transfer %[[G]]#1 into %{{.*}} to host : tensor<4x8xf32>
// CHECK-NEXT: loom.transfer %[[G]]#2 into %{{.*}} to host : tensor<4x8xf32>
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false, offload = optimizer>} {
  func.func @forward_grad(%w: tensor<4x8xf32> {loom.param = "h.*.w"}, %u: tensor<4x8xf32> {loom.param = "h.*.u"}, %x: tensor<8xf16> {loom.input = "x"}, %scale: tensor<f32> {loom.input = "loss_scale"}) -> (tensor<f32> {loom.output = "loss"}, tensor<4x8xf32> {loom.grad = "h.*.w"}, tensor<4x8xf32> {loom.grad = "h.*.u"}) {
    %e = tensor.extract %scale[] : tensor<f32>
    %one = arith.constant 1.0 : f32
    %r = arith.divf %one, %e : f32
    %inv = tensor.from_elements %r : tensor<f32>
    %n = loom.convert %w : tensor<4x8xf32> to tensor<4x8xf16>
    %k = loom.convert %u : tensor<4x8xf32> to tensor<4x8xf16>
    %y:3 = loom.scan carry(%x : tensor<8xf16>) over(%n, %k : tensor<4x8xf16>, tensor<4x8xf16>) length = 4 reverse -> (tensor<8xf16>, tensor<4x8xf16>, tensor<4x8xf16>) {
    ^bb0(%xl: tensor<8xf16>, %wl: tensor<8xf16>, %ul: tensor<8xf16>):
      %s = loom.add %xl, %wl : tensor<8xf16>
      %t = loom.add %s, %ul : tensor<8xf16>
      loom.yield %t, %s, %t : tensor<8xf16>, tensor<8xf16>, tensor<8xf16>
    }
    %sq = loom.sum_squares %n : tensor<4x8xf16> -> tensor<f32>
    %gw = loom.convert %y#1 scale %inv : tensor<4x8xf16> to tensor<4x8xf32>
    %gu = loom.convert %y#2 scale %inv : tensor<4x8xf16> to tensor<4x8xf32>
    return %sq, %gw, %gu : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>
  }
  func.func @train_step(%w: tensor<4x8xf32> {loom.param = "h.*.w"}, %u: tensor<4x8xf32> {loom.param = "h.*.u"}, %mw: tensor<4x8xf32> {loom.state = "m.h.*.w"}, %mu: tensor<4x8xf32> {loom.state = "m.h.*.u"}, %vw: tensor<4x8xf32> {loom.state = "v.h.*.w"}, %vu: tensor<4x8xf32> {loom.state = "v.h.*.u"}, %x: tensor<8xf16> {loom.input = "x"}, %lr: tensor<f32> {loom.input = "lr"}, %step: tensor<f32> {loom.input = "step"}, %scale: tensor<f32> {loom.input = "loss_scale"}) -> (tensor<f32> {loom.output = "loss"}, tensor<4x8xf32> {loom.updates = 0 : i64}, tensor<4x8xf32> {loom.updates = 1 : i64}, tensor<4x8xf32> {loom.updates = 2 : i64}, tensor<4x8xf32> {loom.updates = 3 : i64}, tensor<4x8xf32> {loom.updates = 4 : i64}, tensor<4x8xf32> {loom.updates = 5 : i64}) {
    %loss, %gw, %gu = call @forward_grad(%w, %u, %x, %scale) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf16>, tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>)
    %one = arith.constant dense<1.0> : tensor<f32>
    %p, %m2, %v2 = loom.adamw %w, %gw, %mw, %vw, %lr, %step, %one {beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4x8xf32>
    %q, %m3, %v3 = loom.adamw %u, %gu, %mu, %vu, %lr, %step, %one {beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4x8xf32>
    return %loss, %p, %q, %m2, %m3, %v2, %v3 : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  }
}

// -----

// A device op that mixes a sent gradient with the device's values (the norm
// under ZeRO-1 reads the whole reduced gradients, of which the host gets a
// slice) reads the device's gradient: it cannot read host memory.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[GRAD:.*]] = loom.add
// CHECK-NEXT: %[[G:.*]] = loom.transfer %[[GRAD]] into %{{.*}} to host
// CHECK-NEXT: loom.sum_squares %[[GRAD]], %arg6
// CHECK: call @train_step_host(%arg1, %[[G]],
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false, offload = optimizer>} {
  func.func @train_step(%g: tensor<4xf32> {loom.input = "g"}, %w: tensor<4xf32> {loom.param = "w"}, %m: tensor<4xf32> {loom.state = "m.w"}, %v: tensor<4xf32> {loom.state = "v.w"}, %lr: tensor<f32> {loom.input = "lr"}, %step: tensor<f32> {loom.input = "step"}, %d: tensor<4xf32> {loom.input = "d"}) -> (tensor<4xf32> {loom.updates = 1 : i64}, tensor<4xf32> {loom.updates = 2 : i64}, tensor<4xf32> {loom.updates = 3 : i64}, tensor<f32> {loom.output = "grad_norm"}) {
    %grad = loom.add %g, %g : tensor<4xf32>
    %sq = loom.sum_squares %grad, %d : tensor<4xf32>, tensor<4xf32> -> tensor<f32>
    %p, %m2, %v2 = loom.adamw %w, %grad, %m, %v, %lr, %step, %sq {beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
    return %p, %m2, %v2, %sq : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>
  }
}

// -----

// Micro-batches: the loop sums the gradient from zeros and the sum crosses
// after it. Each micro-batch's gradient crosses instead, summed on the
// host where the sum would have arrived: the host's buffer is the loop's
// iteration argument, the first micro-batch's sum starts from zero, and
// the host function reads the loop's result where it lies.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[HOST:[a-z0-9]+]]: tensor<4xf32> {loom.host, loom.output = "grad.w"}
// CHECK: %[[SUM:.*]]:2 = scf.for %[[I:.*]] = %[[LB:[a-z0-9]+]] to {{.*}} iter_args(%{{.*}} = %{{.*}}, %[[PART:.*]] = %[[HOST]])
// CHECK-NEXT: %[[MORE:.*]] = arith.cmpi ne, %[[I]], %[[LB]] : index
// CHECK: %[[G:.*]]:2 = func.call @forward_grad
// CHECK: %[[T:.*]] = loom.transfer %[[G]]#1 into %[[PART]] to host accumulate if %[[MORE]] : tensor<4xf32>
// CHECK: scf.yield %{{.*}}, %[[T]]
// CHECK-NOT: loom.transfer
// CHECK: call @train_step_host(%{{.*}}, %[[SUM]]#1,
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 2, schedule = gpipe, recompute = none, sequence_parallel = false, offload = optimizer>} {
  func.func private @forward_grad(%w: tensor<4xf32>, %x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) {
    %sq = loom.sum_squares %w : tensor<4xf32> -> tensor<f32>
    %g = loom.add %w, %x : tensor<4xf32>
    return %sq, %g : tensor<f32>, tensor<4xf32>
  }
  func.func @train_step(%w: tensor<4xf32> {loom.param = "w"}, %m: tensor<4xf32> {loom.state = "m.w"}, %v: tensor<4xf32> {loom.state = "v.w"}, %x: tensor<4xf32> {loom.input = "x"}, %lr: tensor<f32> {loom.input = "lr"}, %step: tensor<f32> {loom.input = "step"}) -> (tensor<f32> {loom.output = "loss"}, tensor<4xf32> {loom.updates = 0 : i64}, tensor<4xf32> {loom.updates = 1 : i64}, tensor<4xf32> {loom.updates = 2 : i64}) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %zero = arith.constant dense<0.0> : tensor<f32>
    %zeros = arith.constant dense<0.0> : tensor<4xf32>
    %sums:2 = scf.for %i = %c0 to %c2 step %c1 iter_args(%l = %zero, %s = %zeros) -> (tensor<f32>, tensor<4xf32>) {
      %loss, %g = func.call @forward_grad(%w, %x) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>)
      %l2 = loom.add %l, %loss : tensor<f32>
      %s2 = loom.add %s, %g : tensor<4xf32>
      scf.yield %l2, %s2 : tensor<f32>, tensor<4xf32>
    }
    %one = arith.constant dense<1.0> : tensor<f32>
    %p, %m2, %v2 = loom.adamw %w, %sums#1, %m, %v, %lr, %step, %one {beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
    return %sums#0, %p, %m2, %v2 : tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// A pipeline's micro-batches: its schedule runs each one's backward pass as
// a call of its own and sums each gradient over them, the first one's plus
// the next's and so on. Each call's gradient crosses instead and the host
// sums them: the first crosses as it is, each later one adds the host's
// sum so far to itself where the device added it. The first micro-batch's
// layer-loop stack crosses right after its call, so that it can leave the
// loop layer by layer; a gradient made outside the loop where the device
// added it.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[SW:[a-z0-9]+]]: tensor<4x8xf32> {loom.host, loom.output = "grad.h.*.w"}
// CHECK-SAME: %[[SB:[a-z0-9]+]]: tensor<8xf32> {loom.host, loom.output = "grad.b"}
// CHECK: %[[TRUE:.*]] = arith.constant true
// CHECK-NEXT: %[[G0:.*]]:2 = call @backward
// CHECK-NEXT: %[[W0:.*]] = loom.transfer %[[G0]]#0 into %[[SW]] to host : tensor<4x8xf32>
// CHECK-NEXT: %[[G1:.*]]:2 = call @backward
// CHECK-NEXT: %[[W1:.*]] = loom.transfer %[[G1]]#0 into %[[W0]] to host accumulate if %[[TRUE]] : tensor<4x8xf32>
// CHECK-NEXT: %[[B0:.*]] = loom.transfer %[[G0]]#1 into %[[SB]] to host : tensor<8xf32>
// CHECK-NEXT: %[[B1:.*]] = loom.transfer %[[G1]]#1 into %[[B0]] to host accumulate if %[[TRUE]] : tensor<8xf32>
// CHECK-NEXT: %[[G2:.*]]:2 = call @backward
// CHECK-NEXT: %[[W2:.*]] = loom.transfer %[[G2]]#0 into %[[W1]] to host accumulate if %[[TRUE]] : tensor<4x8xf32>
// CHECK-NEXT: %[[B2:.*]] = loom.transfer %[[G2]]#1 into %[[B1]] to host accumulate if %[[TRUE]] : tensor<8xf32>
// CHECK-NOT: loom.add
// CHECK: call @train_step_host(%{{.*}}, %[[W2]], %{{.*}}, %{{.*}}, %{{.*}}, %[[B2]],
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 3, schedule = gpipe, recompute = none, sequence_parallel = false, offload = optimizer>} {
  func.func private @backward(%w: tensor<4x8xf32>, %b: tensor<8xf32>, %x: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
    %y:2 = loom.scan carry(%x : tensor<8xf32>) over(%w : tensor<4x8xf32>) length = 4 reverse -> (tensor<8xf32>, tensor<4x8xf32>) {
    ^bb0(%xl: tensor<8xf32>, %wl: tensor<8xf32>):
      %s = loom.add %xl, %wl : tensor<8xf32>
      loom.yield %s, %s : tensor<8xf32>, tensor<8xf32>
    }
    %gb = loom.add %y#0, %b : tensor<8xf32>
    return %y#1, %gb : tensor<4x8xf32>, tensor<8xf32>
  }
  func.func @train_step(%w: tensor<4x8xf32> {loom.param = "h.*.w"}, %b: tensor<8xf32> {loom.param = "b"}, %mw: tensor<4x8xf32> {loom.state = "m.h.*.w"}, %vw: tensor<4x8xf32> {loom.state = "v.h.*.w"}, %mb: tensor<8xf32> {loom.state = "m.b"}, %vb: tensor<8xf32> {loom.state = "v.b"}, %x: tensor<8xf32> {loom.input = "x"}, %lr: tensor<f32> {loom.input = "lr"}, %step: tensor<f32> {loom.input = "step"}) -> (tensor<4x8xf32> {loom.updates = 0 : i64}, tensor<8xf32> {loom.updates = 1 : i64}, tensor<4x8xf32> {loom.updates = 2 : i64}, tensor<4x8xf32> {loom.updates = 3 : i64}, tensor<8xf32> {loom.updates = 4 : i64}, tensor<8xf32> {loom.updates = 5 : i64}) {
    %g0:2 = call @backward(%w, %b, %x) : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
    %g1:2 = call @backward(%w, %b, %x) : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
    %w1 = loom.add %g0#0, %g1#0 : tensor<4x8xf32>
    %b1 = loom.add %g0#1, %g1#1 : tensor<8xf32>
    %g2:2 = call @backward(%w, %b, %x) : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
    %w2 = loom.add %w1, %g2#0 : tensor<4x8xf32>
    %b2 = loom.add %g2#1, %b1 : tensor<8xf32>
    %one = arith.constant dense<1.0> : tensor<f32>
    %pw, %mw2, %vw2 = loom.adamw %w, %w2, %mw, %vw, %lr, %step, %one {beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4x8xf32>
    %pb, %mb2, %vb2 = loom.adamw %b, %b2, %mb, %vb, %lr, %step, %one {beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<8xf32>
    return %pw, %pb, %mw2, %vw2, %mb2, %vb2 : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  }
}

// -----

// Without offload the step is left as it is.
// CHECK-LABEL: module attributes
// CHECK-NOT: loom.host
// CHECK: loom.adamw
// CHECK-NOT: train_step_host
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  func.func @train_step(%w: tensor<4xf32> {loom.param = "w"}, %m: tensor<4xf32> {loom.state = "m.w"}, %v: tensor<4xf32> {loom.state = "v.w"}, %g: tensor<4xf32> {loom.input = "g"}, %lr: tensor<f32> {loom.input = "lr"}, %step: tensor<f32> {loom.input = "step"}) -> (tensor<4xf32> {loom.updates = 0 : i64}, tensor<4xf32> {loom.updates = 1 : i64}, tensor<4xf32> {loom.updates = 2 : i64}) {
    %one = arith.constant dense<1.0> : tensor<f32>
    %p, %m2, %v2 = loom.adamw %w, %g, %m, %v, %lr, %step, %one {beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
    return %p, %m2, %v2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// A pipeline plan: each rank's step calls a host function of its own for
// its stage's parameters.
// CHECK-LABEL: func.func @train_step_stage0
// CHECK-SAME: {loom.host, loom.param = "a"}
// CHECK: call @train_step_stage0_host(
// CHECK-LABEL: func.func @train_step_stage1
// CHECK-SAME: {loom.host, loom.param = "b"}
// CHECK: call @train_step_stage1_host(
// CHECK-DAG: func.func private @train_step_stage0_host({{.*}}attributes {loom.host, no_inline}
// CHECK-DAG: func.func private @train_step_stage1_host({{.*}}attributes {loom.host, no_inline}
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 2, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false, offload = optimizer>} {
  func.func @train_step_stage0(%w: tensor<4xf32> {loom.param = "a"}, %m: tensor<4xf32> {loom.state = "m.a"}, %v: tensor<4xf32> {loom.state = "v.a"}, %g: tensor<4xf32> {loom.input = "g"}, %lr: tensor<f32> {loom.input = "lr"}, %step: tensor<f32> {loom.input = "step"}) -> (tensor<4xf32> {loom.updates = 0 : i64}, tensor<4xf32> {loom.updates = 1 : i64}, tensor<4xf32> {loom.updates = 2 : i64}) {
    %one = arith.constant dense<1.0> : tensor<f32>
    %p, %m2, %v2 = loom.adamw %w, %g, %m, %v, %lr, %step, %one {beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
    return %p, %m2, %v2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
  func.func @train_step_stage1(%w: tensor<4xf32> {loom.param = "b"}, %m: tensor<4xf32> {loom.state = "m.b"}, %v: tensor<4xf32> {loom.state = "v.b"}, %g: tensor<4xf32> {loom.input = "g"}, %lr: tensor<f32> {loom.input = "lr"}, %step: tensor<f32> {loom.input = "step"}) -> (tensor<4xf32> {loom.updates = 0 : i64}, tensor<4xf32> {loom.updates = 1 : i64}, tensor<4xf32> {loom.updates = 2 : i64}) {
    %one = arith.constant dense<1.0> : tensor<f32>
    %p, %m2, %v2 = loom.adamw %w, %g, %m, %v, %lr, %step, %one {beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
    return %p, %m2, %v2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// offload=parameters: the copies are host memory too. The layer loop fetches
// each layer's slice at the top of its iteration, any other reader the whole
// copy just before it; the host function writes the copy where it lies.
// CHECK-LABEL: func.func @forward_grad
// CHECK: %[[N:.*]] = loom.convert %arg0 : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK: loom.scan carry(%{{.*}} : tensor<8xbf16>) over(%[[N]] : tensor<4x8xbf16>)
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<8xbf16>, %[[SLICE:.*]]: tensor<8xbf16>):
// CHECK-NEXT: %[[BUF:.*]] = tensor.empty() : tensor<8xbf16>
// CHECK-NEXT: %[[LAYER:.*]] = loom.transfer %[[SLICE]] into %[[BUF]] to device : tensor<8xbf16>
// CHECK-NEXT: loom.add %[[X]], %[[LAYER]]
// CHECK: %[[WHOLE:.*]] = loom.transfer %[[N]] into %{{.*}} to device : tensor<4x8xbf16>
// CHECK-NEXT: loom.sum_squares %[[WHOLE]]
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<4x8xbf16> {loom.host, loom.param_copy = "h.*.w"}
// CHECK-LABEL: func.func private @train_step_host
// CHECK: loom.transfer %{{.*}} into %arg6 to host : tensor<4x8xbf16>
module attributes {loom.plan = #loom.plan<dp = 1, tp = 1, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false, offload = parameters>} {
  func.func @forward_grad(%w: tensor<4x8xf32> {loom.param = "h.*.w"}, %x: tensor<8xbf16> {loom.input = "x"}) -> (tensor<f32> {loom.output = "loss"}, tensor<4x8xf32> {loom.grad = "h.*.w"}) {
    %n = loom.convert %w : tensor<4x8xf32> to tensor<4x8xbf16>
    %y = loom.scan carry(%x : tensor<8xbf16>) over(%n : tensor<4x8xbf16>) length = 4 -> (tensor<8xbf16>) {
    ^bb0(%xl: tensor<8xbf16>, %wl: tensor<8xbf16>):
      %s = loom.add %xl, %wl : tensor<8xbf16>
      loom.yield %s : tensor<8xbf16>
    }
    %sq = loom.sum_squares %n : tensor<4x8xbf16> -> tensor<f32>
    %g = loom.convert %y : tensor<8xbf16> to tensor<8xf32>
    %back = tensor.expand_shape %g [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
    %grad = tensor.concat dim(0) %back, %back, %back, %back : (tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
    return %sq, %grad : tensor<f32>, tensor<4x8xf32>
  }
  func.func @train_step(%w: tensor<4x8xf32> {loom.param = "h.*.w"}, %m: tensor<4x8xf32> {loom.state = "m.h.*.w"}, %v: tensor<4x8xf32> {loom.state = "v.h.*.w"}, %x: tensor<8xbf16> {loom.input = "x"}, %lr: tensor<f32> {loom.input = "lr"}, %step: tensor<f32> {loom.input = "step"}) -> (tensor<f32> {loom.output = "loss"}, tensor<4x8xf32> {loom.updates = 0 : i64}, tensor<4x8xf32> {loom.updates = 1 : i64}, tensor<4x8xf32> {loom.updates = 2 : i64}) {
    %loss, %g = call @forward_grad(%w, %x) : (tensor<4x8xf32>, tensor<8xbf16>) -> (tensor<f32>, tensor<4x8xf32>)
    %one = arith.constant dense<1.0> : tensor<f32>
    %p, %m2, %v2 = loom.adamw %w, %g, %m, %v, %lr, %step, %one {beta1 = 0.9 : f64, beta2 = 0.99 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : tensor<4x8xf32>
    return %loss, %p, %m2, %v2 : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  }
}
