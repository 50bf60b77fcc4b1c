//===- Replicas.cpp - What the data-parallel passes share -----------------===//

#include "Replicas.h"

#include "loom/abi.h"

using namespace mlir;
using namespace mlir::loom;

FailureOr<shard::GridOp> mlir::loom::getOrCreateGrid(ModuleOp module,
                                                     const PlanConfig &plan) {
  constexpr StringLiteral name = "loom_grid";
  SmallVector<int64_t> shape = {plan.pp, plan.dp, plan.tp};
  if (Operation *existing = module.lookupSymbol(name)) {
    auto grid = dyn_cast<shard::GridOp>(existing);
    if (!grid || grid.getShape() != ArrayRef<int64_t>(shape))
      return module.emitError() << "the module already has a symbol @" << name
                                << " that is not the plan's grid pp x dp x tp";
    return grid;
  }
  OpBuilder b(module.getBodyRegion());
  auto grid = shard::GridOp::create(b, module.getLoc(), name, shape);
  SymbolTable::setSymbolVisibility(grid, SymbolTable::Visibility::Private);
  return grid;
}

FailureOr<func::FuncOp> mlir::loom::getTrainStep(ModuleOp module) {
  auto step = module.lookupSymbol<func::FuncOp>(
      LoomDialect::getTrainStepFunctionName());
  if (!step || step.isExternal())
    return module.emitError()
           << "expected @" << LoomDialect::getTrainStepFunctionName()
           << " (run loom-build-train-step first)";
  return step;
}

std::string mlir::loom::getStageStepName(int64_t r) {
  return (LOOM_STAGE_STEP_PREFIX + Twine(r)).str();
}

std::string mlir::loom::getStageEvalName(int64_t r) {
  return (LOOM_STAGE_EVAL_PREFIX + Twine(r)).str();
}

std::string mlir::loom::getStageLogitsName(int64_t r) {
  return (LOOM_STAGE_LOGITS_PREFIX + Twine(r)).str();
}

FailureOr<SmallVector<func::FuncOp>> mlir::loom::getStageSteps(ModuleOp module,
                                                               int64_t pp) {
  SmallVector<func::FuncOp> steps;
  for (int64_t r = 0; r < pp; ++r) {
    std::string name = getStageStepName(r);
    auto step = module.lookupSymbol<func::FuncOp>(name);
    if (!step || step.isExternal())
      return module.emitError()
             << "expected @" << name << " (run loom-build-train-step first)";
    steps.push_back(step);
  }
  return steps;
}

FailureOr<SmallVector<func::FuncOp>>
mlir::loom::getSteps(ModuleOp module, const PlanConfig &plan) {
  if (plan.pp > 1)
    return getStageSteps(module, plan.pp);
  FailureOr<func::FuncOp> step = getTrainStep(module);
  if (failed(step))
    return failure();
  return SmallVector<func::FuncOp>{*step};
}

bool mlir::loom::takesOutputGradient(func::FuncOp func) {
  if (func.getNumArguments() == 0)
    return false;
  auto seed = func.getArgAttrOfType<StringAttr>(
      func.getNumArguments() - 1, LoomDialect::getInputAttrName());
  return seed && (seed == LoomDialect::getLossGradName() ||
                  seed == LoomDialect::getActivationsGradName());
}

FailureOr<func::FuncOp> mlir::loom::getForwardToDifferentiate(ModuleOp module,
                                                              StringRef what) {
  auto forward =
      module.lookupSymbol<func::FuncOp>(LoomDialect::getForwardFunctionName());
  if (!forward || forward.isExternal())
    return module.emitError()
           << "expected @" << LoomDialect::getForwardFunctionName();
  if (module.lookupSymbol(LoomDialect::getForwardGradFunctionName()))
    return module.emitError()
           << what << " before differentiation, and @"
           << LoomDialect::getForwardGradFunctionName() << " exists already";
  return forward;
}

bool mlir::loom::isStacked(Value value) {
  return llvm::any_of(value.getUses(), [](OpOperand &use) {
    auto scan = dyn_cast<ScanOp>(use.getOwner());
    return scan && use.getOperandNumber() >= scan.getNumCarries();
  });
}

Value mlir::loom::reshape(OpBuilder &b, Location loc, Value v,
                          RankedTensorType type) {
  auto from = cast<RankedTensorType>(v.getType());
  if (from == type)
    return v;
  // Through a vector: one group of all the other side's dimensions (none
  // for a 0-d tensor).
  auto vector =
      RankedTensorType::get({type.getNumElements()}, type.getElementType());
  auto allOf = [](RankedTensorType t) {
    SmallVector<ReassociationIndices> groups;
    if (t.getRank() > 0)
      groups.push_back(llvm::to_vector(llvm::seq<int64_t>(0, t.getRank())));
    return groups;
  };
  // A 0-d tensor and a vector of one element: reshapes with no groups.
  if (from.getRank() == 0)
    v = tensor::ExpandShapeOp::create(b, loc, vector, v, allOf(from));
  else if (from.getRank() > 1)
    v = tensor::CollapseShapeOp::create(b, loc, vector, v, allOf(from));
  if (type.getRank() == 0)
    v = tensor::CollapseShapeOp::create(b, loc, type, v, allOf(type));
  else if (type.getRank() > 1)
    v = tensor::ExpandShapeOp::create(b, loc, type, v, allOf(type));
  return v;
}
