//===- Utilization.cpp - Model and hardware FLOPs utilization -------------===//

#include "loom/Plan/Utilization.h"

#include "loom/abi.h"

using namespace mlir::loom;

FlopsPerSequence mlir::loom::trainingFlopsPerSequence(int64_t params,
                                                      int64_t layers,
                                                      int64_t width,
                                                      int64_t sequence,
                                                      bool recompute) {
  // Forward, backward (counted twice for parameters: input and weight
  // gradients) and, with recomputation, a second forward.
  int passes = recompute ? 4 : 3;
  return {loom_param_flops_per_token(static_cast<double>(params), passes) *
              sequence,
          loom_attention_flops_per_token(layers, width, sequence, passes) *
              sequence};
}

double mlir::loom::flopsUtilization(const FlopsPerSequence &flops,
                                    bool withAttention,
                                    double sequencesPerSecond, int64_t gpus,
                                    double peakFlops) {
  double perSequence = flops.params + (withAttention ? flops.attention : 0.0);
  return perSequence * sequencesPerSecond / (gpus * peakFlops);
}
