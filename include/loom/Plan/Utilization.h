//===- Utilization.h - Model and hardware FLOPs utilization -----*- C++ -*-===//
//
// MFU and HFU as MosaicML defines them for its published throughput tables
// (after Korthikanti et al., "Reducing Activation Recomputation in Large
// Transformer Models"): every parameter does one multiply-add per token in
// each of the forward pass, the input-gradient pass and the weight-gradient
// pass, and attention adds 2 * layers * width * sequence^2 FLOPs per
// sequence per pass. Norms, activations and residuals are not counted. The
// counts per token are abi.h's, which the runtime's tools share.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PLAN_UTILIZATION_H
#define LOOM_PLAN_UTILIZATION_H

#include <cstdint>

namespace mlir {
namespace loom {

struct FlopsPerSequence {
  /// Parameter FLOPs of one training step on one sequence:
  /// 3 passes * 2 * params * sequence.
  double params;
  /// Attention FLOPs: 2 passes (forward and backward) * layers * 2 * width *
  /// sequence^2.
  double attention;
};

/// Model FLOPs of training on one sequence; with `recompute` (activation
/// checkpointing), the hardware also reruns one forward pass: 4 parameter
/// passes and 3 attention passes.
FlopsPerSequence trainingFlopsPerSequence(int64_t params, int64_t layers,
                                          int64_t width, int64_t sequence,
                                          bool recompute);

/// FLOPs utilization of `gpus` GPUs of peak `peakFlops` each that process
/// `sequencesPerSecond` sequences: the starred figure of the tables
/// (parameters only) when `withAttention` is false.
double flopsUtilization(const FlopsPerSequence &flops, bool withAttention,
                        double sequencesPerSecond, int64_t gpus,
                        double peakFlops);

} // namespace loom
} // namespace mlir

#endif // LOOM_PLAN_UTILIZATION_H
