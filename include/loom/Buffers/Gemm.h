//===- Gemm.h - linalg.matmul as the runtime's row-major GEMMs --*- C++ -*-===//
//
// The runtime's GEMMs are row-major BLAS: C = alpha op(A) op(B) + beta C on
// matrices with contiguous rows, each given by its first element's address
// and its leading dimension. These helpers read a linalg.matmul on buffers
// in those terms, for the passes that turn products into runtime calls.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_BUFFERS_GEMM_H
#define LOOM_BUFFERS_GEMM_H

#include "loom/abi.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace mlir {
namespace loom {
/// A linalg.matmul read as a runtime GEMM: which operands are read
/// transposed, the sizes, and the element type of A and B (C is f32).
struct GemmForm {
  bool transA, transB;
  int64_t m, n, k;
  loom_dtype dtype;
};

/// `op`'s GEMM, or std::nullopt with the reason in `why` when the runtime
/// has none for it: indexing maps BLAS cannot express, A and B of two
/// element types, or C not f32.
std::optional<GemmForm> matchGemm(linalg::MatmulOp op, std::string *why);

/// A matrix operand of a GEMM call: its data pointer and leading dimension
/// (i64).
struct GemmOperand {
  Value pointer, leading;
};

/// `memref` as a GEMM operand, built at `b`'s insertion point; an error on
/// `op` when it is not a matrix of f32, bf16 or f16 with contiguous rows.
FailureOr<GemmOperand> buildGemmOperand(OpBuilder &b, Location loc,
                                        Value memref, Operation *op);
} // namespace loom
} // namespace mlir

#endif // LOOM_BUFFERS_GEMM_H
