// RUN: loom-opt %s --loom-export-entries --split-input-file --verify-diagnostics | FileCheck %s

// The function becomes private behind a void(void**) wrapper, and the
// manifest lists its arguments.
module attributes {loom.model = #loom.model<name = "t", layers = 1, width = 4, heads = 1, hidden = 16, vocab = 8, padded_vocab = 8, positions = 3, tied = true, epsilon = 1.0e-05>, loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, precision = fp32>, loom.tensors = [{name = "w", shape = array<i64: 8, 4>, init = "normal", std = 2.000000e-02 : f64, hf = "w"}, {name = "h.*.ln_1.weight", shape = array<i64: 1, 4>, init = "ones", hf = "transformer.h.*.ln_1.weight"}]} {
  func.func @forward(%w: memref<8x4xf32> {loom.param = "w"}, %g: memref<1x4xf32> {loom.param = "h.*.ln_1.weight"}, %t: memref<2x3xi32> {loom.input = "tokens"}, %l: memref<f32> {loom.output = "loss"}) -> memref<f32> {
    return %l : memref<f32>
  }
}
// CHECK: func.func private @forward(
// CHECK-SAME: ) {
// CHECK: func.func @loom_entry_forward(%[[ARGS:.*]]: !llvm.ptr)
// CHECK: llvm.getelementptr %[[ARGS]][0]
// CHECK: builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> to memref<8x4xf32>
// CHECK: llvm.getelementptr %[[ARGS]][3]
// CHECK: builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64)> to memref<f32>
// CHECK: call @forward(
// CHECK: llvm.mlir.global external constant @loom_manifest("loom-artifact 2\0Aloom-version {{.*}}\0Amodel t layers=1 width=4 heads=1 hidden=16 vocab=8 padded_vocab=8 positions=3 tied=1\0Atraining batch=2 sequence=3 optimizer=sgd lr=0.1 {{.*}}\0Astacked h.* 1\0Atensor w shape=8x4 init=normal std=0.02 hf=w\0Atensor h.*.ln_1.weight shape=1x4 init=ones hf=transformer.h.*.ln_1.weight\0Aentry forward loom_entry_forward 4\0Aarg param w f32 8x4\0Aarg param h.*.ln_1.weight f32 1x4\0Aarg input tokens i32 2x3\0Aarg output loss f32 -\0Aend\0A\00")

// -----

// The stacked line comes from the stacked parameters' leading dimension,
// which they must agree on.
module attributes {loom.model = #loom.model<name = "t", layers = 2, width = 4, heads = 1, hidden = 16, vocab = 8, padded_vocab = 8, positions = 3, tied = true, epsilon = 1.0e-05>, loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, precision = fp32>, loom.tensors = [{name = "h.*.ln_1.weight", shape = array<i64: 2, 4>, init = "ones", hf = "transformer.h.*.ln_1.weight"}, {name = "h.*.ln_1.bias", shape = array<i64: 2, 4>, init = "zeros"}]} {
  // expected-error @+1 {{stacks parameter 'h.*.ln_1.bias' over 3 layers, others over 2}}
  func.func @forward(%g: memref<2x4xf32> {loom.param = "h.*.ln_1.weight"}, %b: memref<3x4xf32> {loom.param = "h.*.ln_1.bias"}, %l: memref<f32> {loom.output = "loss"}) -> memref<f32> {
    return %l : memref<f32>
  }
}

// -----

// expected-error @+1 {{no parameter is stacked over the layers ('h.*.<name>')}}
module attributes {loom.model = #loom.model<name = "t", layers = 1, width = 4, heads = 1, hidden = 16, vocab = 8, padded_vocab = 8, positions = 3, tied = true, epsilon = 1.0e-05>, loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, precision = fp32>, loom.tensors = [{name = "w", shape = array<i64: 8, 4>, init = "normal", std = 2.000000e-02 : f64, hf = "w"}]} {
  func.func @forward(%w: memref<8x4xf32> {loom.param = "w"}, %l: memref<f32> {loom.output = "loss"}) -> memref<f32> {
    return %l : memref<f32>
  }
}

// -----

