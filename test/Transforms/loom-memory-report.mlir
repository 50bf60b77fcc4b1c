// RUN: loom-opt %s --loom-memory-report=print --split-input-file --verify-diagnostics | FileCheck %s
// RUN: loomc %examples/gpt2-tiny.json --plan pp=2,mb=2 --emit=memory | FileCheck %s --check-prefix=PIPE
// RUN: loomc %examples/gpt2-tiny.json --plan pp=2,mb=2,recompute=stage --emit=memory | FileCheck %s --check-prefix=STAGE

// ZeRO-1 over two replicas: whole parameters, the whole reduced gradients
// (each rank updates slices of them), and optimizer state for its half.
// CHECK: compiled    per rank: parameters 144 B, gradients 144 B, optimizer state 72 B (0.00 MiB)
// CHECK-NEXT: compiled    per rank: activations 32 B per layer x 3 + 48 B outside the layers = 144 B per micro-batch (0.00 MiB)
// CHECK: module attributes {loom.memory = {activations = 144 : i64, gradients = 144 : i64, optimizer = 72 : i64, parameters = 144 : i64}
module {
  // Activations: the data (16 B of tokens), the layer loop's input (32 B),
  // and 32 B a layer it stacks; not the squared weights, which the data do
  // not reach, nor what the backward pass reads of its own.
  func.func @forward_grad(%ws: tensor<3x2x4xf32> {loom.param = "h.*.w"}, %t: tensor<2x2xi32> {loom.input = "tokens"}) -> (tensor<f32> {loom.output = "loss"}, tensor<3x2x4xf32> {loom.grad = "h.*.w"}) {
    %c0 = arith.constant 0 : index
    %f = arith.sitofp %t : tensor<2x2xi32> to tensor<2x2xf32>
    %x = tensor.concat dim(1) %f, %f : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
    %sq = arith.mulf %ws, %ws : tensor<3x2x4xf32>
    %r:2 = loom.scan carry(%x : tensor<2x4xf32>) over(%sq : tensor<3x2x4xf32>) length = 3 -> (tensor<2x4xf32>, tensor<3x2x4xf32>) {
    ^bb0(%c: tensor<2x4xf32>, %w: tensor<2x4xf32>):
      %n = arith.mulf %c, %w : tensor<2x4xf32>
      loom.yield %n, %c : tensor<2x4xf32>, tensor<2x4xf32>
    }
    %e = tensor.extract %r#0[%c0, %c0] : tensor<2x4xf32>
    %loss = tensor.from_elements %e : tensor<f32>
    %g = arith.mulf %r#1, %sq : tensor<3x2x4xf32>
    %gx = arith.mulf %x, %x : tensor<2x4xf32>
    %gf = tensor.extract_slice %gx[0, 0] [2, 2] [1, 1] : tensor<2x4xf32> to tensor<2x2xf32>
    %gt = arith.fptosi %gf : tensor<2x2xf32> to tensor<2x2xi32>
    %d = arith.addi %t, %gt : tensor<2x2xi32>
    %dx = arith.sitofp %d : tensor<2x2xi32> to tensor<2x2xf32>
    %dd = tensor.concat dim(1) %dx, %dx : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
    %db = tensor.expand_shape %dd [[0, 1], [2]] output_shape [1, 2, 4] : tensor<2x4xf32> into tensor<1x2x4xf32>
    %dg = tensor.insert_slice %db into %g[0, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<3x2x4xf32>
    return %loss, %dg : tensor<f32>, tensor<3x2x4xf32>
  }

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
// A loss of the data alone: the data are all the backward pass reads.
// CHECK: compiled    per rank: parameters 144 B, gradients 72 B, optimizer state 72 B
// CHECK-NEXT: activations 0 B per layer x 0 + 8 B outside the layers
module {
  func.func @forward_grad(%t: tensor<1x2xi32> {loom.input = "tokens"}) -> (tensor<f32> {loom.output = "loss"}, tensor<1x2xi32> {loom.grad = "w"}) {
    %c0 = arith.constant 0 : index
    %e = tensor.extract %t[%c0, %c0] : tensor<1x2xi32>
    %f = arith.sitofp %e : i32 to f32
    %loss = tensor.from_elements %f : tensor<f32>
    %g = arith.addi %t, %t : tensor<1x2xi32>
    return %loss, %g : tensor<f32>, tensor<1x2xi32>
  }

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

// -----

// expected-error @+1 {{expected @forward_grad (run loom-differentiate first)}}
module {
  func.func @train_step() {
    return
  }
}

// -----

module {
  func.func @train_step() {
    return
  }
  // expected-error @+1 {{@forward_grad returns no loom.output (the loss)}}
  func.func @forward_grad(%t: tensor<1x2xi32> {loom.input = "tokens"}) -> (tensor<1x2xi32> {loom.grad = "w"}) {
    return %t : tensor<1x2xi32>
  }
}

// A pipeline's ranks each have their own figures: the first stage holds the
// embedding and the first half of the layers, the last the other half,
// the final norm and the tied table; each keeps, per micro-batch, what its
// stage's forward half returns for its backward half.
// PIPE: pipeline rank 0 (@train_step_stage0):
// PIPE-NEXT: compiled per rank: parameters 1750016 B, gradients 1750016 B, optimizer state 3500032 B
// PIPE-NEXT: compiled per rank: activations 2105344 B per layer x 2 + 0 B outside the layers = 4210688 B per micro-batch
// PIPE: pipeline rank 1 (@train_step_stage1):
// PIPE-NEXT: compiled per rank: parameters 1718272 B, gradients 1718272 B, optimizer state 3436544 B
// PIPE-NEXT: compiled per rank: activations 2105344 B per layer x 2 + 526336 B outside the layers = 4737024 B per micro-batch
// With the order of the schedule (GPipe, both micro-batches held), what
// each rank needs at once but for a pass's temporaries.
// PIPE-NEXT: compiled pipeline rank 1: state 6873088 B + activations 4737024 B per micro-batch x 2 held = 16347136 B (15.59 MiB), temporaries aside

// Stage recomputation keeps what the stage received: nothing on the first,
// one micro-batch's hidden states (4 x 64 x 128 floats) on the last.
// STAGE: pipeline rank 0 (@train_step_stage0):
// STAGE: compiled per rank: activations 0 B per layer x 2 + 0 B outside the layers = 0 B per micro-batch
// STAGE: pipeline rank 1 (@train_step_stage1):
// STAGE: compiled per rank: activations 0 B per layer x 2 + 131072 B outside the layers = 131072 B per micro-batch
