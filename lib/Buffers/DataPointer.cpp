//===- DataPointer.cpp - Buffers handed to the runtime --------------------===//

#include "loom/Buffers/DataPointer.h"

#include "loom/abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"

using namespace mlir;

Value mlir::loom::buildDataPointer(OpBuilder &b, Location loc, Value buffer,
                                   memref::ExtractStridedMetadataOp *metadata) {
  auto view = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
  if (metadata)
    *metadata = view;
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  int64_t width = llvm::divideCeil(
      cast<MemRefType>(buffer.getType()).getElementTypeBitWidth(), 8);
  Value bytes = arith::MulIOp::create(
      b, loc, view.getOffset(), arith::ConstantIndexOp::create(b, loc, width));
  Value address = arith::IndexCastOp::create(
      b, loc, b.getI64Type(), arith::AddIOp::create(b, loc, base, bytes));
  return LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()), address);
}

Value mlir::loom::getPointedBuffer(Value pointer) {
  auto cast = pointer.getDefiningOp<LLVM::IntToPtrOp>();
  auto address =
      cast ? cast.getArg().getDefiningOp<arith::IndexCastOp>() : nullptr;
  if (!address)
    return {};
  Value sum = address.getIn();
  SmallVector<Value> bases = {sum};
  if (auto add = sum.getDefiningOp<arith::AddIOp>())
    bases = {add.getLhs(), add.getRhs()};
  for (Value base : bases)
    if (auto aligned =
            base.getDefiningOp<memref::ExtractAlignedPointerAsIndexOp>())
      return aligned.getSource();
  return {};
}

std::optional<unsigned> mlir::loom::getReadOnlyPointers(Operation *op) {
  auto call = dyn_cast<func::CallOp>(op);
  if (!call)
    return std::nullopt;
  StringRef callee = call.getCallee();
  // A and B.
  if (llvm::is_contained({StringRef(LOOM_RT_SGEMM), StringRef(LOOM_RT_GEMM),
                          StringRef(LOOM_RT_GEMM_ROUNDED),
                          StringRef(LOOM_RT_GEMM_GELU)},
                         callee))
    return 2;
  // A, B, the bias and C.
  if (callee == LOOM_RT_GEMM_ADD)
    return 4;
  // The logits.
  if (callee == LOOM_RT_SOFTMAX_STATS)
    return 1;
  return std::nullopt;
}

std::optional<loom_dtype> mlir::loom::getRuntimeElementType(Type element) {
  if (element.isF32())
    return LOOM_DTYPE_F32;
  if (element.isBF16())
    return LOOM_DTYPE_BF16;
  if (element.isF16())
    return LOOM_DTYPE_F16;
  return std::nullopt;
}

FailureOr<Value> mlir::loom::getReadableBuffer(
    RewriterBase &rewriter, Operation *op, Value tensor,
    const bufferization::BufferizationOptions &options,
    bufferization::BufferizationState &state) {
  FailureOr<Value> buffer =
      bufferization::getBuffer(rewriter, tensor, options, state);
  if (failed(buffer))
    return failure();
  auto type = cast<MemRefType>(buffer->getType());
  if (memref::isStaticShapeAndContiguousRowMajor(type))
    return buffer;
  if (!type.hasStaticShape())
    return op->emitOpError("hands the runtime a buffer of dynamic shape");
  FailureOr<Value> copy = options.createAlloc(
      rewriter, op->getLoc(),
      MemRefType::get(type.getShape(), type.getElementType()), ValueRange{});
  if (failed(copy) ||
      failed(options.createMemCpy(rewriter, op->getLoc(), *buffer, *copy)))
    return failure();
  return copy;
}

void mlir::loom::buildRuntimeCall(OpBuilder &b, Operation *op, StringRef callee,
                                  ValueRange args) {
  auto module = op->getParentOfType<ModuleOp>();
  if (!module.lookupSymbol(callee)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    func::FuncOp::create(b, module.getLoc(), callee,
                         b.getFunctionType(args.getTypes(), {}))
        .setPrivate();
  }
  func::CallOp::create(b, op->getLoc(), callee, TypeRange{}, args);
}
