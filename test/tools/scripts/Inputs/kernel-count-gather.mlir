// A step that picks one row of a table by a token (a gather), then copies
// the tokens.
module {
  func.func private @train_step(%table: memref<100x4xf32>, %tokens: memref<4xi32>, %out: memref<4x4xf32>, %copy: memref<4xi32>) {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    gpu.launch blocks(%x, %y, %z) in (%gx = %c4, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%bx = %c4, %by = %c1, %bz = %c1) function(@embedding) {
      %t = memref.load %tokens[%x] : memref<4xi32>
      %row = arith.index_cast %t : i32 to index
      %v = memref.load %table[%row, %tx] : memref<100x4xf32>
      memref.store %v, %out[%x, %tx] : memref<4x4xf32>
      gpu.terminator
    }
    gpu.launch blocks(%x, %y, %z) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%bx = %c4, %by = %c1, %bz = %c1) function(@copy) {
      %t = memref.load %tokens[%tx] : memref<4xi32>
      %i = arith.index_cast %t : i32 to index
      memref.store %t, %copy[%tx] : memref<4xi32>
      gpu.terminator
    }
    return
  }
}
