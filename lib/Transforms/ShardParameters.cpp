//===- ShardParameters.cpp - The loom-shard-parameters pass ---------------===//
//
// ZeRO-3 before differentiation: parameters become shards gathered where
// they are read. Differentiation then does the rest: the gathers in the
// layer loop are recomputed in its backward pass, and the cotangent of a
// gather is reduce-scattered back to the shards.
//
//===----------------------------------------------------------------------===//

#include "Replicas.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMSHARDPARAMETERS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// `type` with dimension `dim` divided by `parts`.
RankedTensorType divided(RankedTensorType type, int64_t dim, int64_t parts) {
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] /= parts;
  return RankedTensorType::get(shape, type.getElementType());
}

struct ShardParametersPass
    : public loom::impl::LoomShardParametersBase<ShardParametersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan))
      return signalPassFailure();
    if (plan->dp == 1 || plan->zero < 3)
      return;
    FailureOr<func::FuncOp> maybeForward =
        getForwardToDifferentiate(module, "ZeRO-3 shards the parameters");
    if (failed(maybeForward))
      return signalPassFailure();
    func::FuncOp forward = *maybeForward;
    FailureOr<shard::GridOp> grid = getOrCreateGrid(module, *plan);
    if (failed(grid))
      return signalPassFailure();
    StringRef gridName = grid->getSymName();

    Block &entry = forward.getBody().front();
    auto loops = entry.getOps<ScanOp>();
    Operation *loop = loops.empty() ? nullptr : *loops.begin();
    OpBuilder b(&getContext());
    auto gather = [&](Location loc, Value shard, RankedTensorType whole,
                      int64_t axis, bool recompute) {
      auto op = shard::AllGatherOp::create(
          b, loc, whole, gridName, ArrayRef<shard::GridAxis>{kReplicaAxis},
          shard, APInt(64, axis));
      if (recompute)
        op->setAttr(LoomDialect::getRecomputeAttrName(), b.getUnitAttr());
      return op.getResult();
    };
    for (BlockArgument arg : entry.getArguments()) {
      auto name = forward.getArgAttrOfType<StringAttr>(
          arg.getArgNumber(), LoomDialect::getParamAttrName());
      if (!name)
        continue;
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      // Each layer's slice of a stacked parameter is sharded on its own,
      // along its first dimension that the replicas divide (the gathers
      // along the leading one need no reordering).
      int64_t first = isStacked(arg) ? 1 : 0, dim = first;
      while (type && dim < type.getRank() && type.getDimSize(dim) % plan->dp)
        ++dim;
      if (!type || dim >= type.getRank()) {
        forward.emitOpError()
            << "cannot shard parameter '" << name.getValue() << "' of type "
            << arg.getType() << " over dp = " << plan->dp
            << " replicas: ZeRO-3 splits a dimension"
            << (first ? " of each layer's slice" : "")
            << ", and dp divides none";
        return signalPassFailure();
      }
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : arg.getUses())
        uses.push_back(&use);
      arg.setType(divided(type, dim, plan->dp));
      forward.setArgAttr(arg.getArgNumber(), LoomDialect::getShardAttrName(),
                         b.getI64IntegerAttr(dim));
      Value whole, wholeAfterLoop;
      for (OpOperand *use : uses) {
        auto scan = dyn_cast<ScanOp>(use->getOwner());
        if (scan && use->getOperandNumber() >= scan.getNumCarries()) {
          // Gathered at the top of each iteration, for that layer only.
          BlockArgument slice =
              scan.getBodyBlock().getArgument(use->getOperandNumber());
          auto sliceType = cast<RankedTensorType>(slice.getType());
          slice.setType(divided(sliceType, dim - 1, plan->dp));
          b.setInsertionPointToStart(&scan.getBodyBlock());
          Value gathered = gather(slice.getLoc(), slice, sliceType, dim - 1,
                                  /*recompute=*/true);
          slice.replaceAllUsesExcept(gathered, gathered.getDefiningOp());
          continue;
        }
        // A pipeline's first stage takes what runs before the layer loop
        // and its last stage what runs after it: each end gathers its own
        // (the tied token table is read at both).
        bool afterLoop =
            loop && plan->pp > 1 && loop->isBeforeInBlock(use->getOwner());
        Value &gathered = afterLoop ? wholeAfterLoop : whole;
        if (!gathered) {
          if (afterLoop)
            b.setInsertionPointAfter(loop);
          else
            b.setInsertionPointToStart(&entry);
          gathered = gather(arg.getLoc(), arg, type, dim, /*recompute=*/false);
        }
        use->set(gathered);
      }
    }
    forward.setFunctionType(
        FunctionType::get(&getContext(), entry.getArgumentTypes(),
                          forward.getFunctionType().getResults()));
  }
};
} // namespace
