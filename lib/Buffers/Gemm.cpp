//===- Gemm.cpp - linalg.matmul as the runtime's row-major GEMMs ----------===//

#include "loom/Buffers/Gemm.h"
#include "loom/Buffers/DataPointer.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::loom;

std::optional<GemmForm> mlir::loom::matchGemm(linalg::MatmulOp op,
                                              std::string *why) {
  MLIRContext *ctx = op.getContext();
  // Loop dimensions are (m, n, k).
  auto dims = [&](ArrayRef<unsigned> d) {
    SmallVector<AffineExpr> exprs;
    for (unsigned i : d)
      exprs.push_back(getAffineDimExpr(i, ctx));
    return AffineMap::get(3, 0, exprs, ctx);
  };
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  bool transA = maps[0] == dims({2, 0});
  bool transB = maps[1] == dims({1, 2});
  if ((!transA && maps[0] != dims({0, 2})) ||
      (!transB && maps[1] != dims({2, 1})) || maps[2] != dims({0, 1})) {
    *why = "has indexing maps BLAS cannot express";
    return std::nullopt;
  }
  auto aType = cast<ShapedType>(op.getDpsInputs()[0].getType());
  auto bType = cast<ShapedType>(op.getDpsInputs()[1].getType());
  auto cType = cast<ShapedType>(op.getDpsInits()[0].getType());
  std::optional<loom_dtype> dtype =
      getRuntimeElementType(aType.getElementType());
  if (!dtype || bType.getElementType() != aType.getElementType() ||
      !cType.getElementType().isF32()) {
    *why = "multiplies matrices of two element types or into a result other "
           "than f32, which no GEMM of the runtime does";
    return std::nullopt;
  }
  return GemmForm{transA,
                  transB,
                  cType.getDimSize(0),
                  cType.getDimSize(1),
                  aType.getDimSize(transA ? 0 : 1),
                  *dtype};
}

FailureOr<GemmOperand> mlir::loom::buildGemmOperand(OpBuilder &b, Location loc,
                                                    Value memref,
                                                    Operation *op) {
  auto type = cast<MemRefType>(memref.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!getRuntimeElementType(type.getElementType()) || type.getRank() != 2 ||
      failed(type.getStridesAndOffset(strides, offset)) || strides[1] != 1)
    return op->emitOpError() << "operand " << type
                             << " is not an f32, bf16 or f16 matrix with "
                                "contiguous rows, which BLAS needs";
  memref::ExtractStridedMetadataOp metadata;
  Value pointer = buildDataPointer(b, loc, memref, &metadata);
  Value leading = arith::IndexCastOp::create(b, loc, b.getI64Type(),
                                             metadata.getStrides()[0]);
  return GemmOperand{pointer, leading};
}
