//===- DataPointer.h - Buffers handed to the runtime ------------*- C++ -*-===//

#ifndef LOOM_BUFFERS_DATAPOINTER_H
#define LOOM_BUFFERS_DATAPOINTER_H

#include "loom/abi.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <optional>

namespace mlir {
namespace loom {
/// The address of the first element of a view, as an LLVM pointer: the
/// aligned pointer of its base buffer plus the view's offset. The view's
/// strided metadata goes to `metadata` when asked for.
Value buildDataPointer(OpBuilder &b, Location loc, Value buffer,
                       memref::ExtractStridedMetadataOp *metadata = nullptr);

/// The view whose data pointer buildDataPointer made `pointer`, or null.
Value getPointedBuffer(Value pointer);

/// For a call of one of the runtime's functions that touch only the
/// buffers whose data pointers they are handed (the single GEMMs, the
/// softmax statistics), how many of its leading pointers it only reads;
/// it may write the others. None for any other op (the batched GEMM is
/// handed its first matrices and steps on from them).
std::optional<unsigned> getReadOnlyPointers(Operation *op);

/// The runtime's code for buffers of `element`s, if it handles them: f32,
/// bf16 and f16.
std::optional<loom_dtype> getRuntimeElementType(Type element);

/// The buffer of `tensor`, an operand `op` only reads, for a call of the
/// runtime, which takes whole contiguous buffers: a copy when it may not be
/// one (a slice of a larger buffer, which the backward pass of a layer
/// loop passes, for one).
FailureOr<Value>
getReadableBuffer(RewriterBase &rewriter, Operation *op, Value tensor,
                  const bufferization::BufferizationOptions &options,
                  bufferization::BufferizationState &state);

/// The bufferization of an op that the runtime computes: it reads its
/// tensor operands and writes no operand in place (its results, if any,
/// are new buffers).
template <typename Model, typename Op>
struct ReadsOperandsModel
    : public bufferization::BufferizableOpInterface::ExternalModel<Model, Op> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const bufferization::AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const bufferization::AnalysisState &) const {
    return false;
  }
  bufferization::AliasingValueList
  getAliasingValues(Operation *, OpOperand &,
                    const bufferization::AnalysisState &) const {
    return {};
  }
};

/// Calls the runtime's function `callee` with `args`, declaring it (a
/// private func.func of no results) in `op`'s module on first use.
void buildRuntimeCall(OpBuilder &b, Operation *op, StringRef callee,
                      ValueRange args);
} // namespace loom
} // namespace mlir

#endif // LOOM_BUFFERS_DATAPOINTER_H
