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

#include "OffloadGradients.h"
#include "loom/Dialect/LoomDialect.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"

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
        // narrow operands, and statistics as they are.
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
          if (isFloatTensor(result.getType()) && !wide.contains(result))
            result.setType(withElementType(result.getType(), low));
        continue;
      }
      for (OpOperand &operand : op.getOpOperands())
        if (isNarrow(operand.get()))
          operand.set(convert(operand.get(), f32));
    }
  }

  /// Finds the statistics of `root` and what carries them: the layer loops'
  /// operands, body arguments, yields and results between a statistic's
  /// op and the ops that read it, in this function (a pipeline stage's
  /// backward half takes its forward half's as arguments).
  void findWide(Operation *root) {
    SmallVector<Value> worklist;
    root->walk([&](WideStatisticsOpInterface op) {
      for (OpOperand &operand : op->getOpOperands())
        if (op.isWideOperand(operand.getOperandNumber()))
          worklist.push_back(operand.get());
      for (OpResult result : op->getResults())
        if (op.isWideResult(result.getResultNumber()))
          worklist.push_back(result);
    });
    while (!worklist.empty()) {
      Value value = worklist.pop_back_val();
      if (!wide.insert(value).second)
        continue;
      // Where it comes from: a loop's operand, or what its body yields.
      if (auto argument = dyn_cast<BlockArgument>(value)) {
        if (auto scan = dyn_cast<ScanOp>(argument.getOwner()->getParentOp()))
          worklist.push_back(scan->getOperand(argument.getArgNumber()));
      } else if (auto scan = value.getDefiningOp<ScanOp>()) {
        worklist.push_back(scan.getYield().getOperand(
            cast<OpResult>(value).getResultNumber()));
      }
      // Where it goes: into a loop's body, or out of it.
      for (OpOperand &use : value.getUses()) {
        Operation *user = use.getOwner();
        if (auto scan = dyn_cast<ScanOp>(user))
          worklist.push_back(
              scan.getBodyBlock().getArgument(use.getOperandNumber()));
        else if (isa<YieldOp>(user))
          if (auto scan = dyn_cast<ScanOp>(user->getParentOp()))
            worklist.push_back(scan->getResult(use.getOperandNumber()));
      }
    }
  }

  bool isNarrow(Value v) {
    return isFloatTensor(v.getType()) &&
           cast<RankedTensorType>(v.getType()).getElementType() == low;
  }

  /// `v` with elements of `element` (the narrow type or f32), through a
  /// conversion after its definition.
  Value convert(Value v, Type element) {
    Value &converted = (element == low ? narrowed : widened)[v];
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
      if (isFloatTensor(operand.get().getType()) && !isNarrow(operand.get()) &&
          !wide.contains(operand.get()))
        operand.set(convert(operand.get(), low));
  }

  DenseMap<Value, Value> narrowed, widened;
  /// Statistics (WideStatisticsOpInterface) and what layer loops carry and
  /// stack of them: f32 in any precision (findWide).
  DenseSet<Value> wide;
};

