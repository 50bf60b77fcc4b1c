//===- Combiner.cpp - The operation a reduction folds its terms with ------===//

#include "loom/Buffers/Combiner.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

Operation *mlir::loom::getReassociableCombiner(ArrayRef<BlockArgument> carried,
                                               unsigned index) {
  SmallVector<Operation *> combiners;
  if (!matchReduction(carried, index, combiners) || combiners.size() != 1)
    return nullptr;
  Operation *combiner = combiners.front();
  if (combiner->getNumOperands() != 2 || combiner->getNumResults() != 1 ||
      !arith::getNeutralElement(combiner))
    return nullptr;
  if ((combiner->getOperand(0) == carried[index]) ==
      (combiner->getOperand(1) == carried[index]))
    return nullptr;
  return combiner;
}
