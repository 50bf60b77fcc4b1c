//===- DataPointer.cpp - Buffers handed to the runtime --------------------===//

#include "DataPointer.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;

Value mlir::loom::buildDataPointer(OpBuilder &b, Location loc, Value buffer,
                                   memref::ExtractStridedMetadataOp *metadata) {
  auto view = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
  if (metadata)
    *metadata = view;
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  int64_t width =
      cast<MemRefType>(buffer.getType()).getElementTypeBitWidth() / 8;
  Value bytes = arith::MulIOp::create(
      b, loc, view.getOffset(), arith::ConstantIndexOp::create(b, loc, width));
  Value address = arith::IndexCastOp::create(
      b, loc, b.getI64Type(), arith::AddIOp::create(b, loc, base, bytes));
  return LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()), address);
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
