//===- BufferizeCollectives.cpp - Collectives on buffers: runtime calls ---===//
//
// Upstream's shard collectives have value semantics and no bufferization.
// Loom gives them one, as calls of the runtime on the communicator of the
// grid axes they communicate over: shard.all_reduce and shard.reduce sum
// their operand's buffer in place (one-shot bufferization copies the
// operand first where it is read again); shard.all_gather and
// shard.reduce_scatter write a new buffer. A pipeline's loom.send and loom.recv
// become the runtime's messages on the pipeline's communicator. The runtime
// ends the whole job if a collective or a message fails, so the generated code
// has no error path to take.
//
//===----------------------------------------------------------------------===//

#include "loom/Buffers/DataPointer.h"

#include "loom/Dialect/LoomDialect.h"

#include "loom/Bufferization/Collectives.h"
#include "loom/abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::bufferization;
using mlir::loom::buildDataPointer;

namespace {
/// The runtime's group of ranks that share every coordinate but those of
/// `axes` on a pp x dp x tp grid.
FailureOr<int32_t> groupOf(Operation *op, FlatSymbolRefAttr gridName,
                           ArrayRef<shard::GridAxis> axes) {
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, gridName);
  if (!grid || grid.getRank() != 3)
    return op->emitOpError("needs a grid of shape pp x dp x tp");
  if (axes.size() == 3)
    return LOOM_GROUP_WORLD;
  if (axes.size() == 1 && axes[0] >= 0 && axes[0] < 3)
    return std::array<int32_t, 3>{LOOM_GROUP_PP, LOOM_GROUP_DP,
                                  LOOM_GROUP_TP}[axes[0]];
  return op->emitOpError("communicates over grid axes the runtime has no "
                         "group for: one axis, or all three");
}

template <typename CollectiveOp> FailureOr<int32_t> groupOf(CollectiveOp op) {
  return groupOf(op, op.getGridAttr(), op.getGridAxes());
}

LLVM::LLVMFuncOp declare(OpBuilder &b, ModuleOp module, StringRef name,
                         LLVM::LLVMFunctionType type) {
  if (auto existing = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
    return existing;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  auto func = LLVM::LLVMFuncOp::create(b, module.getLoc(), name, type);
  func->setAttr(mlir::loom::LoomDialect::getCommunicationAttrName(),
                b.getUnitAttr());
  return func;
}

Value llvmConstant(OpBuilder &b, Location loc, Type type, int64_t value) {
  return LLVM::ConstantOp::create(b, loc, type, b.getIntegerAttr(type, value));
}

/// The operand's buffer, checked to be one the runtime can take whole.
FailureOr<Value> contiguousBuffer(RewriterBase &rewriter, Operation *op,
                                  Value tensor,
                                  const BufferizationOptions &options,
                                  BufferizationState &state) {
  FailureOr<Value> buffer = getBuffer(rewriter, tensor, options, state);
  if (failed(buffer))
    return failure();
  if (!memref::isStaticShapeAndContiguousRowMajor(
          cast<MemRefType>(buffer->getType())))
    return op->emitOpError("communicates a buffer that may not be "
                           "contiguous; the runtime takes contiguous buffers");
  return buffer;
}

/// Calls the runtime's `callee(group, dtype, buffers..., counts...,
/// indices...)`, declaring it on first use: `counts` are the i64 arguments
/// after the buffers (the elements, then a peer and a tag for point to
/// point), `indices` index values passed as i64 after them (a reduce's
/// root).
void callCollective(RewriterBase &rewriter, Operation *op, StringRef callee,
                    int32_t group, ArrayRef<Value> buffers,
                    ArrayRef<int64_t> counts, loom_dtype dtype = LOOM_DTYPE_F32,
                    ValueRange indices = {}) {
  Location loc = op->getLoc();
  MLIRContext *ctx = op->getContext();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  Type i32 = rewriter.getI32Type(), i64 = rewriter.getI64Type();
  SmallVector<Type> types = {i32, i32};
  types.append(buffers.size(), ptr);
  types.append(counts.size() + indices.size(), i64);
  auto function =
      declare(rewriter, op->getParentOfType<ModuleOp>(), callee,
              LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), types));
  SmallVector<Value> operands = {llvmConstant(rewriter, loc, i32, group),
                                 llvmConstant(rewriter, loc, i32, dtype)};
  for (Value buffer : buffers)
    operands.push_back(buildDataPointer(rewriter, loc, buffer));
  for (int64_t count : counts)
    operands.push_back(llvmConstant(rewriter, loc, i64, count));
  for (Value index : indices)
    operands.push_back(arith::IndexCastOp::create(rewriter, loc, i64, index));
  LLVM::CallOp::create(rewriter, loc, function, operands);
}

