//===- LrSchedule.cpp - The learning rate of each step --------------------===//

#include "LrSchedule.h"

#include <algorithm>
#include <cmath>

using namespace loom;

std::optional<LrDecay> loom::parseLrDecay(const std::string &name) {
  if (name == "constant")
    return LrDecay::Constant;
  if (name == "cosine")
    return LrDecay::Cosine;
  if (name == "linear")
    return LrDecay::Linear;
  return std::nullopt;
}

double LrSchedule::at(long long step) const {
  if (step <= warmup)
    return peak * static_cast<double>(step) / static_cast<double>(warmup);
  if (decay == LrDecay::Constant || last <= warmup)
    return peak;
  // From the first step after the warm-up (just below peak) to the last
  // (final).
  double progress = std::min(1.0, static_cast<double>(step - warmup) /
                                      static_cast<double>(last - warmup));
  double kept = decay == LrDecay::Cosine
                    ? 0.5 * (1.0 + std::cos(M_PI * progress))
                    : 1.0 - progress;
  return final + kept * (peak - final);
}
