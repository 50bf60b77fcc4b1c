//===- Collectives.h - Bufferization of the shard collectives ---*- C++ -*-===//

#ifndef LOOM_CONVERSION_COLLECTIVES_H
#define LOOM_CONVERSION_COLLECTIVES_H

namespace mlir {
class DialectRegistry;
namespace loom {
/// Gives shard.all_reduce a bufferization: an in-place reduction through the
/// runtime's communicators (lib/Conversion/BufferizeCollectives.cpp).
void registerCollectiveBufferizationModels(DialectRegistry &registry);
} // namespace loom
} // namespace mlir

#endif // LOOM_CONVERSION_COLLECTIVES_H
