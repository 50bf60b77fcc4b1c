// RUN: loom-opt %s --split-input-file --loom-approximate-math | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-approximate-math=gpu-fast-division=1 | FileCheck %s --check-prefix=FAST
// RUN: loom-opt %s --split-input-file --loom-approximate-math | FileCheck %s --check-prefix=DEFAULT
// RUN: loom-opt %s --split-input-file --loom-approximate-math=gpu-libdevice-exp=1 | FileCheck %s --check-prefix=EXP
// RUN: loom-opt %s --split-input-file --loom-approximate-math | FileCheck %s --check-prefix=POLY

// The f32 transcendental functions of softmax, GELU and the loss become
// arithmetic; square roots stay, since LLVM vectorizes them already.
// CHECK-LABEL: func.func @f(
// CHECK-NOT: math.exp
// CHECK-NOT: math.tanh
// CHECK-NOT: math.log
// CHECK: math.sqrt
// CHECK: return
func.func @f(%x: f32) -> (f32, f32, f32, f32) {
  %a = math.exp %x : f32
  %b = math.tanh %x : f32
  %c = math.log %x : f32
  %d = math.sqrt %x : f32
  return %a, %b, %c, %d : f32, f32, f32, f32
}

// -----

// With gpu-fast-division, a kernel's f32 divisions may be approximate
// (`afn`, which NVPTX lowers to div.approx); f64 ones, square roots and
// the host's keep their rounding, and flags already there stay.
// FAST-LABEL: func.func @host(
// FAST-NOT: afn
// FAST-LABEL: gpu.func @kernel(
// FAST: arith.divf %[[X:.*]], %[[X]] fastmath<afn> : f32
// FAST-NEXT: math.sqrt %[[X]] : f32
// FAST-NEXT: arith.divf %[[X]], %{{.*}} fastmath<nnan,afn> : f32
// FAST-NEXT: arith.divf %[[Y:[^ ,]*]], %[[Y]] : f64
// DEFAULT-LABEL: gpu.func @kernel(
// DEFAULT-NOT: afn
// DEFAULT: gpu.return
module attributes {gpu.container_module} {
  func.func @host(%x: f32) -> f32 {
    %a = arith.divf %x, %x : f32
    return %a : f32
  }
  gpu.module @kernels {
    gpu.func @kernel(%x: f32, %y: f64, %out: memref<3xf32>, %out64: memref<f64>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %a = arith.divf %x, %x : f32
      %b = math.sqrt %x : f32
      %c = arith.divf %x, %b fastmath<nnan> : f32
      %d = arith.divf %y, %y : f64
      memref.store %a, %out[%c0] : memref<3xf32>
      memref.store %b, %out[%c1] : memref<3xf32>
      memref.store %c, %out[%c2] : memref<3xf32>
      memref.store %d, %out64[] : memref<f64>
      gpu.return
    }
  }
}

// -----

// With gpu-libdevice-exp, a kernel's exp stays, for the GPU lowering to
// call libdevice's __nv_expf; its tanh and log become arithmetic as the
// host's exp, tanh and log do. Without it, the kernel's exp does too.
// EXP-LABEL: func.func @host_exp(
// EXP-NOT: math.exp
// EXP: return
// EXP-LABEL: gpu.func @kernel_exp(
// EXP-NOT: math.tanh
// EXP-NOT: math.log
// EXP: math.exp %{{.*}} : f32
// EXP-NOT: math.tanh
// EXP-NOT: math.log
// EXP: gpu.return
// POLY-LABEL: gpu.func @kernel_exp(
// POLY-NOT: math.exp
// POLY: gpu.return
module attributes {gpu.container_module} {
  func.func @host_exp(%x: f32) -> f32 {
    %a = math.exp %x : f32
    return %a : f32
  }
  gpu.module @kernels {
    gpu.func @kernel_exp(%x: f32, %out: memref<3xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %a = math.exp %x : f32
      %b = math.tanh %x : f32
      %c = math.log %x : f32
      memref.store %a, %out[%c0] : memref<3xf32>
      memref.store %b, %out[%c1] : memref<3xf32>
      memref.store %c, %out[%c2] : memref<3xf32>
      gpu.return
    }
  }
}
