//===- BufferizeTransfer.cpp - Host and device copies on buffers ----------===//
//
// loom.transfer writes its source into its destination's buffer with one
// call of the runtime's loom_rt_transfer, which knows how the two memories
// are reached (a copy on the step's stream on a GPU, memcpy between the
// arenas on a CPU); an async one with loom_rt_transfer_start, which
// loom.transfer_wait's loom_rt_transfer_wait completes. The result is the
// destination's buffer. A source that may not be contiguous is copied into
// a contiguous buffer first.
//
//===----------------------------------------------------------------------===//

#include "loom/Buffers/DataPointer.h"

#include "loom/Dialect/LoomDialect.h"

#include "loom/Bufferization/Transfer.h"
#include "loom/abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"

using namespace mlir;
using namespace mlir::bufferization;

namespace {
struct TransferModel
    : public BufferizableOpInterface::ExternalModel<TransferModel,
                                                    loom::TransferOp> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &) const {
    auto transfer = cast<loom::TransferOp>(op);
    // An accumulating transfer adds the destination's elements.
    return &operand == &transfer.getSourceMutable() ||
           (transfer.getAccumulate() && &operand == &transfer.getDestMutable());
  }
  bool bufferizesToMemoryWrite(Operation *op, OpOperand &operand,
                               const AnalysisState &) const {
    return &operand == &cast<loom::TransferOp>(op).getDestMutable();
  }
  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &) const {
    auto transfer = cast<loom::TransferOp>(op);
    if (&operand != &transfer.getDestMutable())
      return {};
    return {{transfer.getResult(), BufferRelation::Equivalent}};
  }

  LogicalResult bufferize(Operation *rawOp, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto op = cast<loom::TransferOp>(rawOp);
    Location loc = op.getLoc();
    // An async copy reads its source until it is waited for, by the
    // source's address: a source that must be made contiguous first would
    // be a temporary, freed before then, so that copy is made at once.
    FailureOr<Value> direct =
        getBuffer(rewriter, op.getSource(), options, state);
    if (failed(direct))
      return failure();
    bool async = op.getAsync() && memref::isStaticShapeAndContiguousRowMajor(
                                      cast<MemRefType>(direct->getType()));
    FailureOr<Value> source =
        loom::getReadableBuffer(rewriter, op, op.getSource(), options, state);
    FailureOr<Value> dest = getBuffer(rewriter, op.getDest(), options, state);
    if (failed(source) || failed(dest))
      return failure();
    if (!memref::isStaticShapeAndContiguousRowMajor(
            cast<MemRefType>(dest->getType())))
      return op.emitOpError("transfers into a buffer that may not be "
                            "contiguous");
    auto type = op.getResult().getType();
    // An i1 takes a byte, as LLVM stores it.
    int64_t bytes = loom::getStaticBytes(type);
    auto i32 = [&](int32_t value) -> Value {
      return arith::ConstantOp::create(rewriter, loc,
                                       rewriter.getI32IntegerAttr(value));
    };
    SmallVector<Value> args = {
        loom::buildDataPointer(rewriter, loc, *dest),
        loom::buildDataPointer(rewriter, loc, *source),
        arith::ConstantOp::create(rewriter, loc,
                                  rewriter.getI64IntegerAttr(bytes))};
    StringRef callee = async ? LOOM_RT_TRANSFER_START : LOOM_RT_TRANSFER;
    if (Value more = op.getAccumulate()) {
      args.push_back(
          arith::ExtUIOp::create(rewriter, loc, rewriter.getI32Type(), more));
      callee = async ? LOOM_RT_TRANSFER_ADD_START : LOOM_RT_TRANSFER_ADD;
    } else {
      args.push_back(i32(op.getTo() == loom::Placement::host ? LOOM_TO_HOST
                                                             : LOOM_TO_DEVICE));
    }
    loom::buildRuntimeCall(rewriter, op, callee, args);
    replaceOpWithBufferizedValues(rewriter, op, *dest);
    return success();
  }
};

/// loom.transfer_wait: its buffer's address names the transfer waited for;
/// it reads none of its elements (the first iteration of a loop may wait on
/// a place whose elements are not there yet), but keeps the buffer alive
/// until then.
struct TransferWaitModel
    : public BufferizableOpInterface::ExternalModel<TransferWaitModel,
                                                    loom::TransferWaitOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return false;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return false;
  }
  AliasingValueList getAliasingValues(Operation *, OpOperand &,
                                      const AnalysisState &) const {
    return {};
  }
  LogicalResult bufferize(Operation *rawOp, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto op = cast<loom::TransferWaitOp>(rawOp);
    FailureOr<Value> buffer =
        getBuffer(rewriter, op.getValue(), options, state);
    if (failed(buffer))
      return failure();
    loom::buildRuntimeCall(
        rewriter, op, LOOM_RT_TRANSFER_WAIT,
        {loom::buildDataPointer(rewriter, op.getLoc(), *buffer)});
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void mlir::loom::registerTransferBufferizationModel(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, loom::LoomDialect *) {
    loom::TransferOp::attachInterface<TransferModel>(*ctx);
    loom::TransferWaitOp::attachInterface<TransferWaitModel>(*ctx);
    ctx->loadDialect<arith::ArithDialect, func::FuncDialect, LLVM::LLVMDialect,
                     memref::MemRefDialect>();
  });
}
