//===- Trace.cpp - The timeline's spans: calls of the runtime -------------===//
//
// loom.trace_begin and loom.trace_end become calls of the runtime's
// loom_rt_trace_begin / loom_rt_trace_end, which record a span when the run
// is traced and return at once when it is not. A call of an external
// function keeps its place among the ops with effects through
// bufferization and the lowering to LLVM.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "loom/abi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace mlir::loom;

static_assert(LOOM_TRACE_FORWARD == static_cast<int>(TraceSpan::forward) &&
                  LOOM_TRACE_BACKWARD ==
                      static_cast<int>(TraceSpan::backward) &&
                  LOOM_TRACE_OPTIMIZER ==
                      static_cast<int>(TraceSpan::optimizer),
              "the runtime numbers the spans as the dialect does");

namespace {
/// The runtime's `name`, declared in the module on first use.
func::FuncOp declareRuntime(ConversionPatternRewriter &rewriter, Operation *op,
                            StringRef name, TypeRange inputs) {
  auto module = op->getParentOfType<ModuleOp>();
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(module.getBody());
  auto function = func::FuncOp::create(rewriter, module.getLoc(), name,
                                       rewriter.getFunctionType(inputs, {}));
  function.setPrivate();
  return function;
}

Value constant(ConversionPatternRewriter &rewriter, Location loc, Type type,
               int64_t value) {
  return arith::ConstantOp::create(rewriter, loc,
                                   rewriter.getIntegerAttr(type, value));
}

struct TraceBeginLowering : public OpConversionPattern<TraceBeginOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TraceBeginOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type i32 = rewriter.getI32Type(), i64 = rewriter.getI64Type();
    func::FuncOp callee =
        declareRuntime(rewriter, op, LOOM_RT_TRACE_BEGIN, {i32, i64, i64});
    Location loc = op.getLoc();
    rewriter.replaceOpWithNewOp<func::CallOp>(
        op, callee,
        ValueRange{
            constant(rewriter, loc, i32, static_cast<int64_t>(op.getSpan())),
            constant(rewriter, loc, i64, op.getMicroBatch()),
            constant(rewriter, loc, i64, op.getChunk())});
    return success();
  }
};

struct TraceEndLowering : public OpConversionPattern<TraceEndOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TraceEndOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type i32 = rewriter.getI32Type();
    func::FuncOp callee =
        declareRuntime(rewriter, op, LOOM_RT_TRACE_END, {i32});
    rewriter.replaceOpWithNewOp<func::CallOp>(
        op, callee,
        ValueRange{constant(rewriter, op.getLoc(), i32,
                            static_cast<int64_t>(op.getSpan()))});
    return success();
  }
};
} // namespace

void mlir::loom::populateLoomTraceToCallPatterns(RewritePatternSet &patterns) {
  patterns.add<TraceBeginLowering, TraceEndLowering>(patterns.getContext());
}
