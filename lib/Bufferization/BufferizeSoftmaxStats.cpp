//===- BufferizeSoftmaxStats.cpp - The loss's statistics on buffers -------===//
//
// loom.softmax_stats becomes a call of the runtime's loom_rt_softmax_stats,
// which reads the logits (through a contiguous copy where they are a
// strided view) and writes the maxima and sums into two new buffers of the
// step, which the static arena places like any other.
//
//===----------------------------------------------------------------------===//

#include "loom/Buffers/DataPointer.h"

#include "loom/Dialect/LoomDialect.h"

#include "loom/Bufferization/SoftmaxStats.h"
#include "loom/abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::bufferization;

namespace {
struct SoftmaxStatsModel
    : public loom::ReadsOperandsModel<SoftmaxStatsModel, loom::SoftmaxStatsOp> {
  LogicalResult bufferize(Operation *rawOp, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto op = cast<loom::SoftmaxStatsOp>(rawOp);
    Location loc = op.getLoc();
    ArrayRef<int64_t> shape = op.getLogits().getType().getShape();
    FailureOr<Value> logits =
        loom::getReadableBuffer(rewriter, op, op.getLogits(), options, state);
    if (failed(logits))
      return failure();
    auto statsType = MemRefType::get({shape[0]}, rewriter.getF32Type());
    FailureOr<Value> max = options.createAlloc(rewriter, loc, statsType, {});
    FailureOr<Value> sum = options.createAlloc(rewriter, loc, statsType, {});
    if (failed(max) || failed(sum))
      return failure();
    auto i64 = [&](int64_t value) -> Value {
      return arith::ConstantOp::create(rewriter, loc,
                                       rewriter.getI64IntegerAttr(value));
    };
    Type element = op.getLogits().getType().getElementType();
    SmallVector<Value> args = {
        arith::ConstantOp::create(
            rewriter, loc,
            rewriter.getI32IntegerAttr(
                static_cast<int32_t>(*loom::getRuntimeElementType(element)))),
        i64(shape[0]), i64(shape[1]), i64(op.getClasses())};
    for (Value buffer : {*logits, *max, *sum})
      args.push_back(loom::buildDataPointer(rewriter, loc, buffer));
    loom::buildRuntimeCall(rewriter, op, LOOM_RT_SOFTMAX_STATS, args);
    replaceOpWithBufferizedValues(rewriter, op, {*max, *sum});
    return success();
  }
};
} // namespace

void mlir::loom::registerSoftmaxStatsBufferizationModel(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, loom::LoomDialect *) {
    loom::SoftmaxStatsOp::attachInterface<SoftmaxStatsModel>(*ctx);
    // The dialects of the ops its bufferization creates.
    ctx->loadDialect<arith::ArithDialect, func::FuncDialect, LLVM::LLVMDialect,
                     memref::MemRefDialect>();
  });
}
