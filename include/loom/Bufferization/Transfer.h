//===- Transfer.h - Bufferization of loom.transfer --------------*- C++ -*-===//

#ifndef LOOM_BUFFERIZATION_TRANSFER_H
#define LOOM_BUFFERIZATION_TRANSFER_H

namespace mlir {
class DialectRegistry;
namespace loom {
/// Gives loom.transfer a bufferization: its destination's buffer, written
/// by a call of the runtime's loom_rt_transfer
/// (lib/Bufferization/BufferizeTransfer.cpp).
void registerTransferBufferizationModel(DialectRegistry &registry);
} // namespace loom
} // namespace mlir

#endif // LOOM_BUFFERIZATION_TRANSFER_H