// A ZeRO-3 artifact: a parameter that is this rank's part of the whole
// says along which dimension; the memory line carries loom-memory-report's
// figures.
module attributes {loom.model = #loom.model<name = "t", layers = 1, width = 4, heads = 1, hidden = 16, vocab = 8, padded_vocab = 8, positions = 3, tied = true, epsilon = 1.0e-05>, loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, precision = fp32>, loom.tensors = [{name = "w", shape = array<i64: 8, 4>, init = "normal", std = 2.000000e-02 : f64, hf = "w"}, {name = "h.*.ln_1.weight", shape = array<i64: 1, 4>, init = "ones", hf = "transformer.h.*.ln_1.weight"}], loom.plan = #loom.plan<dp = 2, tp = 1, pp = 1, zero = 3, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>, loom.memory = {parameters = 80 : i64, gradients = 80 : i64, optimizer = 80 : i64, activations = 96 : i64}} {
  func.func @forward(%w: memref<4x4xf32> {loom.param = "w", loom.shard = 0 : i64}, %g: memref<1x2xf32> {loom.param = "h.*.ln_1.weight", loom.shard = 1 : i64}, %t: memref<1x3xi32> {loom.input = "tokens"}, %l: memref<f32> {loom.output = "loss"}) -> memref<f32> {
    return %l : memref<f32>
  }
}
// CHECK: llvm.mlir.global external constant @loom_manifest("{{.*}}\0Aplan dp=2 tp=1 pp=1 zero=3 micro_batches=1 recompute=none\0Amemory parameters=80 gradients=80 optimizer=80 activations=96\0Astacked h.* 1\0A{{.*}}entry forward loom_entry_forward 4\0Aarg param w f32 4x4 shard=0\0Aarg param h.*.ln_1.weight f32 1x2 shard=1\0A

// -----

// A tensor-parallel artifact: a parameter that is this rank's part of each
// of its blocks says which dimension of the whole and how many blocks.
module attributes {loom.model = #loom.model<name = "t", layers = 1, width = 4, heads = 2, hidden = 16, vocab = 8, padded_vocab = 8, positions = 3, tied = true, epsilon = 1.0e-05>, loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, precision = fp32>, loom.tensors = [{name = "w", shape = array<i64: 8, 4>, init = "normal", std = 2.000000e-02 : f64, hf = "w"}, {name = "h.*.attn.c_attn.weight", shape = array<i64: 1, 12, 4>, init = "normal", std = 2.000000e-02 : f64, hf = "transformer.h.*.attn.c_attn.weight", hf_transpose}], loom.plan = #loom.plan<dp = 1, tp = 2, pp = 1, zero = 0, micro_batches = 1, schedule = gpipe, recompute = none, sequence_parallel = false>} {
  func.func @forward(%w: memref<8x4xf32> {loom.param = "w"}, %q: memref<1x6x4xf32> {loom.param = "h.*.attn.c_attn.weight", loom.tp_split = array<i64: 1, 3>}, %t: memref<2x3xi32> {loom.input = "tokens"}, %l: memref<f32> {loom.output = "loss"}) -> memref<f32> {
    return %l : memref<f32>
  }
}
// CHECK: llvm.mlir.global external constant @loom_manifest("{{.*}}\0Aplan dp=1 tp=2 pp=1 zero=0 micro_batches=1 recompute=none\0Astacked h.* 1\0A{{.*}}entry forward loom_entry_forward 4\0Aarg param w f32 8x4\0Aarg param h.*.attn.c_attn.weight f32 1x6x4 tp_dim=1 tp_blocks=3\0A

// -----

// A pipeline's ranks each have their step, with its memory figures after
// its entry line; a stacked parameter says which of the model's layers it
// holds.
module attributes {loom.model = #loom.model<name = "t", layers = 3, width = 4, heads = 2, hidden = 16, vocab = 8, padded_vocab = 8, positions = 3, tied = true, epsilon = 1.0e-05>, loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, precision = fp32>, loom.tensors = [{name = "wte", shape = array<i64: 8, 4>, init = "normal", std = 2.000000e-02 : f64, rows = 6 : i64, hf = "transformer.wte.weight"}, {name = "h.*.ln_1.weight", shape = array<i64: 3, 4>, init = "ones", hf = "transformer.h.*.ln_1.weight"}], loom.plan = #loom.plan<dp = 1, tp = 1, pp = 2, zero = 0, micro_batches = 2, schedule = one_f_one_b, recompute = none, sequence_parallel = false, stage_layers = [2, 1]>} {
  func.func @train_step_stage0(%w: memref<8x4xf32> {loom.param = "wte"}, %h: memref<2x4xf32> {loom.param = "h.*.ln_1.weight", loom.layers = array<i64: 0, 2>}, %t: memref<2x3xi32> {loom.input = "tokens"}, %l: memref<f32> {loom.output = "loss"}) -> memref<f32> attributes {loom.stage = 0 : i64, loom.memory = {parameters = 160 : i64, gradients = 160 : i64, optimizer = 0 : i64, activations = 96 : i64}} {
    return %l : memref<f32>
  }
  func.func @train_step_stage1(%w: memref<8x4xf32> {loom.param = "wte"}, %h: memref<1x4xf32> {loom.param = "h.*.ln_1.weight", loom.layers = array<i64: 2, 1>}, %t: memref<2x3xi32> {loom.input = "targets"}, %l: memref<f32> {loom.output = "loss"}) -> memref<f32> attributes {loom.stage = 1 : i64} {
    return %l : memref<f32>
  }
}
// CHECK: llvm.mlir.global external constant @loom_manifest("{{.*}}\0Aplan dp=1 tp=1 pp=2 zero=0 micro_batches=2 recompute=none schedule=1f1b virtual_stages=1\0Astacked h.* 3\0A{{.*}}entry train_step_stage0 loom_entry_train_step_stage0 4\0Amemory parameters=160 gradients=160 optimizer=0 activations=96\0Aarg param wte f32 8x4\0Aarg param h.*.ln_1.weight f32 2x4 layers=0:2\0A{{.*}}entry train_step_stage1 loom_entry_train_step_stage1 4\0Aarg param wte f32 8x4\0Aarg param h.*.ln_1.weight f32 1x4 layers=2:1\0A

