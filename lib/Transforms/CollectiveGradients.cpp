//===- CollectiveGradients.cpp - VJPs of the shard collectives ------------===//
//
// The parallel passes that run before differentiation (ZeRO-3's gathers,
// tensor parallelism's reductions) leave upstream shard collectives in the
// forward pass; these models give each its conjugate, so that the backward
// pass's communication follows from differentiation alone. The convention:
// a value every rank holds whole has the same cotangent on every rank, and
// a rank's part of a divided value has its own part's cotangent.
//
//===----------------------------------------------------------------------===//

#include "loom/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
/// Gathering shards: each rank's shard receives the sum, over the ranks, of
/// the cotangent's slice it gathered from (each rank used the whole for its
/// own part of the loss).
struct AllGatherVJP
    : public DifferentiableOpInterface::ExternalModel<AllGatherVJP,
                                                      shard::AllGatherOp> {
  LogicalResult buildVJP(Operation *rawOp, RewriterBase &rewriter,
                         ValueRange resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    auto op = cast<shard::AllGatherOp>(rawOp);
    Value grad = shard::ReduceScatterOp::create(
        rewriter, op.getLoc(), op.getInput().getType(), op.getGrid(),
        op.getGridAxes(), resultGrads[0], shard::ReductionKind::Sum,
        op.getGatherAxis());
    operandGrads.assign({grad});
    return success();
  }
};

/// Summing partial values (Megatron's g): every summand receives the sum's
/// cotangent, which every rank holds whole.
struct AllReduceVJP
    : public DifferentiableOpInterface::ExternalModel<AllReduceVJP,
                                                      shard::AllReduceOp> {
  LogicalResult buildVJP(Operation *rawOp, RewriterBase &rewriter,
                         ValueRange resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    auto op = cast<shard::AllReduceOp>(rawOp);
    if (op.getReduction() != shard::ReductionKind::Sum)
      return op.emitOpError("is differentiated only as a sum");
    operandGrads.assign({resultGrads[0]});
    return success();
  }
};

/// Summing partial values and keeping one slice (sequence parallelism's
/// reduction): every summand receives the whole sum's cotangent, gathered
/// from the ranks' slices.
struct ReduceScatterVJP
    : public DifferentiableOpInterface::ExternalModel<ReduceScatterVJP,
                                                      shard::ReduceScatterOp> {
  LogicalResult buildVJP(Operation *rawOp, RewriterBase &rewriter,
                         ValueRange resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    auto op = cast<shard::ReduceScatterOp>(rawOp);
    if (op.getReduction() != shard::ReductionKind::Sum)
      return op.emitOpError("is differentiated only as a sum");
    Value grad = shard::AllGatherOp::create(
        rewriter, op.getLoc(), op.getInput().getType(), op.getGrid(),
        op.getGridAxes(), resultGrads[0], op.getScatterAxis());
    operandGrads.assign({grad});
    return success();
  }
};
} // namespace

void mlir::loom::registerCollectiveDifferentiationModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, shard::ShardDialect *) {
    shard::AllGatherOp::attachInterface<AllGatherVJP>(*ctx);
    shard::AllReduceOp::attachInterface<AllReduceVJP>(*ctx);
    shard::ReduceScatterOp::attachInterface<ReduceScatterVJP>(*ctx);
  });
}
