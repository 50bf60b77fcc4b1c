//===- TypeRefinement.cpp - Types that follow changed inputs --------------===//

#include "loom/Transforms/TypeRefinement.h"

#include "loom/Dialect/LoomDialect.h"

#include "mlir/Interfaces/InferTypeOpInterface.h"

using namespace mlir;
using namespace mlir::loom;

static LogicalResult refineBlock(Block &block) {
  for (Operation &op : block) {
    if (op.hasTrait<OpTrait::IsTerminator>() || op.getNumResults() == 0)
      continue;
    if (auto scan = dyn_cast<ScanOp>(op)) {
      scan.retypeBodyArguments();
      if (failed(refineBlock(scan.getBodyBlock())))
        return failure();
      scan.retypeResults();
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
