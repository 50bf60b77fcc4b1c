//===- Precision.cpp - The loom-lower-precision pass ----------------------===//
//
// Mixed precision as a change of storage types: the functions that compute
// the model keep their tensors in bf16 or f16 between ops, each op still
// computing in f32 (its lowering widens it), while everything the step
// function keeps across steps stays f32. Under fp16 the loss is scaled so
// that small gradients survive f16's range, and a step whose gradients
// overflowed leaves the parameters alone.
//
//===----------------------------------------------------------------------===//

#include "Loom/LoomDialect.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"

#include "loom/abi.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMLOWERPRECISION
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// A float tensor of rank 1 or more: what mixed precision narrows. The
/// loss and other scalars stay f32.
bool isFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getRank() > 0 &&
         isa<FloatType>(tensor.getElementType());
}

RankedTensorType withElementType(Type type, Type element) {
  return RankedTensorType::get(cast<RankedTensorType>(type).getShape(),
                               element);
}

/// Narrows one function's tensors to `low`. Each value converted between
/// f32 and `low` is converted once, right after it is defined.
class Narrowing {
public:
  Narrowing(Type low) : low(low), f32(Float32Type::get(low.getContext())) {}

  void narrowBlock(Block &block) {
    for (Operation &op : block) {
      if (op.hasTrait<OpTrait::IsTerminator>() && !isa<YieldOp>(op))
        continue;
      if (auto scan = dyn_cast<ScanOp>(op)) {
        // A layer loop carries and stacks what its body makes of the
        // narrow operands.
        narrowOperands(op);
        scan.retypeBodyArguments();
        narrowBlock(scan.getBodyBlock());
        scan.retypeResults();
        continue;
      }
      // What a layer loop yields is stored narrow, like its body's values.
      if (op.hasTrait<MixedPrecision>() || isa<YieldOp>(op)) {
        narrowOperands(op);
        for (Value result : op.getResults())
          if (isFloatTensor(result.getType()))
            result.setType(withElementType(result.getType(), low));
        continue;
      }
      for (OpOperand &operand : op.getOpOperands())
        if (isNarrow(operand.get()))
          operand.set(convert(operand.get(), f32));
    }
  }

  bool isNarrow(Value v) {
    return isFloatTensor(v.getType()) &&
           cast<RankedTensorType>(v.getType()).getElementType() == low;
  }

  /// `v` with elements of `element` (the narrow type or f32), through a
  /// conversion after its definition.
  Value convert(Value v, Type element) {
    Value &converted = (element == low ? narrow : wide)[v];
    if (converted)
      return converted;
    OpBuilder b(v.getContext());
    b.setInsertionPointAfterValue(v);
    converted = ConvertOp::create(b, v.getLoc(),
                                  withElementType(v.getType(), element), v,
                                  /*scale=*/Value());
    return converted;
  }

  Type low, f32;

private:
  void narrowOperands(Operation &op) {
    for (OpOperand &operand : op.getOpOperands())
      if (isFloatTensor(operand.get().getType()) && !isNarrow(operand.get()))
        operand.set(convert(operand.get(), low));
  }

  DenseMap<Value, Value> narrow, wide;
};