/// The runtime's element type for `element`, which messages move as they
/// are.
FailureOr<loom_dtype> messageType(Operation *op, Type element) {
  if (std::optional<loom_dtype> dtype = loom::getRuntimeElementType(element))
    return *dtype;
  return op->emitOpError("moves ")
         << element << " elements; the runtime moves f32, bf16 and f16";
}

bool isF32(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getElementType().isF32();
}

/// The rank of the group a reduce sums onto, as an index: its one
/// coordinate along the group's one grid axis.
FailureOr<Value> getRoot(OpBuilder &b, shard::ReduceOp op) {
  ArrayRef<int64_t> root = op.getRoot();
  if (root.size() != 1 || op.getGridAxes().size() != 1)
    return op.emitOpError("the runtime reduces onto a rank of one grid axis");
  if (!ShapedType::isDynamic(root[0]))
    return arith::ConstantIndexOp::create(b, op.getLoc(), root[0]).getResult();
  return op.getRootDynamic().front();
}

/// shard.all_reduce and shard.reduce combine their operand's buffer in
/// place: every rank's becomes the sum (an all-reduce's maximum), or the
/// root's does and the others' are left undefined.
template <typename CollectiveOp>
struct InPlaceCollective : public BufferizableOpInterface::ExternalModel<
                               InPlaceCollective<CollectiveOp>, CollectiveOp> {
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
    constexpr bool reduce = std::is_same_v<CollectiveOp, shard::ReduceOp>;
    auto op = cast<CollectiveOp>(rawOp);
    auto type = cast<RankedTensorType>(op.getInput().getType());
    bool max = op.getReduction() == shard::ReductionKind::Max;
    if (!isF32(type) || op.getResult().getType() != type ||
        ((reduce || !max) && op.getReduction() != shard::ReductionKind::Sum))
      return op.emitOpError(reduce ? "only f32 sums into the same type run "
                                     "on the runtime's communicators"
                                   : "only f32 sums and maxima into the same "
                                     "type run on the runtime's "
                                     "communicators");
    SmallVector<Value> root;
    if constexpr (reduce) {
      FailureOr<Value> rank = getRoot(rewriter, op);
      if (failed(rank))
        return failure();
      root.push_back(*rank);
    }
    FailureOr<int32_t> group = groupOf(op);
    if (failed(group))
      return failure();
    FailureOr<Value> buffer =
        contiguousBuffer(rewriter, op, op.getInput(), options, state);
    if (failed(buffer))
      return failure();

    StringRef callee = reduce ? LOOM_RT_GROUP_REDUCE
                       : max  ? LOOM_RT_GROUP_ALL_REDUCE_MAX
                              : LOOM_RT_GROUP_ALL_REDUCE;
    callCollective(rewriter, op, callee, *group, *buffer,
                   {type.getNumElements()}, LOOM_DTYPE_F32, root);
    replaceOpWithBufferizedValues(rewriter, op, *buffer);
    return success();
  }
};

/// The number of ranks that communicate over `axes` of the op's grid.
int64_t groupSize(Operation *op, FlatSymbolRefAttr gridName,
                  ArrayRef<shard::GridAxis> axes) {
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, gridName);
  int64_t size = 1;
  for (shard::GridAxis axis : axes)
    size *= grid.getShape()[axis];
  return size;
}

/// `buffer` of shape [..., parts * n, ...] (dimension `axis`) viewed as
/// [..., parts, n, ...].
Value splitDim(OpBuilder &b, Location loc, Value buffer, int64_t axis,
               int64_t parts) {
  auto type = cast<MemRefType>(buffer.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] /= parts;
  shape.insert(shape.begin() + axis, parts);
  SmallVector<ReassociationIndices> groups;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (d < axis)
      groups.push_back({d});
    else if (d == axis)
      groups.push_back({d, d + 1});
    else
      groups.push_back({d + 1});
  }
  return memref::ExpandShapeOp::create(
      b, loc, MemRefType::get(shape, type.getElementType()), buffer, groups);
}

