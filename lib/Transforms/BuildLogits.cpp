//===- BuildLogits.cpp - The loom-build-logits pass -----------------------===//
//
// Sampling from a model needs its next-token distribution, which the
// training step never returns: @forward ends in the loss. @logits is
// @forward up to the loss's operand, returned in f32. It is built late,
// after mixed precision, so that it computes exactly what @forward does,
// and only for plans whose ranks each compute the whole model's scores:
// with every parameter whole (a rank then samples on its own); under
// ZeRO-3, whose @forward gathers the replicas' shards first; or under
// tensor parallelism, where the ranks gather the blocks of columns of the
// scores that vocabulary parallelism leaves each (every rank then makes
// the same calls). Pipeline parallelism leaves each rank some layers.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMBUILDLOGITS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// Why the plan's ranks do not each compute the whole model, or "".
std::string partialModel(const PlanConfig &plan) {
  if (plan.pp > 1)
    return "pipeline parallelism splits its layers (pp = " +
           std::to_string(plan.pp) + ")";
  return "";
}

struct BuildLogitsPass
    : public loom::impl::LoomBuildLogitsBase<BuildLogitsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan))
      return signalPassFailure();
    std::string why = partialModel(*plan);
    if (!why.empty()) {
      module.emitError() << "loom-build-logits: sampling needs the whole "
                            "model on each rank, and "
                         << why;
      return signalPassFailure();
    }
    auto forward = module.lookupSymbol<func::FuncOp>(
        LoomDialect::getForwardFunctionName());
    if (!forward || forward.isExternal() || !forward.getBody().hasOneBlock()) {
      module.emitError() << "loom-build-logits: expected a function @"
                         << LoomDialect::getForwardFunctionName();
      return signalPassFailure();
    }
    auto returnOp =
        cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    auto loss = returnOp.getNumOperands() == 1
                    ? returnOp.getOperand(0).getDefiningOp<CrossEntropyOp>()
                    : CrossEntropyOp();
    if (!loss) {
      forward.emitOpError()
          << "loom-build-logits: expected @"
          << LoomDialect::getForwardFunctionName()
          << " to return the loom.cross_entropy of the model's logits";
      return signalPassFailure();
    }
    if (failed(buildLogits(module, forward, loss, plan->tp)))
      return signalPassFailure();
  }

  /// Under vocabulary parallelism each of the `tp` ranks holds a block of
  /// the scores' columns, in rank order: they gather the whole rows.
  static Value gatherVocabulary(OpBuilder &b, CrossEntropyOp loss, Value scores,
                                int64_t tp) {
    if (!loss.getVocabStart() || !loss.getGridAttr())
      return scores;
    auto type = cast<RankedTensorType>(scores.getType());
    SmallVector<int64_t> shape(type.getShape());
    int64_t vocabDim = type.getRank() - 1;
    shape[vocabDim] *= tp;
    SmallVector<shard::GridAxis> axes(loss.getGridAxesAttr().asArrayRef());
    return shard::AllGatherOp::create(b, loss.getLoc(), type.clone(shape),
                                      loss.getGridAttr().getValue(), axes,
                                      scores, APInt(64, vocabDim));
  }

  LogicalResult buildLogits(ModuleOp module, func::FuncOp forward,
                            CrossEntropyOp forwardLoss, int64_t tp) {
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(forward);
    auto logits = cast<func::FuncOp>(b.clone(*forward));
    logits.setSymName("logits");
    // The clone's loss, found again by position: the same op of the body.
    auto returnOp =
        cast<func::ReturnOp>(logits.getBody().front().getTerminator());
    auto loss = returnOp.getOperand(0).getDefiningOp<CrossEntropyOp>();
    b.setInsertionPoint(returnOp);
    Value scores = gatherVocabulary(b, loss, loss.getLogits(), tp);
    auto type = cast<RankedTensorType>(scores.getType());
    if (!type.getElementType().isF32())
      scores = ConvertOp::create(b, forwardLoss.getLoc(),
                                 type.clone(b.getF32Type()), scores,
                                 /*scale=*/Value());
    func::ReturnOp::create(b, returnOp.getLoc(), scores);
    returnOp.erase();
    Value targets = loss.getTargets();
    loss.erase();
    logits.setType(b.getFunctionType(logits.getArgumentTypes(),
                                     TypeRange{scores.getType()}));
    logits.setResultAttr(0, LoomDialect::getOutputAttrName(),
                         b.getStringAttr("logits"));
    // The targets only the loss read.
    if (auto argument = dyn_cast<BlockArgument>(targets);
        argument && targets.use_empty()) {
      llvm::BitVector erase(logits.getNumArguments());
      erase.set(argument.getArgNumber());
      if (failed(logits.eraseArguments(erase)))
        return failure();
    }
    return success();
  }
};
} // namespace
