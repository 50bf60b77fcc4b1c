//===- ScatterAddRows.h - Bufferization of scatter_add_rows -----*- C++ -*-===//

#ifndef LOOM_BUFFERIZATION_SCATTERADDROWS_H
#define LOOM_BUFFERIZATION_SCATTERADDROWS_H

namespace mlir {
class DialectRegistry;
namespace loom {
/// Gives loom.scatter_add_rows a bufferization: a call of the runtime's
/// loom_rt_scatter_add_rows that updates its init's buffer in place
/// (lib/Bufferization/BufferizeScatterAddRows.cpp).
void registerScatterAddRowsBufferizationModel(DialectRegistry &registry);
} // namespace loom
} // namespace mlir

#endif // LOOM_BUFFERIZATION_SCATTERADDROWS_H
