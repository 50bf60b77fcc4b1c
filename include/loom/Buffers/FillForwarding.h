//===- FillForwarding.h - Fills that a whole-buffer update reads -*- C++
//-*-===//
//
// A reduction into a buffer, or a GEMM adding to one, reads the zeros a
// fill just wrote there and then overwrites every element. Its lowering can
// start from the fill's value instead, and the fill (on a GPU, a kernel; on
// either target, a pass over the buffer) goes.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_BUFFERS_FILLFORWARDING_H
#define LOOM_BUFFERS_FILLFORWARDING_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace mlir {
namespace loom {
/// Whether the memory `a` and `b` view cannot overlap: views of two
/// different allocations, of disjoint byte ranges of one (the static
/// arena's buffers), or of two arguments of the step one of which is a
/// parameter or optimizer state (`loom.param`, `loom.state`). False where
/// that is not known.
bool areDisjoint(Value a, Value b);

/// Whether `op`, with what it contains, may write the memory `buffer`
/// views, or (`writesOnly` false) read it. A call of one of the runtime's
/// single GEMMs or of its softmax statistics touches only the buffers
/// whose data pointers it is handed (getReadOnlyPointers); any other call,
/// everything.
bool mayAccess(Operation *op, Value buffer, bool writesOnly = false);

/// The linalg.fill of `buffer` that `user`, later in the same block, would
/// read the fill's value from: nothing between them may read or write
/// `buffer`. Null if there is none.
linalg::FillOp findFillReadBy(Operation *user, Value buffer);

/// findFillReadBy's fill when it writes zeros: a GEMM into `buffer` can
/// overwrite it (beta = 0) instead of adding to the zeros.
linalg::FillOp findZeroFillReadBy(Operation *user, Value buffer);
} // namespace loom
} // namespace mlir

#endif // LOOM_BUFFERS_FILLFORWARDING_H