/// The permutation that moves dimension `from` of a tensor to `to`.
SmallVector<int64_t> moveDim(int64_t rank, int64_t from, int64_t to) {
  SmallVector<int64_t> order = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  order.erase(order.begin() + from);
  order.insert(order.begin() + to, from);
  return order;
}

/// Gathers and reduce-scatters read their operand and write a new buffer,
/// through the runtime function `Callee`, which takes the group, the
/// dtype, both buffers and the count of elements per rank. Along the
/// leading dimension (or one that only ones precede), concatenating the
/// ranks' blocks in rank order is what MPI does with contiguous buffers;
/// along another, the blocks go through a buffer of shape [ranks, block]
/// and a transpose.
template <typename CollectiveOp>
struct ResultBufferCollective
    : public loom::ReadsOperandsModel<ResultBufferCollective<CollectiveOp>,
                                      CollectiveOp> {
  bool bufferizesToAllocation(Operation *, Value) const { return true; }

  LogicalResult bufferize(Operation *rawOp, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto op = cast<CollectiveOp>(rawOp);
    auto input = cast<RankedTensorType>(op.getInput().getType());
    auto result = cast<RankedTensorType>(op.getResult().getType());
    constexpr bool gather = std::is_same_v<CollectiveOp, shard::AllGatherOp>;
    int64_t axis;
    StringRef callee;
    int64_t count;
    if constexpr (gather) {
      axis = op.getGatherAxis().getSExtValue();
      callee = LOOM_RT_GROUP_ALL_GATHER;
      count = input.getNumElements();
    } else {
      if (op.getReduction() != shard::ReductionKind::Sum)
        return op.emitOpError("only sums run on the runtime's communicators");
      axis = op.getScatterAxis().getSExtValue();
      callee = LOOM_RT_GROUP_REDUCE_SCATTER;
      count = result.getNumElements();
    }
    // Gathers move bf16 and f16 as they are (offload's narrowed slices);
    // sums are of f32 only.
    loom_dtype dtype = LOOM_DTYPE_F32;
    if constexpr (gather) {
      FailureOr<loom_dtype> moved = messageType(op, input.getElementType());
      if (failed(moved))
        return failure();
      dtype = *moved;
    } else if (!isF32(input) || !isF32(result)) {
      return op.emitOpError("only f32 tensors are summed on the runtime's "
                            "communicators");
    }
    if (!result.hasStaticShape())
      return op.emitOpError("only static tensors run on the runtime's "
                            "communicators");
    bool leading = llvm::all_of(input.getShape().take_front(axis),
                                [](int64_t d) { return d == 1; });
    FailureOr<int32_t> group = groupOf(op);
    if (failed(group))
      return failure();
    FailureOr<Value> send =
        loom::getReadableBuffer(rewriter, op, op.getInput(), options, state);
    if (failed(send))
      return failure();

    Location loc = op.getLoc();
    auto resultType =
        MemRefType::get(result.getShape(), result.getElementType());
    FailureOr<Value> recv =
        options.createAlloc(rewriter, loc, resultType, ValueRange{});
    if (failed(recv))
      return failure();
    // Blocks of the ranks, [ranks, block], where they are not contiguous in
    // the gathered or scattered tensor.
    Value blocks;
    int64_t ranks = groupSize(op, op.getGridAttr(), op.getGridAxes());
    if (!leading) {
      RankedTensorType block = gather ? input : result;
      SmallVector<int64_t> shape = {ranks};
      llvm::append_range(shape, block.getShape());
      FailureOr<Value> buffer = options.createAlloc(
          rewriter, loc, MemRefType::get(shape, block.getElementType()),
          ValueRange{});
      if (failed(buffer))
        return failure();
      blocks = *buffer;
    }
    if (!gather && blocks)
      linalg::TransposeOp::create(
          rewriter, loc, splitDim(rewriter, loc, *send, axis, ranks), blocks,
          moveDim(input.getRank() + 1, axis, 0));
    callCollective(rewriter, op, callee, *group,
                   {gather || !blocks ? *send : blocks,
                    !gather || !blocks ? *recv : blocks},
                   {count}, dtype);
    if (gather && blocks)
      linalg::TransposeOp::create(rewriter, loc, blocks,
                                  splitDim(rewriter, loc, *recv, axis, ranks),
                                  moveDim(input.getRank() + 1, 0, axis));
    replaceOpWithBufferizedValues(rewriter, op, *recv);
    return success();
  }
};
/// Calls the runtime's message function `callee` on `buffer`, which holds
/// the tensor `op` sends or receives.
template <typename MessageOp>
LogicalResult callMessage(RewriterBase &rewriter, MessageOp op,
                          StringRef callee, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  FailureOr<loom_dtype> dtype = messageType(op, type.getElementType());
  if (failed(dtype))
    return failure();
  callCollective(rewriter, op, callee, LOOM_GROUP_PP, buffer,
                 {type.getNumElements(), static_cast<int64_t>(op.getPeer()),
                  static_cast<int64_t>(op.getTag())},
                 *dtype);
  return success();
}

