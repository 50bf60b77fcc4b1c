//===- Attention.h - Bufferization of fused attention -----------*- C++ -*-===//

#ifndef LOOM_BUFFERIZATION_ATTENTION_H
#define LOOM_BUFFERIZATION_ATTENTION_H

namespace mlir {
class DialectRegistry;
namespace loom {
/// Gives loom.causal_attention and loom.causal_attention_grad, which
/// loom-lower-to-linalg leaves for the fused kernels, a bufferization:
/// calls of the runtime's loom_rt_attention and loom_rt_attention_grad on
/// their buffers (lib/Bufferization/BufferizeAttention.cpp).
void registerAttentionBufferizationModels(DialectRegistry &registry);
} // namespace loom
} // namespace mlir

#endif // LOOM_BUFFERIZATION_ATTENTION_H
