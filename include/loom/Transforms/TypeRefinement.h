//===- TypeRefinement.h - Types that follow changed inputs ------*- C++ -*-===//
//
// Passes that change the shape of a function's inputs (one micro-batch of
// the batch, a data-parallel replica's share, a tensor-parallel rank's
// weights) let the types of everything computed from them follow.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_TYPEREFINEMENT_H
#define LOOM_TRANSFORMS_TYPEREFINEMENT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir {
namespace loom {

/// Recomputes the result types of every op of `function`'s body from its
/// operands, in order: through InferTypeOpInterface, and for a loom.scan by
/// retyping its body's arguments from its operands, refining the body, and
/// stacking what it yields. The function's type follows its arguments and
/// returned values. Fails, with a diagnostic, at an op whose types cannot be
/// inferred or no longer check.
LogicalResult refineTypes(func::FuncOp function);

} // namespace loom
} // namespace mlir

#endif // LOOM_TRANSFORMS_TYPEREFINEMENT_H
