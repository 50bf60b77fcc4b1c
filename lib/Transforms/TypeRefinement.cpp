//===- TypeRefinement.cpp - Types that follow changed inputs --------------===//

#include "loom/Transforms/TypeRefinement.h"

#include "Loom/LoomDialect.h"

#include "mlir/Interfaces/InferTypeOpInterface.h"

using namespace mlir;
using namespace mlir::loom;

static LogicalResult refineBlock(Block &block) {
  for (Operation &op : block) {
    if (op.hasTrait<OpTrait::IsTerminator>() || op.getNumResults() == 0)
      continue;
    if (auto scan = dyn_cast<ScanOp>(op)) {
      for (auto [argument, init] :
           llvm::zip(scan.getCarryArguments(), scan.getInits()))
        argument.setType(init.getType());
      for (auto [argument, stacked] :
           llvm::zip(scan.getSliceArguments(), scan.getStacked()))
        argument.setType(ScanOp::getSliceType(stacked.getType()));
      if (failed(refineBlock(scan.getBodyBlock())))
        return failure();
      for (auto [i, value] : llvm::enumerate(scan.getYield().getOperands()))
        scan.getResult(i).setType(
            i < scan.getNumCarries()
                ? value.getType()
                : ScanOp::getStackedType(value.getType(), scan.getLength()));
      continue;
    }
    // Constants and other ops without operands do not depend on the inputs.
    if (op.getNumOperands() == 0)
      continue;
    auto inferable = dyn_cast<InferTypeOpInterface>(op);
    if (!inferable)
      return op.emitOpError()
             << "cannot follow a change of its operands' types (it does not "
                "implement InferTypeOpInterface)";
    SmallVector<Type> types;
    if (failed(inferable.inferReturnTypes(
            op.getContext(), op.getLoc(), op.getOperands(),
            op.getRawDictionaryAttrs(), op.getPropertiesStorage(),
            op.getRegions(), types)))
      return failure();
    for (auto [result, type] : llvm::zip(op.getResults(), types))
      result.setType(type);
  }
  return success();
}

LogicalResult mlir::loom::refineTypes(func::FuncOp function) {
  if (function.isExternal())
    return success();
  Block &entry = function.getBody().front();
  if (failed(refineBlock(entry)))
    return failure();
  Operation *terminator = entry.getTerminator();
  function.setType(FunctionType::get(function.getContext(),
                                     entry.getArgumentTypes(),
                                     terminator->getOperandTypes()));
  return success();
}
