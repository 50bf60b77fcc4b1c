//===- MatmulToBlas.cpp - The loom-matmul-to-blas pass --------------------===//
//
// GEMMs are where a training step spends its time; a tuned BLAS beats
// generated loops by an order of magnitude, so they leave the generated code
// as calls into the runtime, which forwards them to OpenBLAS. A product of
// bf16 or f16 matrices into f32 (mixed precision) calls the runtime's GEMM
// of that element type, cuBLASLt's on a GPU.
//
//===----------------------------------------------------------------------===//

#include "DataPointer.h"

#include "loom/Conversion/Passes.h"
#include "loom/abi.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMMATMULTOBLAS
#include "loom/Conversion/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
constexpr llvm::StringLiteral kSgemm = LOOM_RT_SGEMM;
constexpr llvm::StringLiteral kGemm = LOOM_RT_GEMM;

/// A matrix operand: its data pointer, leading dimension and whether it is
/// read transposed.
struct Operand {
  Value pointer, leading;
};

FailureOr<Operand> describe(OpBuilder &b, Location loc, Value memref,
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
  return Operand{pointer, leading};
}

/// The zero fill of `op`'s output that nothing reads or writes between it and
/// `op`, if there is one: BLAS can overwrite the output with beta = 0 instead
/// of adding to zeros, which saves a pass over the matrix.
linalg::FillOp findZeroFill(linalg::MatmulOp op) {
  Value init = op.getDpsInits()[0];
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    auto fill = dyn_cast<linalg::FillOp>(prev);
    if (fill && fill.getDpsInits()[0] == init &&
        matchPattern(fill.getDpsInputs()[0], m_AnyZeroFloat()))
      return fill;
    if (!isMemoryEffectFree(prev))
      return {};
  }
  return {};
}

struct MatmulToBlasPass
    : public loom::impl::LoomMatmulToBlasBase<MatmulToBlasPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    Type i32 = b.getI32Type(), i64 = b.getI64Type(), f32 = b.getF32Type();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    SmallVector<Type> sgemmArgs = {i32, i32, i64, i64, i64, f32, ptr,
                                   i64, ptr, i64, f32, ptr, i64};
    SmallVector<Type> gemmArgs = {i32};
    llvm::append_range(gemmArgs, sgemmArgs);
    auto declare = [&](StringRef name, ArrayRef<Type> args) {
      if (module.lookupSymbol(name))
        return;
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToEnd(module.getBody());
      func::FuncOp::create(b, module.getLoc(), name,
                           b.getFunctionType(args, {}))
          .setPrivate();
    };

    SmallVector<linalg::MatmulOp> matmuls;
    module.walk([&](linalg::MatmulOp op) { matmuls.push_back(op); });

    auto dims = [&](ArrayRef<unsigned> d) {
      SmallVector<AffineExpr> exprs;
      for (unsigned i : d)
        exprs.push_back(getAffineDimExpr(i, ctx));
      return AffineMap::get(3, 0, exprs, ctx);
    };
    for (linalg::MatmulOp op : matmuls) {
      if (!op.hasPureBufferSemantics()) {
        op.emitOpError("expected buffers; run bufferization first");
        return signalPassFailure();
      }
      SmallVector<AffineMap> maps = op.getIndexingMapsArray();
      // Loop dimensions are (m, n, k).
      bool transA = maps[0] == dims({2, 0});
      bool transB = maps[1] == dims({1, 2});
      if ((!transA && maps[0] != dims({0, 2})) ||
          (!transB && maps[1] != dims({2, 1})) || maps[2] != dims({0, 1})) {
        op.emitOpError("has indexing maps BLAS cannot express");
        return signalPassFailure();
      }
      linalg::FillOp zeroFill = findZeroFill(op);
      b.setInsertionPoint(op);
      Location loc = op.getLoc();
      Value a = op.getDpsInputs()[0], bm = op.getDpsInputs()[1],
            c = op.getDpsInits()[0];
      Type aElement = cast<MemRefType>(a.getType()).getElementType();
      std::optional<loom_dtype> dtype = getRuntimeElementType(aElement);
      if (cast<MemRefType>(bm.getType()).getElementType() != aElement ||
          !cast<MemRefType>(c.getType()).getElementType().isF32()) {
        op.emitOpError("multiplies matrices of two element types or into a "
                       "result other than f32, which no GEMM of the "
                       "runtime does");
        return signalPassFailure();
      }
      FailureOr<Operand> da = describe(b, loc, a, op),
                         db = describe(b, loc, bm, op),
                         dc = describe(b, loc, c, op);
      if (failed(da) || failed(db) || failed(dc))
        return signalPassFailure();
      auto cType = cast<MemRefType>(c.getType());
      int64_t m = cType.getDimSize(0), n = cType.getDimSize(1);
      int64_t k = cast<MemRefType>(a.getType()).getDimSize(transA ? 0 : 1);
      auto i32c = [&](int64_t v) -> Value {
        return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
      };
      auto i64c = [&](int64_t v) -> Value {
        return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
      };
      Value one = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f));
      Value beta = one;
      if (zeroFill) {
        beta = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
        zeroFill.erase();
      }
      SmallVector<Value> args = {
          i32c(transA), i32c(transB), i64c(m),     i64c(n),     i64c(k),
          one,          da->pointer,  da->leading, db->pointer, db->leading,
          beta,         dc->pointer,  dc->leading};
      StringRef callee = kSgemm;
      if (*dtype != LOOM_DTYPE_F32) {
        args.insert(args.begin(), i32c(*dtype));
        callee = kGemm;
      }
      declare(callee, callee == kSgemm ? sgemmArgs : gemmArgs);
      func::CallOp::create(b, loc, callee, TypeRange{}, args);
      op.erase();
    }
  }
};
} // namespace