struct LowerPrecisionPass
    : public loom::impl::LoomLowerPrecisionBase<LowerPrecisionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto training =
        module->getAttrOfType<TrainingAttr>(LoomDialect::getTrainingAttrName());
    if (!training || training.getPrecision() == Precision::fp32)
      return;
    FailureOr<PlanConfig> plan = getResolvedPlan(module);
    if (failed(plan))
      return signalPassFailure();
    if (plan->pp > 1) {
      module.emitError() << "precision "
                         << stringifyPrecision(training.getPrecision())
                         << " is not compiled for pipeline plans yet (pp = "
                         << plan->pp << "); use fp32";
      return signalPassFailure();
    }
    MLIRContext *ctx = &getContext();
    bool scaled = training.getPrecision() == Precision::fp16;
    Type low = scaled ? Type(Float16Type::get(ctx)) : BFloat16Type::get(ctx);

    SmallVector<func::FuncOp> models, steps;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (!func.walk([](OptimizerUpdateOpInterface) {
                 return WalkResult::interrupt();
               })
               .wasInterrupted())
        models.push_back(func);
      else
        steps.push_back(func);
    }
    DenseSet<StringRef> takesScale;
    for (func::FuncOp func : models) {
      if (!func.walk([](Operation *op) {
                 return op->hasTrait<MixedPrecision>() ? WalkResult::interrupt()
                                                       : WalkResult::advance();
               })
               .wasInterrupted())
        continue;
      Value scale;
      if (scaled && !func.getOps<SeedOp>().empty()) {
        scale = addScaleArgument(func);
        takesScale.insert(func.getSymName());
      }
      narrowFunction(func, low, scale);
    }
    if (!scaled)
      return;
    for (func::FuncOp step : steps)
      if (failed(scaleStep(step, takesScale)))
        return signalPassFailure();
  }

  /// A new last argument of `func`, its loss scale.
  Value addScaleArgument(func::FuncOp func) {
    OpBuilder b(func);
    unsigned index = func.getNumArguments();
    (void)func.insertArgument(index, RankedTensorType::get({}, b.getF32Type()),
                              b.getDictionaryAttr(b.getNamedAttr(
                                  LoomDialect::getInputAttrName(),
                                  b.getStringAttr(LOOM_INPUT_LOSS_SCALE))),
                              func.getLoc());
    return func.getArgument(index);
  }

  /// Narrows `func`'s tensors; with a loss `scale`, seeds its backward pass
  /// with it and divides the gradients it returns by it.
  void narrowFunction(func::FuncOp func, Type low, Value scale) {
    Block &entry = func.getBody().front();
    Narrowing narrowing(low);
    narrowing.narrowBlock(entry);
    auto ret = cast<func::ReturnOp>(entry.getTerminator());
    Value inverse;
    if (scale) {
      for (SeedOp seed : llvm::make_early_inc_range(func.getOps<SeedOp>())) {
        seed.replaceAllUsesWith(scale);
        seed.erase();
      }
      OpBuilder b = OpBuilder::atBlockBegin(&entry);
      Location loc = func.getLoc();
      Value s = tensor::ExtractOp::create(b, loc, scale, ValueRange{});
      Value one = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f));
      inverse = tensor::FromElementsOp::create(
          b, loc, RankedTensorType::get({}, b.getF32Type()),
          ValueRange{arith::DivFOp::create(b, loc, one, s)});
    }
    OpBuilder b(ret);
    for (auto [operand, type] :
         llvm::zip(ret->getOpOperands(), func.getResultTypes())) {
      Value v = operand.get();
      if (!isFloatTensor(v.getType()))
        continue;
      if (inverse)
        operand.set(ConvertOp::create(b, ret.getLoc(), type, v, inverse));
      else if (narrowing.isNarrow(v))
        operand.set(narrowing.convert(v, narrowing.f32));
    }
  }

  /// Passes `step`'s new loss scale input to the gradient functions it
  /// calls, and skips its updates when the gradients overflowed.
  LogicalResult scaleStep(func::FuncOp step,
                          const DenseSet<StringRef> &takesScale) {
    Value scale = addScaleArgument(step);
    step.walk([&](func::CallOp call) {
      if (takesScale.contains(call.getCallee()))
        call.getOperandsMutable().append(scale);
    });
    Value norm;
    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
    for (unsigned i = 0, e = step.getNumResults(); i < e; ++i)
      if (auto name = step.getResultAttrOfType<StringAttr>(
              i, LoomDialect::getOutputAttrName());
          name && name.getValue() == LOOM_OUTPUT_GRAD_NORM)
        norm = ret.getOperand(i);
    if (!norm)
      return step.emitOpError()
             << "has no '" << LOOM_OUTPUT_GRAD_NORM
             << "' output to tell an overflowed step by (loss scaling)";
    OpBuilder b(step.getContext());
    b.setInsertionPointAfterValue(norm);
    Location loc = norm.getLoc();
    // Infinite or NaN: unordered or not below infinity.
    Value magnitude = math::AbsFOp::create(
        b, loc, tensor::ExtractOp::create(b, loc, norm, ValueRange{}));
    Value overflow = arith::CmpFOp::create(
        b, loc, arith::CmpFPredicate::UGE, magnitude,
        arith::ConstantOp::create(
            b, loc, b.getF32FloatAttr(std::numeric_limits<float>::infinity())));
    Value skip = tensor::FromElementsOp::create(
        b, loc, RankedTensorType::get({}, b.getI1Type()), ValueRange{overflow});
    DominanceInfo dominance(step);
    WalkResult walked = step.walk([&](OptimizerUpdateOpInterface update) {
      if (!dominance.properlyDominates(skip, update)) {
        update->emitOpError()
            << "comes before the step's gradient norm is known, which loss "
               "scaling needs to skip an overflowed step";
        return WalkResult::interrupt();
      }
      update.setSkipCondition(skip);
      return WalkResult::advance();
    });
    return failure(walked.wasInterrupted());
  }
};
} // namespace
