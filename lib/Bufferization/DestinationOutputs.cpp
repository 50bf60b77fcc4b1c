//===- DestinationOutputs.cpp - The loom-destination-outputs pass ---------===//

#include "loom/Bufferization/Passes.h"
#include "loom/Dialect/LoomDialect.h"
#include "loom/abi.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMDESTINATIONOUTPUTS
#include "loom/Bufferization/Passes.h.inc"
} // namespace loom
} // namespace mlir

using namespace mlir;
using namespace mlir::loom;

namespace {
/// An entry point is a public function the runtime calls: one whose
/// arguments carry Loom's attributes.
bool isEntryPoint(func::FuncOp func) {
  if (func.isPrivate() || func.isExternal())
    return false;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    for (NamedAttribute attr : func.getArgAttrDict(i)
                                   ? func.getArgAttrDict(i).getValue()
                                   : ArrayRef<NamedAttribute>())
      if (isa<LoomDialect>(attr.getNameDialect()))
        return true;
  return false;
}

struct DestinationOutputsPass
    : public loom::impl::LoomDestinationOutputsBase<DestinationOutputsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (isEntryPoint(func) && failed(convert(func)))
        return signalPassFailure();
  }

  LogicalResult convert(func::FuncOp func) {
    if (!func.getBody().hasOneBlock())
      return func.emitOpError("expected a single block");
    OpBuilder b(func.getContext());
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    b.setInsertionPoint(ret);
    SmallVector<Value> results;
    for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
      Value dest;
      if (auto updates = func.getResultAttrOfType<IntegerAttr>(
              i, LoomDialect::getUpdatesAttrName())) {
        int64_t arg = updates.getInt();
        if (arg < 0 || arg >= func.getNumArguments() ||
            func.getArgument(arg).getType() != value.getType())
          return func.emitOpError()
                 << "result #" << i << ": 'loom.updates' names argument " << arg
                 << ", which does not exist or has another "
                    "type";
        dest = func.getArgument(arg);
      } else {
        std::string name;
        if (auto out = func.getResultAttrOfType<StringAttr>(
                i, LoomDialect::getOutputAttrName()))
          name = out.getValue().str();
        else if (auto grad = func.getResultAttrOfType<StringAttr>(
                     i, LoomDialect::getGradAttrName()))
          name = (LOOM_OUTPUT_GRAD_PREFIX + grad.getValue()).str();
        else
          return func.emitOpError()
                 << "result #" << i
                 << " has neither 'loom.updates', 'loom.output' nor "
                    "'loom.grad', so the runtime cannot receive it";
        unsigned index = func.getNumArguments();
        if (failed(func.insertArgument(
                index, value.getType(),
                b.getDictionaryAttr(b.getNamedAttr(
                    LoomDialect::getOutputAttrName(), b.getStringAttr(name))),
                func.getLoc())))
          return failure();
        dest = func.getArgument(index);
      }
      setInsertionPointAtFirstChance(b, func, value, dest);
      results.push_back(bufferization::MaterializeInDestinationOp::create(
                            b, ret.getLoc(), value, dest)
                            .getResult());
    }
    ret->setOperands(results);
    return success();
  }

  /// Right after `value` is made and `dest` last read: the buffer `value`
  /// was made in is then free for what the function makes next (ZeRO's
  /// parameters, gathered bucket by bucket at the end of a step, need
  /// one bucket's buffer instead of all of them).
  static void setInsertionPointAtFirstChance(OpBuilder &b, func::FuncOp func,
                                             Value value, Value dest) {
    Block &body = func.getBody().front();
    Operation *last = nullptr;
    auto after = [&](Operation *op) {
      op = body.findAncestorOpInBlock(*op);
      if (op && !op->hasTrait<OpTrait::IsTerminator>() &&
          (!last || last->isBeforeInBlock(op)))
        last = op;
    };
    if (Operation *def = value.getDefiningOp())
      after(def);
    for (Operation *user : dest.getUsers())
      after(user);
    if (last)
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(&body);
  }
};
} // namespace