/// loom.send: a call that copies the operand's buffer into a message to
/// the peer on the pipeline's communicator and returns without waiting.
struct SendBufferization
    : public loom::ReadsOperandsModel<SendBufferization, loom::SendOp> {
  LogicalResult bufferize(Operation *rawOp, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto op = cast<loom::SendOp>(rawOp);
    FailureOr<Value> buffer =
        loom::getReadableBuffer(rewriter, op, op.getValue(), options, state);
    if (failed(buffer) ||
        failed(callMessage(rewriter, op, LOOM_RT_GROUP_SEND, *buffer)))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }
};

/// loom.recv: a new buffer the runtime fills with the peer's next message
/// of the tag, waiting for it.
struct RecvBufferization
    : public BufferizableOpInterface::ExternalModel<RecvBufferization,
                                                    loom::RecvOp> {
  bool bufferizesToAllocation(Operation *, Value) const { return true; }

  LogicalResult bufferize(Operation *rawOp, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto op = cast<loom::RecvOp>(rawOp);
    auto type = cast<RankedTensorType>(op.getResult().getType());
    FailureOr<Value> buffer = options.createAlloc(
        rewriter, op.getLoc(),
        MemRefType::get(type.getShape(), type.getElementType()), ValueRange{});
    if (failed(buffer) ||
        failed(callMessage(rewriter, op, LOOM_RT_GROUP_RECV, *buffer)))
      return failure();
    replaceOpWithBufferizedValues(rewriter, op, *buffer);
    return success();
  }
};
} // namespace

FailureOr<Value> mlir::loom::buildGroupRank(OpBuilder &b,
                                            shard::ProcessMultiIndexOp op) {
  if (op.getNumResults() != 1)
    return op.emitOpError("the runtime tells one grid axis at a time");
  FailureOr<int32_t> group = groupOf(op, op.getGridAttr(), op.getAxes());
  if (failed(group))
    return failure();
  if (*group == LOOM_GROUP_WORLD)
    return op.emitOpError("the runtime tells one grid axis at a time");
  Location loc = op.getLoc();
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  auto function =
      declare(b, op->getParentOfType<ModuleOp>(), LOOM_RT_GROUP_RANK,
              LLVM::LLVMFunctionType::get(i64, {i32}));
  Value rank =
      LLVM::CallOp::create(b, loc, function,
                           ValueRange{llvmConstant(b, loc, i32, *group)})
          .getResult();
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), rank).getResult();
}

void mlir::loom::registerCollectiveBufferizationModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, shard::ShardDialect *) {
    shard::AllReduceOp::attachInterface<InPlaceCollective<shard::AllReduceOp>>(
        *ctx);
    shard::ReduceOp::attachInterface<InPlaceCollective<shard::ReduceOp>>(*ctx);
    shard::AllGatherOp::attachInterface<
        ResultBufferCollective<shard::AllGatherOp>>(*ctx);
    shard::ReduceScatterOp::attachInterface<
        ResultBufferCollective<shard::ReduceScatterOp>>(*ctx);
    // The dialects of the ops its bufferization creates.
    ctx->loadDialect<arith::ArithDialect, LLVM::LLVMDialect,
                     linalg::LinalgDialect, memref::MemRefDialect>();
  });
  registry.addExtension(+[](MLIRContext *ctx, loom::LoomDialect *) {
    loom::SendOp::attachInterface<SendBufferization>(*ctx);
    loom::RecvOp::attachInterface<RecvBufferization>(*ctx);
    ctx->loadDialect<arith::ArithDialect, LLVM::LLVMDialect,
                     memref::MemRefDialect>();
  });
}