struct LowerPrecisionPass
    : public loom::impl::LoomLowerPrecisionBase<LowerPrecisionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto training =
        module->getAttrOfType<TrainingAttr>(LoomDialect::getTrainingAttrName());
    if (!training || training.getPrecision() == Precision::fp32)
      return;
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
      if (scaled &&
          (!func.getOps<SeedOp>().empty() || returnsGradients(func))) {
        scale = addScaleArgument(func);
        takesScale.insert(func.getSymName());
      }
      narrowFunction(func, low, scale);
    }
    keepHandOffsNarrow(module, models, low);
    if (scaled) {
      FailureOr<PlanConfig> plan = getResolvedPlan(module);
      if (failed(plan))
        return signalPassFailure();
      for (func::FuncOp step : steps)
        if (failed(scaleStep(step, takesScale, plan->microBatches)))
          return signalPassFailure();
    }
    widenScatteredLayers(module);
  }

  /// ZeRO-2 reduce-scatters a gradient stacked by the layer loop on its own,
  /// along the layers, for loom-stream-transfers to sum each layer onto its
  /// owner as the loop makes it: the loop widens each layer's gradient to
  /// f32 then, not the whole stack after it (an offloaded step's
  /// loom-place-offload does so for the gradients it sends).
  static void widenScatteredLayers(ModuleOp module) {
    module.walk([](shard::ReduceScatterOp layers) {
      auto grad = dyn_cast<OpResult>(layers.getInput());
      if (grad && isa<func::CallOp>(grad.getOwner()) &&
          offload::isStackedByLayerLoop(grad))
        offload::widenInLoop(cast<func::CallOp>(grad.getOwner()),
                             grad.getResultNumber());
    });
  }

  /// Whether `func` returns parameter gradients: a pipeline stage's backward
  /// half, whose loss scale came in with the gradient of its output.
  static bool returnsGradients(func::FuncOp func) {
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
      if (func.getResultAttr(i, LoomDialect::getGradAttrName()))
        return true;
    return false;
  }

  /// Whether result `i` of `func` is the gradient of the activations its
  /// pipeline stage received, which goes on, scaled, to the stage before.
  static bool isActivationsGrad(func::FuncOp func, unsigned i) {
    auto name = func.getResultAttrOfType<StringAttr>(
        i, LoomDialect::getOutputAttrName());
    return name && name == LoomDialect::getActivationsGradName();
  }

  static bool hasAttributes(DictionaryAttr attrs) {
    return attrs && !attrs.empty();
  }

  /// A value that one model function returns only for others to take (what
  /// a pipeline stage's forward half keeps for its backward half) stays
  /// narrow between them, instead of being widened on return and narrowed
  /// again on entry: half the bytes held from one pass to the other, and
  /// the same values. A value the function received in f32 (a stage's input
  /// activations) is handed on as it came.
  static void keepHandOffsNarrow(ModuleOp module, ArrayRef<func::FuncOp> models,
                                 Type low) {
    using Slot = std::pair<Operation *, unsigned>;
    DenseSet<Slot> results, args;
    DenseSet<Operation *> callees;
    for (func::FuncOp func : models) {
      // Only functions that nothing but calls refers to can change type.
      std::optional<SymbolTable::UseRange> uses =
          SymbolTable::getSymbolUses(func, module);
      if (!func.isPrivate() || !uses ||
          llvm::any_of(*uses, [](const SymbolTable::SymbolUse &use) {
            return !isa<func::CallOp>(use.getUser());
          }))
        continue;
      callees.insert(func);
      auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
      for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
        auto widened = ret.getOperand(i).getDefiningOp<ConvertOp>();
        if (!hasAttributes(func.getResultAttrDict(i)) && widened &&
            !widened.getScale() &&
            getElementTypeOrSelf(widened.getInput().getType()) == low)
          results.insert({func, i});
      }
      for (unsigned j = 0, e = func.getNumArguments(); j < e; ++j)
        if (!hasAttributes(func.getArgAttrDict(j)) &&
            isFloatTensor(func.getArgumentTypes()[j]) &&
            getElementTypeOrSelf(func.getArgumentTypes()[j]).isF32())
          args.insert({func, j});
    }
    // The calls of those functions, each with its callee.
    SymbolTable symbols(module);
    llvm::MapVector<Operation *, Operation *> callOf;
    module.walk([&](func::CallOp call) {
      if (Operation *callee = symbols.lookup(call.getCallee());
          callee && callees.contains(callee))
        callOf[call] = callee;
    });
    auto calleeOf = [&](Operation *call) { return callOf.lookup(call); };
    // A result stays narrow when every call's value of it goes only to
    // arguments that take it narrow, and an argument takes it narrow when
    // every call passes it such a result.
    for (bool changed = true; changed;) {
      changed = false;
      for (auto [call, callee] : callOf) {
        for (OpResult result : call->getResults()) {
          Slot slot{callee, result.getResultNumber()};
          if (!results.contains(slot))
            continue;
          if (llvm::all_of(result.getUses(), [&](OpOperand &use) {
                Operation *user = calleeOf(use.getOwner());
                return user && args.contains({user, use.getOperandNumber()});
              }))
            continue;
          results.erase(slot);
          changed = true;
        }
        for (OpOperand &operand : call->getOpOperands()) {
          Slot slot{callee, operand.getOperandNumber()};
          if (!args.contains(slot))
            continue;
          auto from = dyn_cast<OpResult>(operand.get());
          Operation *producer = from ? calleeOf(from.getOwner()) : nullptr;
          if (producer && results.contains({producer, from.getResultNumber()}))
            continue;
          args.erase(slot);
          changed = true;
        }
      }
    }

    for (Operation *op : callees) {
      auto func = cast<func::FuncOp>(op);
      Block &entry = func.getBody().front();
      auto ret = cast<func::ReturnOp>(entry.getTerminator());
      SmallVector<Type> resultTypes(func.getResultTypes());
      for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
        if (!results.contains({func, i}))
          continue;
        auto widened = ret.getOperand(i).getDefiningOp<ConvertOp>();
        ret.setOperand(i, widened.getInput());
        resultTypes[i] = widened.getInput().getType();
        if (widened->use_empty())
          widened.erase();
      }
      SmallVector<Type> argTypes(func.getArgumentTypes());
      for (unsigned j = 0, e = func.getNumArguments(); j < e; ++j) {
        if (!args.contains({func, j}))
          continue;
        BlockArgument arg = entry.getArgument(j);
        Type wideType = arg.getType();
        argTypes[j] = withElementType(wideType, low);
        arg.setType(argTypes[j]);
        Value wide;
        SmallVector<OpOperand *> uses =
            llvm::to_vector(llvm::make_pointer_range(arg.getUses()));
        for (OpOperand *use : uses) {
          auto narrowed = dyn_cast<ConvertOp>(use->getOwner());
          if (narrowed && !narrowed.getScale() &&
              narrowed.getType() == argTypes[j]) {
            narrowed.replaceAllUsesWith(arg);
            narrowed.erase();
            continue;
          }
          if (!wide) {
            OpBuilder b = OpBuilder::atBlockBegin(&entry);
            wide = ConvertOp::create(b, arg.getLoc(), wideType, arg,
                                     /*scale=*/Value());
          }
          use->set(wide);
        }
      }
      func.setType(FunctionType::get(func.getContext(), argTypes, resultTypes));
    }
    for (auto [call, callee] : callOf)
      for (OpResult result : call->getResults())
        if (results.contains({callee, result.getResultNumber()}))
          result.setType(cast<func::FuncOp>(callee)
                             .getResultTypes()[result.getResultNumber()]);
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
    narrowing.findWide(func);
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
    for (auto [i, operand] : llvm::enumerate(ret->getOpOperands())) {
      Value v = operand.get();
      if (!isFloatTensor(v.getType()))
        continue;
      if (inverse && !isActivationsGrad(func, i))
        operand.set(ConvertOp::create(b, ret.getLoc(), func.getResultTypes()[i],
                                      v, inverse));
      else if (narrowing.isNarrow(v))
        operand.set(narrowing.convert(v, narrowing.f32));
    }
  }

  /// Passes `step`'s new loss scale input, divided among its
  /// `microBatches`, to the gradient functions it calls, and skips its
  /// updates when the gradients overflowed.
  LogicalResult scaleStep(func::FuncOp step,
                          const DenseSet<StringRef> &takesScale,
                          int64_t microBatches) {
    Value scale = addScaleArgument(step);
    // Each micro-batch's backward pass starts from the scaled loss of its
    // part of the step's mean, as PyTorch's GradScaler scales a loss
    // divided by the accumulation steps: many small micro-batches then
    // reach f16's range no sooner than one large one. Each pass divides
    // its gradients by what it started from.
    Value passScale = scale;
    if (microBatches > 1) {
      OpBuilder b = OpBuilder::atBlockBegin(&step.getBody().front());
      Location loc = step.getLoc();
      Value whole = tensor::ExtractOp::create(b, loc, scale, ValueRange{});
      Value part = arith::MulFOp::create(
          b, loc, whole,
          arith::ConstantOp::create(
              b, loc,
              b.getF32FloatAttr(1.0f / static_cast<float>(microBatches))));
      passScale = tensor::FromElementsOp::create(
          b, loc, RankedTensorType::get({}, b.getF32Type()), ValueRange{part});
    }
    // A pipeline's last stage seeds its backward passes in the step.
    SmallVector<SeedOp> seeds;
    step.walk([&](SeedOp seed) { seeds.push_back(seed); });
    for (SeedOp seed : seeds) {
      seed.replaceAllUsesWith(passScale);
      seed.erase();
    }
    step.walk([&](func::CallOp call) {
      if (takesScale.contains(call.getCallee()))
        call.getOperandsMutable().append(passScale);
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
