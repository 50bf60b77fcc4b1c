//===- Utilization.cpp - Model and hardware FLOPs utilization -------------===//

#include "loom/Plan/Utilization.h"

using namespace mlir::loom;

FlopsPerSequence mlir::loom::trainingFlopsPerSequence(int64_t params,
                                                      int64_t layers,
                                                      int64_t width,
                                                      int64_t sequence,
                                                      bool recompute) {
  double perPass = 2.0 * static_cast<double>(params) * sequence;
  double attentionPerPass =
      2.0 * layers * static_cast<double>(width) * sequence * sequence;
  // Forward, backward (counted twice for parameters: input and weight
  // gradients) and, with recomputation, a second forward.
  return {(recompute ? 4 : 3) * perPass,
          (recompute ? 3 : 2) * attentionPerPass};
}

double mlir::loom::flopsUtilization(const FlopsPerSequence &flops,
                                    bool withAttention,
                                    double sequencesPerSecond, int64_t gpus,
                                    double peakFlops) {
  double perSequence = flops.params + (withAttention ? flops.attention : 0.0);
  return perSequence * sequencesPerSecond / (gpus * peakFlops);
}
