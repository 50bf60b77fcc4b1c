//===- Combiner.h - The operation a reduction folds its terms with -*- C++
//-*-===//

#ifndef LOOM_BUFFERS_COMBINER_H
#define LOOM_BUFFERS_COMBINER_H

#include "mlir/IR/Block.h"

namespace mlir {
namespace loom {
/// The operation that folds each term into the accumulator `carried[index]`
/// (a loop's iteration argument, a linalg body's output argument), if it is
/// a single operation with a neutral element (a sum, a product, a maximum
/// or minimum) whose one operand is the accumulator and the other the term.
/// Such an operation is associative and commutative: the terms may be split
/// into parts folded side by side, and the parts folded in any order.
Operation *getReassociableCombiner(ArrayRef<BlockArgument> carried,
                                   unsigned index);
} // namespace loom
} // namespace mlir

#endif // LOOM_BUFFERS_COMBINER_H
