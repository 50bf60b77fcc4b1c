// RUN: loom-opt %s --loom-pipeline="emit=loom summary=1" 2>&1 | FileCheck %s
// RUN: loomc %examples/gpt2-tiny.json --emit=loom > %t.loomc.mlir
// RUN: loom-opt %t.loomc.mlir --loom-pipeline=emit=loom | diff %t.loomc.mlir -
// RUN: not loom-opt %s --loom-pipeline=emit=spirv 2>&1 | FileCheck %s --check-prefix=BAD

// loomc and `loom-opt --loom-pipeline` run the same passes: the driver's
// output is a fixed point of the pipeline at its own stage.

// CHECK: parameters: 40 in 1 tensors
// CHECK: func.func @forward
module {
  func.func @forward(%wte: tensor<5x8xf32> {loom.param = "wte"}) {
    return
  }
}

// BAD: Cannot find option named 'spirv'
