// RUN: loom-opt %s --loom-memory-report=print --split-input-file --verify-diagnostics | FileCheck %s

// ZeRO-1 over two replicas: whole parameters, the whole reduced gradients
// (each rank updates slices of them), and optimizer state for its half.
// CHECK: compiled    per rank: parameters 144 B, gradients 144 B, optimizer state 72 B (0.00 MiB)
// CHECK: module attributes {loom.memory = {gradients = 144 : i64, optimizer = 72 : i64, parameters = 144 : i64}
module {
  func.func @train_step(%w: tensor<8x4xf32> {loom.param = "w"}, %b: tensor<4xf32> {loom.param = "b"}, %mw: tensor<16xf32> {loom.state = "momentum.w"}, %mb: tensor<2xf32> {loom.state = "momentum.b"}, %gw: tensor<8x4xf32>, %gb: tensor<4xf32>, %lr: tensor<f32> {loom.input = "lr"}, %s: tensor<f32>, %i: index) -> (tensor<16xf32>, tensor<2xf32>) {
    %fw = tensor.collapse_shape %w [[0, 1]] : tensor<8x4xf32> into tensor<32xf32>
    %sw = tensor.extract_slice %fw[%i] [16] [1] : tensor<32xf32> to tensor<16xf32>
    %fgw = tensor.collapse_shape %gw [[0, 1]] : tensor<8x4xf32> into tensor<32xf32>
    %sgw = tensor.extract_slice %fgw[%i] [16] [1] : tensor<32xf32> to tensor<16xf32>
    %nw, %nmw = loom.sgd %sw, %sgw, %mw, %lr, %s {momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<16xf32>
    %sb = tensor.extract_slice %b[%i] [2] [1] : tensor<4xf32> to tensor<2xf32>
    %sgb = tensor.extract_slice %gb[%i] [2] [1] : tensor<4xf32> to tensor<2xf32>
    %nb, %nmb = loom.sgd %sb, %sgb, %mb, %lr, %s {momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<2xf32>
    return %nw, %nb : tensor<16xf32>, tensor<2xf32>
  }
}

// -----

// ZeRO-2: the updates read the reduce-scattered shards, one bucket of them.
// CHECK: compiled    per rank: parameters 144 B, gradients 72 B, optimizer state 72 B
module {
  func.func @train_step(%w: tensor<8x4xf32> {loom.param = "w"}, %b: tensor<4xf32> {loom.param = "b"}, %mw: tensor<16xf32> {loom.state = "momentum.w"}, %mb: tensor<2xf32> {loom.state = "momentum.b"}, %mine: tensor<1x18xf32>, %lr: tensor<f32> {loom.input = "lr"}, %s: tensor<f32>, %i: index) -> (tensor<16xf32>, tensor<2xf32>) {
    %fw = tensor.collapse_shape %w [[0, 1]] : tensor<8x4xf32> into tensor<32xf32>
    %sw = tensor.extract_slice %fw[%i] [16] [1] : tensor<32xf32> to tensor<16xf32>
    %gw2 = tensor.extract_slice %mine[0, 0] [1, 16] [1, 1] : tensor<1x18xf32> to tensor<1x16xf32>
    %gw = tensor.collapse_shape %gw2 [[0, 1]] : tensor<1x16xf32> into tensor<16xf32>
    %nw, %nmw = loom.sgd %sw, %gw, %mw, %lr, %s {momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<16xf32>
    %sb = tensor.extract_slice %b[%i] [2] [1] : tensor<4xf32> to tensor<2xf32>
    %gb2 = tensor.extract_slice %mine[0, 16] [1, 2] [1, 1] : tensor<1x18xf32> to tensor<1x2xf32>
    %gb = tensor.collapse_shape %gb2 [[0, 1]] : tensor<1x2xf32> into tensor<2xf32>
    %nb, %nmb = loom.sgd %sb, %gb, %mb, %lr, %s {momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<2xf32>
    return %nw, %nb : tensor<16xf32>, tensor<2xf32>
  }
}

// -----

// expected-error @+1 {{expected @train_step (run loom-build-train-step first)}}
module {
}
