// RUN: loom-opt %s --loom-parallel-loops-to-gpu --verify-diagnostics

// A global is the host's memory: a kernel reading it would fault on the
// GPU at run time, so the lowering refuses it.
memref.global "private" constant @zeros : memref<4xf32> = dense<0.0>

func.func @copy_of_a_global(%out: memref<4xf32>) {
  // expected-error @+1 {{loom-parallel-loops-to-gpu: global 'zeros' is in the host's memory, which the GPU's kernels cannot read}}
  %g = memref.get_global @zeros : memref<4xf32>
  memref.copy %g, %out : memref<4xf32> to memref<4xf32>
  return
}
