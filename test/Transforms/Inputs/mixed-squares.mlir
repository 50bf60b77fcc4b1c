// A ZeRO-2 step whose gradient norm also sums the squares of a tensor that
// is not a gradient (test/Transforms/loom-data-parallel.mlir, MIXED).
module attributes {loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 2, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>, loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.001, momentum = 0.9, grad_clip = 1.0, precision = fp32>} {
  func.func @forward_grad(%w: tensor<8x4xf32> {loom.param = "w"}, %tokens: tensor<1x3xi32> {loom.input = "tokens"}, %targets: tensor<1x3xi32> {loom.input = "targets"}) -> (tensor<f32>, tensor<8x4xf32>) {
    %l = arith.constant dense<1.0> : tensor<f32>
    return %l, %w : tensor<f32>, tensor<8x4xf32>
  }
  func.func @train_step(%w: tensor<8x4xf32> {loom.param = "w"}, %m: tensor<8x4xf32> {loom.state = "momentum.w"}, %tokens: tensor<1x3xi32> {loom.input = "tokens"}, %targets: tensor<1x3xi32> {loom.input = "targets"}, %lr: tensor<f32> {loom.input = "lr"}, %step: tensor<f32> {loom.input = "step"}) -> (tensor<f32> {loom.output = "loss"}, tensor<f32> {loom.output = "grad_norm"}, tensor<8x4xf32> {loom.updates = 0 : i64}, tensor<8x4xf32> {loom.updates = 1 : i64}) {
    %l, %g = call @forward_grad(%w, %tokens, %targets) : (tensor<8x4xf32>, tensor<1x3xi32>, tensor<1x3xi32>) -> (tensor<f32>, tensor<8x4xf32>)
    %n = loom.sum_squares %g, %w : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<f32>
    %p, %nm = loom.sgd %w, %g, %m, %lr, %lr {momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<8x4xf32>
    return %l, %n, %p, %nm : tensor<f32>, tensor<f32>, tensor<8x4xf32>, tensor<8x4xf32>
  }
}
