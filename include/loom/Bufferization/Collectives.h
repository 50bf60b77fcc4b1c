//===- Collectives.h - Bufferization of the shard collectives ---*- C++ -*-===//

#ifndef LOOM_BUFFERIZATION_COLLECTIVES_H
#define LOOM_BUFFERIZATION_COLLECTIVES_H

#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace mlir {
class DialectRegistry;
namespace loom {
/// Gives shard.all_reduce, shard.reduce, shard.all_gather and
/// shard.reduce_scatter, and
/// the pipeline's loom.send and loom.recv, a bufferization: calls of the
/// runtime's collectives and messages on its communicators
/// (lib/Bufferization/BufferizeCollectives.cpp).
void registerCollectiveBufferizationModels(DialectRegistry &registry);

/// Builds, at `b`'s insertion point, the runtime call that tells this
/// rank's index on the one grid axis `op` asks for.
FailureOr<Value> buildGroupRank(OpBuilder &b, shard::ProcessMultiIndexOp op);
} // namespace loom
} // namespace mlir

#endif // LOOM_BUFFERIZATION_COLLECTIVES_H
