//===- BufferizeAttention.cpp - Fused attention on buffers: runtime calls -===//
//
// Causal attention that loom-lower-to-linalg left to the runtime's fused
// kernels becomes calls on its buffers: the forward pass writes the output
// and each query's log-sum-exp, the gradient reads the operand, the output,
// the log-sum-exp and the output's gradient. The backward pass's scratch
// (each query's dot product of the output and its gradient, then, for an op
// marked query_sums, the query gradient's f32 sums) is a buffer of the step
// like any other, so the static arena counts it; none is [T, T].
//
//===----------------------------------------------------------------------===//

#include "loom/Buffers/DataPointer.h"

#include "loom/Dialect/LoomDialect.h"

#include "loom/Bufferization/Attention.h"
#include "loom/Conversion/LoomToLinalg/LoomToLinalg.h"
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
/// operand of `op`, which loom-lower-to-linalg left fused: an error for
/// any other.
struct Shape {
  loom_dtype dtype;
  int64_t batch, seq, heads, groups, headDim;
};

FailureOr<Shape> shapeOf(Operation *op, Value qkv, int64_t heads,
                         std::optional<int64_t> kvHeads) {
  auto type = cast<RankedTensorType>(qkv.getType());
  if (!loom::isFusedAttention(op, /*maxHeadDim=*/0))
    return op->emitOpError("has no fused kernel for ")
           << type << " in " << heads
           << " heads with its other tensors' element types";
  return Shape{*loom::getRuntimeElementType(type.getElementType()),
               type.getDimSize(0),
               type.getDimSize(1),
               heads,
               kvHeads.value_or(0),
               type.getDimSize(2) / loom::getQkvRowHeads(heads, kvHeads)};
}

/// The buffers of `op`'s tensor operands, each whole and contiguous, in
/// order.
FailureOr<SmallVector<Value>>
readableBuffers(RewriterBase &rewriter, Operation *op,
                const BufferizationOptions &options,
                BufferizationState &state) {
  SmallVector<Value> buffers;
  for (Value tensor : op->getOperands()) {
    FailureOr<Value> buffer =
        loom::getReadableBuffer(rewriter, op, tensor, options, state);
    if (failed(buffer))
      return failure();
    buffers.push_back(*buffer);
  }
  return buffers;
}

/// New buffers of `element`s: [B, T, C] for a result of the operand's
/// element type, [B, heads, T] for each query's f32 statistics.
FailureOr<Value> allocate(RewriterBase &rewriter, Operation *op,
                          const BufferizationOptions &options,
                          ArrayRef<int64_t> shape, Type element) {
  return options.createAlloc(rewriter, op->getLoc(),
                             MemRefType::get(shape, element), ValueRange{});
}
FailureOr<Value> allocateRows(RewriterBase &rewriter, Operation *op,
                              const BufferizationOptions &options,
                              const Shape &s) {
  return allocate(rewriter, op, options, {s.batch, s.heads, s.seq},
                  rewriter.getF32Type());
}

/// Calls the runtime's `callee(dtype, batch, seq, heads, groups, head_dim,
/// buffers...)`.
void callAttention(OpBuilder &b, Operation *op, StringRef callee,
                   const Shape &s, ArrayRef<Value> buffers) {
  Location loc = op->getLoc();
  SmallVector<Value> args = {arith::ConstantOp::create(
      b, loc, b.getI32IntegerAttr(static_cast<int32_t>(s.dtype)))};
  for (int64_t size : {s.batch, s.seq, s.heads, s.groups, s.headDim})
    args.push_back(
        arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(size)));
  for (Value buffer : buffers)
    args.push_back(loom::buildDataPointer(b, loc, buffer));
  loom::buildRuntimeCall(b, op, callee, args);
}

/// Both ops read their operands and write new buffers.
template <typename Model, typename Op>
struct AttentionBufferization : public loom::ReadsOperandsModel<Model, Op> {
  bool bufferizesToAllocation(Operation *, Value) const { return true; }
};

/// loom_rt_attention: the output and the log-sum-exp, which the gradient
/// reads.
struct AttentionModel
    : public AttentionBufferization<AttentionModel, loom::CausalAttentionOp> {
  LogicalResult bufferize(Operation *rawOp, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto op = cast<loom::CausalAttentionOp>(rawOp);
    FailureOr<Shape> shape =
        shapeOf(op, op.getQkv(), op.getNumHeads(), op.getKvHeads());
    if (failed(shape))
      return failure();
    FailureOr<SmallVector<Value>> qkv =
        readableBuffers(rewriter, op, options, state);
    if (failed(qkv))
      return failure();
    auto type = cast<RankedTensorType>(op.getResult().getType());
    FailureOr<Value> out =
        allocate(rewriter, op, options, type.getShape(), type.getElementType());
    FailureOr<Value> lse = allocateRows(rewriter, op, options, *shape);
    if (failed(out) || failed(lse))
      return failure();
    callAttention(rewriter, op, LOOM_RT_ATTENTION, *shape,
                  {qkv->front(), *out, *lse});
    replaceOpWithBufferizedValues(rewriter, op, {*out, *lse});
    return success();
  }
};

/// loom_rt_attention_grad on the operand, the forward's result, log-sum-exp
/// and result gradient, with scratch for each query's dot product.
struct AttentionGradModel
    : public AttentionBufferization<AttentionGradModel,
                                    loom::CausalAttentionGradOp> {
  LogicalResult bufferize(Operation *rawOp, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto op = cast<loom::CausalAttentionGradOp>(rawOp);
    FailureOr<Shape> shape =
        shapeOf(op, op.getQkv(), op.getNumHeads(), op.getKvHeads());
    if (failed(shape))
      return failure();
    FailureOr<SmallVector<Value>> operands =
        readableBuffers(rewriter, op, options, state);
    if (failed(operands))
      return failure();
    auto [grad, qkv, out, lse] = std::make_tuple(
        (*operands)[0], (*operands)[1], (*operands)[2], (*operands)[3]);
    // Each query's dot product, and the query gradient's f32 sums where
    // the kernels take them.
    FailureOr<Value> delta = allocate(
        rewriter, op, options,
        {loom_attention_grad_scratch(shape->batch, shape->seq, shape->heads,
                                     shape->headDim, op.getQuerySums())},
        rewriter.getF32Type());
    auto type = cast<RankedTensorType>(op.getType());
    FailureOr<Value> dqkv =
        allocate(rewriter, op, options, type.getShape(), type.getElementType());
    if (failed(delta) || failed(dqkv))
      return failure();
    callAttention(rewriter, op, LOOM_RT_ATTENTION_GRAD, *shape,
                  {qkv, out, grad, lse, *dqkv, *delta});
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
