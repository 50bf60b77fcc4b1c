//===- SoftmaxStats.h - Bufferization of softmax_stats ----------*- C++ -*-===//

#ifndef LOOM_BUFFERIZATION_SOFTMAXSTATS_H
#define LOOM_BUFFERIZATION_SOFTMAXSTATS_H

namespace mlir {
class DialectRegistry;
namespace loom {
/// Gives loom.softmax_stats a bufferization: a call of the runtime's
/// loom_rt_softmax_stats into two new buffers
/// (lib/Bufferization/BufferizeSoftmaxStats.cpp).
void registerSoftmaxStatsBufferizationModel(DialectRegistry &registry);
} // namespace loom
} // namespace mlir

#endif // LOOM_BUFFERIZATION_SOFTMAXSTATS_H
