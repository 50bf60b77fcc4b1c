//===- HoistConversions.cpp - The loom-hoist-conversions pass -------------===//
//
// Mixed precision converts a model function's parameters where the function
// receives them. Once the calls are inlined into the step, the same
// conversion runs for every micro-batch, and for every pass of a pipeline
// schedule: the parameters do not change within a step, so one conversion
// each is enough.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomDialect.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Dominance.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMHOISTCONVERSIONS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
struct HoistConversionsPass
    : public loom::impl::LoomHoistConversionsBase<HoistConversionsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<FunctionOpInterface>()) {
      hoist(func);
      merge(func);
    }
  }

  /// Moves conversions out of the loops their operands are defined outside
  /// of; the walk visits inner loops first.
  static void hoist(FunctionOpInterface func) {
    func->walk([](LoopLikeOpInterface loop) {
      moveLoopInvariantCode(
          loop.getLoopRegions(),
          [&](Value value, Region *) {
            return loop.isDefinedOutsideOfLoop(value);
          },
          [](Operation *op, Region *) { return isa<ConvertOp>(op); },
          [&](Operation *op, Region *) { loop.moveOutOfLoop(op); });
    });
  }

  /// Replaces each conversion that an equal one dominates by it.
  static void merge(FunctionOpInterface func) {
    DominanceInfo dominance(func);
    // Per (input, result type, scale), the conversions kept, in walk order.
    DenseMap<std::tuple<Value, Type, Value>, SmallVector<ConvertOp, 1>> kept;
    SmallVector<ConvertOp> conversions;
    func->walk([&](ConvertOp op) { conversions.push_back(op); });
    for (ConvertOp op : conversions) {
      SmallVector<ConvertOp, 1> &same =
          kept[{op.getInput(), op.getType(), op.getScale()}];
      auto dominating = llvm::find_if(same, [&](ConvertOp other) {
        return dominance.properlyDominates(other.getOperation(),
                                           op.getOperation());
      });
      if (dominating == same.end()) {
        same.push_back(op);
        continue;
      }
      op.replaceAllUsesWith(dominating->getResult());
      op.erase();
    }
  }
};
} // namespace
