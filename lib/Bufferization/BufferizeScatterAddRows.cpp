//===- BufferizeScatterAddRows.cpp - The rows' scatter-add on buffers -----===//
//
// loom.scatter_add_rows becomes a call of the runtime's
// loom_rt_scatter_add_rows, which adds into its init's buffer: the result
// is that buffer, so that the token table's gradient, started from the tied
// head's, is updated where it is (through a contiguous copy where that
// buffer is a strided view). The runtime's scratch for sorting the
// indices is a buffer of the step like any other, so that the static arena
// counts it.
//
//===----------------------------------------------------------------------===//

#include "loom/Buffers/DataPointer.h"

#include "loom/Dialect/LoomDialect.h"

#include "loom/Bufferization/ScatterAddRows.h"
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
struct ScatterAddRowsModel
    : public BufferizableOpInterface::ExternalModel<ScatterAddRowsModel,
                                                    loom::ScatterAddRowsOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *op, OpOperand &operand,
                               const AnalysisState &) const {
    return &operand == &cast<loom::ScatterAddRowsOp>(op).getInitMutable();
  }
  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &) const {
    auto scatter = cast<loom::ScatterAddRowsOp>(op);
    if (&operand != &scatter.getInitMutable())
      return {};
    return {{scatter.getResult(), BufferRelation::Equivalent}};
  }

  LogicalResult bufferize(Operation *rawOp, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto op = cast<loom::ScatterAddRowsOp>(rawOp);
    Location loc = op.getLoc();
    ArrayRef<int64_t> shape = op.getInit().getType().getShape();
    int64_t n = op.getIndices().getType().getNumElements();
    if (!loom_scatter_add_rows_fits(n, shape[0]))
      return op.emitOpError("scatters ")
             << n << " rows into " << shape[0]
             << ", more than the runtime's int32 positions hold";
    FailureOr<Value> updates =
        loom::getReadableBuffer(rewriter, op, op.getUpdates(), options, state);
    FailureOr<Value> indices =
        loom::getReadableBuffer(rewriter, op, op.getIndices(), options, state);
    FailureOr<Value> buffer = getBuffer(rewriter, op.getInit(), options, state);
    if (failed(updates) || failed(indices) || failed(buffer))
      return failure();
    // The runtime takes a contiguous table: a strided view of one is added
    // into through a copy, copied back after.
    Value out = *buffer;
    bool strided = !memref::isStaticShapeAndContiguousRowMajor(
        cast<MemRefType>(out.getType()));
    if (strided) {
      FailureOr<Value> copy =
          loom::getReadableBuffer(rewriter, op, op.getInit(), options, state);
      if (failed(copy))
        return failure();
      out = *copy;
    }
    FailureOr<Value> scratch = options.createAlloc(
        rewriter, loc,
        MemRefType::get({loom_scatter_add_rows_scratch(n, shape[0])},
                        rewriter.getI32Type()),
        ValueRange{});
    if (failed(scratch))
      return failure();

    auto i64 = [&](int64_t value) -> Value {
      return arith::ConstantOp::create(rewriter, loc,
                                       rewriter.getI64IntegerAttr(value));
    };
    Value rowStart =
        op.getRowStart()
            ? arith::IndexCastOp::create(rewriter, loc, rewriter.getI64Type(),
                                         op.getRowStart())
                  .getResult()
            : i64(0);
    Type element = op.getUpdates().getType().getElementType();
    SmallVector<Value> args = {
        arith::ConstantOp::create(
            rewriter, loc,
            rewriter.getI32IntegerAttr(
                static_cast<int32_t>(*loom::getRuntimeElementType(element)))),
        i64(n), i64(shape[0]), i64(shape[1]), rowStart};
    for (Value pointee : {*indices, *updates, out, *scratch})
      args.push_back(loom::buildDataPointer(rewriter, loc, pointee));
    loom::buildRuntimeCall(rewriter, op, LOOM_RT_SCATTER_ADD_ROWS, args);
    if (strided && failed(options.createMemCpy(rewriter, loc, out, *buffer)))
      return failure();
    replaceOpWithBufferizedValues(rewriter, op, *buffer);
    return success();
  }
};
} // namespace

void mlir::loom::registerScatterAddRowsBufferizationModel(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, loom::LoomDialect *) {
    loom::ScatterAddRowsOp::attachInterface<ScatterAddRowsModel>(*ctx);
    // The dialects of the ops its bufferization creates.
    ctx->loadDialect<arith::ArithDialect, func::FuncDialect, LLVM::LLVMDialect,
                     memref::MemRefDialect>();
  });
}