// -----

// expected-error @+1 {{the plan is still "auto": run loom-plan first}}
module attributes {loom.model = #loom.model<name = "t", layers = 1, width = 4, heads = 1, hidden = 16, vocab = 8, padded_vocab = 8, positions = 3, tied = true, epsilon = 1.0e-05>, loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, precision = fp32>, loom.tensors = [{name = "h.*.ln_1.weight", shape = array<i64: 1, 4>, init = "ones", hf = "transformer.h.*.ln_1.weight"}], loom.plan = "auto"} {
  func.func @forward(%g: memref<1x4xf32> {loom.param = "h.*.ln_1.weight"}, %l: memref<f32> {loom.output = "loss"}) -> memref<f32> {
    return %l : memref<f32>
  }
}

// -----

// The tensor lines follow the stacked line, in the module's order, each
// field where it applies; a module whose tensors are llm.c's says so.
module attributes {loom.model = #loom.model<name = "t", layers = 2, width = 4, heads = 2, hidden = 16, vocab = 6, padded_vocab = 8, positions = 3, tied = true, epsilon = 1.0e-05>, loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, precision = fp32>, loom.tensors = [{name = "wte", shape = array<i64: 8, 4>, init = "normal", std = 2.000000e-02 : f64, rows = 6 : i64, hf = "transformer.wte.weight"}, {name = "h.*.attn.c_attn.weight", shape = array<i64: 2, 12, 4>, init = "normal", std = 1.000000e-02 : f64, hf = "transformer.h.*.attn.c_attn.weight", hf_transpose}, {name = "h.*.ln_1.bias", shape = array<i64: 2, 4>, init = "zeros"}], loom.llmc_checkpoint} {
  func.func @forward(%w: memref<8x4xf32> {loom.param = "wte"}, %q: memref<2x12x4xf32> {loom.param = "h.*.attn.c_attn.weight"}, %b: memref<2x4xf32> {loom.param = "h.*.ln_1.bias"}, %l: memref<f32> {loom.output = "loss"}) -> memref<f32> {
    return %l : memref<f32>
  }
}
// CHECK: @loom_manifest("{{.*}}\0Astacked h.* 2\0Atensor wte shape=8x4 init=normal std=0.02 rows=6 hf=transformer.wte.weight\0Atensor h.*.attn.c_attn.weight shape=2x12x4 init=normal std=0.01 hf=transformer.h.*.attn.c_attn.weight hf_transpose=1\0Atensor h.*.ln_1.bias shape=2x4 init=zeros\0Acheckpoint llmc\0Aentry forward

// -----

// Every parameter an entry point takes has its tensor.
module attributes {loom.model = #loom.model<name = "t", layers = 1, width = 4, heads = 1, hidden = 16, vocab = 8, padded_vocab = 8, positions = 3, tied = true, epsilon = 1.0e-05>, loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, precision = fp32>, loom.tensors = [{name = "h.*.ln_1.weight", shape = array<i64: 1, 4>, init = "ones"}]} {
  // expected-error @+1 {{takes parameter 'w', which the module's 'loom.tensors' does not list}}
  func.func @forward(%w: memref<8x4xf32> {loom.param = "w"}, %g: memref<1x4xf32> {loom.param = "h.*.ln_1.weight"}, %l: memref<f32> {loom.output = "loss"}) -> memref<f32> {
    return %l : memref<f32>
  }
}

// -----

// expected-error @+1 {{expected the module's 'loom.tensors' (each parameter's initialization and checkpoint name) for the manifest}}
module attributes {loom.model = #loom.model<name = "t", layers = 1, width = 4, heads = 1, hidden = 16, vocab = 8, padded_vocab = 8, positions = 3, tied = true, epsilon = 1.0e-05>, loom.training = #loom.training<batch = 2, sequence = 3, optimizer = sgd, lr = 0.1, momentum = 0.9, precision = fp32>} {
  func.func @forward(%g: memref<1x4xf32> {loom.param = "h.*.ln_1.weight"}, %l: memref<f32> {loom.output = "loss"}) -> memref<f32> {
    return %l : memref<f32>
  }
}
