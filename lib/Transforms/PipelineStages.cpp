//===- PipelineStages.cpp - The loom-pipeline-stages pass -----------------===//
//
// Splits the forward pass of a pipeline plan into its stages: contiguous
// ranges of the layer loop, as the plan's `stage_layers` gives them, the
// embedding before the loop going to the first stage and the head and loss
// after it to the last. Each stage becomes a function of its own, which
// loom-differentiate differentiates and the training step schedules.
//
//===----------------------------------------------------------------------===//

#include "Replicas.h"

#include "mlir/IR/IRMapping.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMPIPELINESTAGES
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
struct PipelineStagesPass
    : public loom::impl::LoomPipelineStagesBase<PipelineStagesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan))
      return signalPassFailure();
    if (plan->pp == 1)
      return;
    if (plan->stageLayers.empty()) {
      module.emitError("the plan does not say which layers each pipeline "
                       "stage runs (stage_layers; run loom-plan first)");
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> forward =
        getForwardToDifferentiate(module, "pipeline stages split the layers");
    if (failed(forward) || failed(split(*forward, *plan)))
      return signalPassFailure();
  }

  LogicalResult split(func::FuncOp forward, const PlanConfig &plan) {
    if (!forward.getBody().hasOneBlock())
      return forward.emitOpError("expected a single block to split into "
                                 "pipeline stages");
    Block &block = forward.getBody().front();
    SmallVector<ScanOp> scans(block.getOps<ScanOp>());
    if (scans.size() != 1)
      return forward.emitOpError()
             << "expected one layer loop (loom.scan) to split into pipeline "
                "stages, found "
             << scans.size();
    ScanOp scan = scans.front();
    if (scan.getNumCarries() != 1 || !scan.getStackedResults().empty())
      return scan.emitOpError("expected a layer loop that carries one value "
                              "(the activations) and stacks none");
    int64_t layers = scan.getLength();
    SmallVector<int64_t> starts = plan.getStageStarts();
    if (starts.back() != layers)
      return scan.emitOpError()
             << "runs " << layers << " layers; the plan's stages hold "
             << starts.back();
    for (Value stacked : scan.getStacked())
      if (!isa<BlockArgument>(stacked))
        return scan.emitOpError("expected the stacked operands to be the "
                                "function's parameters, which each stage "
                                "takes its layers of");

    sinkParameterOps(forward, scan);
    // The embedding runs before the loop and the head after it; each may
    // read the function's arguments and constants, and the head nothing
    // else of the embedding's.
    SmallVector<Operation *> prologue, epilogue;
    for (Operation &op : block.without_terminator()) {
      if (&op == scan.getOperation())
        continue;
      (op.isBeforeInBlock(scan) ? prologue : epilogue).push_back(&op);
    }
    for (Operation *op : epilogue)
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && def->getBlock() == &block && def->isBeforeInBlock(scan) &&
            !def->hasTrait<OpTrait::ConstantLike>())
          return op->emitOpError("after the layer loop reads a value computed "
                                 "before it; the last pipeline stage would "
                                 "not have it");
      }

    int64_t stages = static_cast<int64_t>(plan.stageLayers.size());
    OpBuilder b(forward);
    for (int64_t k = 0; k < stages; ++k)
      buildStage(b, forward, scan, prologue, epilogue, k, stages, starts[k],
                 plan.stageLayers[k]);
    forward.erase();
    return success();
  }

  /// Moves the pure ops before the loop that only the ops after it read
  /// and that compute from parameters, constants and grid indices alone
  /// (the final norm's parameters fanned out to a sequence-parallel group,
  /// say) to after the loop: the last stage, which has those, computes
  /// them. Latest first, so that they keep their order.
  static void sinkParameterOps(func::FuncOp forward, ScanOp scan) {
    Block &block = forward.getBody().front();
    llvm::SmallPtrSet<Operation *, 8> fromParameters;
    SmallVector<Operation *> candidates;
    for (Operation &op : block) {
      if (&op == scan.getOperation())
        break;
      bool computable =
          isMemoryEffectFree(&op) && op.getNumRegions() == 0 &&
          !op.hasTrait<OpTrait::ConstantLike>() &&
          llvm::all_of(op.getOperands(), [&](Value v) {
            if (auto arg = dyn_cast<BlockArgument>(v))
              return arg.getOwner() == &block &&
                     !forward.getArgAttr(arg.getArgNumber(),
                                         LoomDialect::getInputAttrName());
            Operation *def = v.getDefiningOp();
            return def->hasTrait<OpTrait::ConstantLike>() ||
                   fromParameters.contains(def);
          });
      if (computable) {
        fromParameters.insert(&op);
        candidates.push_back(&op);
      }
    }
    for (Operation *op : llvm::reverse(candidates)) {
      bool afterOnly = llvm::all_of(op->getUsers(), [&](Operation *user) {
        Operation *there = block.findAncestorOpInBlock(*user);
        return there && scan->isBeforeInBlock(there);
      });
      if (afterOnly && !op->use_empty())
        op->moveAfter(scan);
    }
  }

  /// Stage `k` of `stages`: layers [first, first + count) of the loop, the
  /// prologue before them on the first stage and the epilogue after them
  /// on the last; the stages in between take the activations and give them
  /// back.
  void buildStage(OpBuilder &b, func::FuncOp forward, ScanOp scan,
                  ArrayRef<Operation *> prologue,
                  ArrayRef<Operation *> epilogue, int64_t k, int64_t stages,
                  int64_t first, int64_t count) {
    MLIRContext *ctx = forward.getContext();
    Location loc = forward.getLoc();
    bool isFirst = k == 0, isLast = k == stages - 1;
    Block &block = forward.getBody().front();
    auto inStage = [&](Operation *op) {
      return op->getBlock() == &block &&
             (op == scan.getOperation() ||
              (isFirst && op->isBeforeInBlock(scan)) ||
              (isLast && scan->isBeforeInBlock(op)) ||
              (op->hasTrait<OpTrait::ConstantLike>()));
    };

    // The function's arguments this stage reads, in their order: every
    // parameter stacked over the layers (its `count` layers), and whatever
    // else the stage's ops read.
    SmallVector<unsigned> args;
    for (BlockArgument arg : block.getArguments())
      if (llvm::any_of(arg.getUsers(), inStage))
        args.push_back(arg.getArgNumber());
    SmallVector<Type> inputs;
    for (unsigned i : args) {
      Type type = forward.getArgumentTypes()[i];
      if (isStacked(block.getArgument(i))) {
        auto tensor = cast<RankedTensorType>(type);
        SmallVector<int64_t> shape(tensor.getShape());
        shape[0] = count;
        type = tensor.clone(shape);
      }
      inputs.push_back(type);
    }
    Value carry = scan.getInits().front();
    if (!isFirst)
      inputs.push_back(carry.getType());
    SmallVector<Type> results = {isLast ? forward.getResultTypes().front()
                                        : carry.getType()};

    auto stage = func::FuncOp::create(
        b, loc, (forward.getName() + "_stage" + Twine(k)).str(),
        b.getFunctionType(inputs, results));
    stage->setAttr(LoomDialect::getStageAttrName(), b.getI64IntegerAttr(k));
    for (auto [j, i] : llvm::enumerate(args)) {
      stage.setArgAttrs(j, forward.getArgAttrDict(i));
      if (isStacked(block.getArgument(i)))
        stage.setArgAttr(j, LoomDialect::getLayersAttrName(),
                         DenseI64ArrayAttr::get(ctx, {first, count}));
    }
    if (!isFirst)
      stage.setArgAttr(args.size(), LoomDialect::getInputAttrName(),
                       b.getStringAttr(LoomDialect::getActivationsName()));
    if (isLast) {
      for (NamedAttribute attr : forward.getResultAttrs(0))
        stage.setResultAttr(0, attr.getName(), attr.getValue());
    } else {
      stage.setResultAttr(0, LoomDialect::getOutputAttrName(),
                          b.getStringAttr(LoomDialect::getActivationsName()));
    }

    Block *entry = stage.addEntryBlock();
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(entry);
    IRMapping mapping;
    for (auto [j, i] : llvm::enumerate(args))
      mapping.map(block.getArgument(i), entry->getArgument(j));
    if (!isFirst)
      mapping.map(carry, entry->getArguments().back());
    auto cloneAll = [&](ArrayRef<Operation *> ops) {
      for (Operation *op : ops)
        if (inStage(op))
          b.clone(*op, mapping);
    };
    // The embedding on the first stage; constants the stage may read
    // come along wherever they were.
    cloneAll(prologue);
    auto loop = cast<ScanOp>(b.clone(*scan, mapping));
    loop.setLength(count);
    Value out = loop.getCarryResults().front();
    if (isLast) {
      cloneAll(epilogue);
      auto ret = cast<func::ReturnOp>(block.getTerminator());
      out = mapping.lookup(ret.getOperand(0));
    }
    func::ReturnOp::create(b, loc, out);
    // Constants nothing of this stage reads.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*entry)))
      if (op.hasTrait<OpTrait::ConstantLike>() && op.use_empty())
        op.erase();
  }
};
} // namespace
