//===- BufferizeCollectives.cpp - Collectives on buffers: runtime calls ---===//
//
// Upstream's shard collectives have value semantics and no bufferization.
// Loom gives shard.all_reduce one: it reduces its operand's buffer in place
// (one-shot bufferization copies the operand first where it is read again),
// through the runtime's loom_rt_group_all_reduce on the communicator of the
// grid axis it reduces over. The runtime ends the whole job if it fails, so
// the generated code has no error path to take.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/Collectives.h"
#include "loom/abi.h"
#include "loom/runtime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::bufferization;

namespace {
/// The runtime's group of ranks that share every coordinate but those of
/// `axes` on a pp x dp x tp grid.
FailureOr<int32_t> groupOf(shard::AllReduceOp op) {
  auto grid =
      SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, op.getGridAttr());
  ArrayRef<shard::GridAxis> axes = op.getGridAxes();
  if (!grid || grid.getRank() != 3)
    return op.emitOpError("needs a grid of shape pp x dp x tp");
  if (axes.size() == 3)
    return LOOM_GROUP_WORLD;
  if (axes.size() == 1 && axes[0] >= 0 && axes[0] < 3)
    return std::array<int32_t, 3>{LOOM_GROUP_PP, LOOM_GROUP_DP,
                                  LOOM_GROUP_TP}[axes[0]];
  return op.emitOpError("reduces over grid axes the runtime has no group "
                        "for: one axis, or all three");
}

LLVM::LLVMFuncOp declare(OpBuilder &b, ModuleOp module, StringRef name,
                         LLVM::LLVMFunctionType type) {
  if (auto existing = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
    return existing;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  return LLVM::LLVMFuncOp::create(b, module.getLoc(), name, type);
}

struct AllReduceBufferization
    : public BufferizableOpInterface::ExternalModel<AllReduceBufferization,
                                                    shard::AllReduceOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return true;
  }
  AliasingValueList getAliasingValues(Operation *op, OpOperand &,
                                      const AnalysisState &) const {
    return {{op->getResult(0), BufferRelation::Equivalent}};
  }

  LogicalResult bufferize(Operation *rawOp, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto op = cast<shard::AllReduceOp>(rawOp);
    auto type = dyn_cast<RankedTensorType>(op.getInput().getType());
    if (!type || !type.getElementType().isF32() ||
        op.getResult().getType() != type ||
        op.getReduction() != shard::ReductionKind::Sum)
      return op.emitOpError("only f32 sums into the same type run on the "
                            "runtime's communicators");
    FailureOr<int32_t> group = groupOf(op);
    if (failed(group))
      return failure();
    FailureOr<Value> buffer =
        getBuffer(rewriter, op.getInput(), options, state);
    if (failed(buffer))
      return failure();
    if (!memref::isStaticShapeAndContiguousRowMajor(
            cast<MemRefType>(buffer->getType())))
      return op.emitOpError("reduces a buffer that may not be contiguous; "
                            "the runtime takes contiguous buffers");

    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    Type i32 = rewriter.getI32Type(), i64 = rewriter.getI64Type();
    auto function = declare(
        rewriter, op->getParentOfType<ModuleOp>(), LOOM_RT_GROUP_ALL_REDUCE,
        LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                    {i32, i32, ptr, i64}));
    // The aligned pointer is that of the base buffer; add the view's offset.
    auto metadata =
        memref::ExtractStridedMetadataOp::create(rewriter, loc, *buffer);
    Value base =
        memref::ExtractAlignedPointerAsIndexOp::create(rewriter, loc, *buffer);
    Value offset =
        arith::MulIOp::create(rewriter, loc, metadata.getOffset(),
                              arith::ConstantIndexOp::create(rewriter, loc, 4));
    Value address = arith::IndexCastOp::create(
        rewriter, loc, i64, arith::AddIOp::create(rewriter, loc, base, offset));
    Value pointer = LLVM::IntToPtrOp::create(rewriter, loc, ptr, address);
    auto constant = [&](Type t, int64_t v) -> Value {
      return LLVM::ConstantOp::create(rewriter, loc, t,
                                      rewriter.getIntegerAttr(t, v));
    };
    LLVM::CallOp::create(rewriter, loc, function,
                         ValueRange{constant(i32, *group),
                                    constant(i32, LOOM_DTYPE_F32), pointer,
                                    constant(i64, type.getNumElements())});
    replaceOpWithBufferizedValues(rewriter, op, *buffer);
    return success();
  }
};
} // namespace

void mlir::loom::registerCollectiveBufferizationModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, shard::ShardDialect *) {
    shard::AllReduceOp::attachInterface<AllReduceBufferization>(*ctx);
    // The dialects of the ops its bufferization creates.
    ctx->loadDialect<arith::ArithDialect, LLVM::LLVMDialect,
                     memref::MemRefDialect>();
  });
}
