//===- BufferizeAttention.cpp - Fused attention on buffers: runtime calls -===//
//
// Causal attention that loom-lower-to-linalg left to the runtime's fused
// kernels becomes calls on its buffers: the forward pass writes the output
// and each query's log-sum-exp (which the backward pass computes again,
// with the scores it needs anyway), the gradient reads the operand, the
// output and its gradient. Their scratch (the log-sum-exp, the backward
// pass's row sums) are buffers of the step like any other, so the static
// arena counts them; none is [T, T].
//
//===----------------------------------------------------------------------===//

#include "DataPointer.h"

#include "Loom/LoomDialect.h"

#include "loom/Conversion/Attention.h"
#include "loom/abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::bufferization;

namespace {
/// The sizes the runtime's attention takes, from the fused [B, T, 3C]
/// operand.
struct Shape {
  loom_dtype dtype;
  int64_t batch, seq, heads, headDim;
};

FailureOr<Shape> shapeOf(Operation *op, Value qkv, int64_t heads) {
  auto type = cast<RankedTensorType>(qkv.getType());
  std::optional<loom_dtype> dtype =
      loom::getRuntimeElementType(type.getElementType());
  if (!dtype || type.getRank() != 3 || !type.hasStaticShape() ||
      type.getDimSize(2) % (3 * heads) != 0)
    return op->emitOpError("has no fused kernel for ")
           << type << " in " << heads << " heads";
  return Shape{*dtype, type.getDimSize(0), type.getDimSize(1), heads,
               type.getDimSize(2) / (3 * heads)};
}

/// A new buffer of `shape` and `element`s.
FailureOr<Value> allocate(RewriterBase &rewriter, Operation *op,
                          const BufferizationOptions &options,
                          ArrayRef<int64_t> shape, Type element) {
  return options.createAlloc(rewriter, op->getLoc(),
                             MemRefType::get(shape, element), ValueRange{});
}

/// The call's leading arguments: the dtype and the four sizes.
SmallVector<Value> sizeArguments(OpBuilder &b, Location loc, const Shape &s) {
  SmallVector<Value> args = {arith::ConstantOp::create(
      b, loc, b.getI32IntegerAttr(static_cast<int32_t>(s.dtype)))};
  for (int64_t size : {s.batch, s.seq, s.heads, s.headDim})
    args.push_back(
        arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(size)));
  return args;
}

/// loom_rt_attention on `qkv`'s buffer: the output (of the element type of
/// `qkv`, [B, T, C]) and the log-sum-exp ([B, heads, T], f32) as new
/// buffers.
FailureOr<std::pair<Value, Value>>
buildForward(RewriterBase &rewriter, Operation *op, Value qkv, const Shape &s,
             const BufferizationOptions &options) {
  Location loc = op->getLoc();
  Type element = cast<MemRefType>(qkv.getType()).getElementType();
  FailureOr<Value> out = allocate(
      rewriter, op, options, {s.batch, s.seq, s.heads * s.headDim}, element);
  FailureOr<Value> lse = allocate(
      rewriter, op, options, {s.batch, s.heads, s.seq}, rewriter.getF32Type());
  if (failed(out) || failed(lse))
    return failure();
  SmallVector<Value> args = sizeArguments(rewriter, loc, s);
  for (Value buffer : {qkv, *out, *lse})
    args.push_back(loom::buildDataPointer(rewriter, loc, buffer));
  loom::buildRuntimeCall(rewriter, op, LOOM_RT_ATTENTION, args);
  return std::make_pair(*out, *lse);
}

/// Both ops read their operands and write new buffers.
template <typename Model, typename Op>
struct AttentionBufferization : public loom::ReadsOperandsModel<Model, Op> {
  bool bufferizesToAllocation(Operation *, Value) const { return true; }
};

struct AttentionModel
    : public AttentionBufferization<AttentionModel, loom::CausalAttentionOp> {
  LogicalResult bufferize(Operation *rawOp, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto op = cast<loom::CausalAttentionOp>(rawOp);
    FailureOr<Shape> shape = shapeOf(op, op.getQkv(), op.getNumHeads());
    if (failed(shape))
      return failure();
    FailureOr<Value> qkv =
        loom::getReadableBuffer(rewriter, op, op.getQkv(), options, state);
    if (failed(qkv))
      return failure();
    auto results = buildForward(rewriter, op, *qkv, *shape, options);
    if (failed(results))
      return failure();
    replaceOpWithBufferizedValues(rewriter, op, results->first);
    return success();
  }
};

struct AttentionGradModel
    : public AttentionBufferization<AttentionGradModel,
                                    loom::CausalAttentionGradOp> {
  LogicalResult bufferize(Operation *rawOp, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto op = cast<loom::CausalAttentionGradOp>(rawOp);
    FailureOr<Shape> shape = shapeOf(op, op.getQkv(), op.getNumHeads());
    if (failed(shape))
      return failure();
    Type element = op.getQkv().getType().getElementType();
    if (op.getGrad().getType().getElementType() != element ||
        op.getOut().getType().getElementType() != element)
      return op.emitOpError("has no fused kernel for a result or gradient of "
                            "another element type than its operand");
    FailureOr<Value> qkv =
        loom::getReadableBuffer(rewriter, op, op.getQkv(), options, state);
    FailureOr<Value> out =
        loom::getReadableBuffer(rewriter, op, op.getOut(), options, state);
    FailureOr<Value> grad =
        loom::getReadableBuffer(rewriter, op, op.getGrad(), options, state);
    if (failed(qkv) || failed(out) || failed(grad))
      return failure();
    SmallVector<int64_t> rows = {shape->batch, shape->heads, shape->seq};
    FailureOr<Value> lse =
        allocate(rewriter, op, options, rows, rewriter.getF32Type());
    FailureOr<Value> delta =
        allocate(rewriter, op, options, rows, rewriter.getF32Type());
    FailureOr<Value> dqkv = allocate(rewriter, op, options,
                                     op.getQkv().getType().getShape(), element);
    if (failed(lse) || failed(delta) || failed(dqkv))
      return failure();
    Location loc = op.getLoc();
    SmallVector<Value> args = sizeArguments(rewriter, loc, *shape);
    for (Value buffer : {*qkv, *out, *grad, *dqkv, *lse, *delta})
      args.push_back(loom::buildDataPointer(rewriter, loc, buffer));
    loom::buildRuntimeCall(rewriter, op, LOOM_RT_ATTENTION_GRAD, args);
    replaceOpWithBufferizedValues(rewriter, op, *dqkv);
    return success();
  }
};
} // namespace

void mlir::loom::registerAttentionBufferizationModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, loom::LoomDialect *) {
    loom::CausalAttentionOp::attachInterface<AttentionModel>(*ctx);
    loom::CausalAttentionGradOp::attachInterface<AttentionGradModel>(*ctx);
    // The dialects of the ops its bufferization creates.
    ctx->loadDialect<arith::ArithDialect, func::FuncDialect, LLVM::LLVMDialect,
                     memref::MemRefDialect>();
  });
}
