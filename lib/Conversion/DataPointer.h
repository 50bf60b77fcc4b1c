//===- DataPointer.h - Buffers handed to the runtime ------------*- C++ -*-===//

#ifndef LOOM_LIB_CONVERSION_DATAPOINTER_H
#define LOOM_LIB_CONVERSION_DATAPOINTER_H

#include "loom/runtime.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <optional>

namespace mlir {
namespace loom {
/// The address of the first element of a view, as an LLVM pointer: the
/// aligned pointer of its base buffer plus the view's offset. The view's
/// strided metadata goes to `metadata` when asked for.
Value buildDataPointer(OpBuilder &b, Location loc, Value buffer,
                       memref::ExtractStridedMetadataOp *metadata = nullptr);

/// The runtime's code for buffers of `element`s, if it handles them: f32,
/// bf16 and f16.
std::optional<loom_dtype> getRuntimeElementType(Type element);
} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_CONVERSION_DATAPOINTER_H
