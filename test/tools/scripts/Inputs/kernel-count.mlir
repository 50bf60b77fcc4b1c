// A step that fills a buffer, then in a loop of 3 iterations widens one
// and calls a GEMM, then rounds after the loop, launches three nests at
// once (a copy, a fill and a rounding on blocks of their own) and waits.
// Each launch names its kernel, as loom-parallel-loops-to-gpu does.
module {
  func.func private @loom_rt_gemm()
  func.func private @loom_rt_device_wait()
  func.func private @train_step(%a: memref<4xbf16>, %b: memref<4xf32>) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %zero = arith.constant 0.0 : f32
    gpu.launch blocks(%x, %y, %z) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%bx = %c4, %by = %c1, %bz = %c1) function(@fill) {
      memref.store %zero, %b[%tx] : memref<4xf32>
      gpu.terminator
    }
    scf.for %i = %c0 to %c3 step %c1 {
      gpu.launch blocks(%x, %y, %z) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%bx = %c4, %by = %c1, %bz = %c1) function(@widen) {
        %v = memref.load %a[%tx] : memref<4xbf16>
        %w = arith.extf %v : bf16 to f32
        memref.store %w, %b[%tx] : memref<4xf32>
        gpu.terminator
      }
      call @loom_rt_gemm() : () -> ()
    }
    gpu.launch blocks(%x, %y, %z) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%bx = %c4, %by = %c1, %bz = %c1) function(@round) {
      %v = memref.load %b[%tx] : memref<4xf32>
      %w = arith.truncf %v : f32 to bf16
      memref.store %w, %a[%tx] : memref<4xbf16>
      gpu.terminator
    }
    gpu.launch blocks(%x, %y, %z) in (%gx = %c3, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%bx = %c4, %by = %c1, %bz = %c1) function(@tail_and_2_more) {
      %first = arith.cmpi slt, %x, %c1 : index
      scf.if %first {
        %v = memref.load %b[%tx] : memref<4xf32>
        memref.store %v, %b[%tx] : memref<4xf32>
      } else {
        %second = arith.cmpi slt, %x, %c2 : index
        scf.if %second {
          memref.store %zero, %b[%tx] : memref<4xf32>
        } else {
          %v = memref.load %b[%tx] : memref<4xf32>
          %w = arith.truncf %v : f32 to bf16
          memref.store %w, %a[%tx] : memref<4xbf16>
        }
      }
      gpu.terminator
    }
    call @loom_rt_device_wait() : () -> ()
    return
  }
}
