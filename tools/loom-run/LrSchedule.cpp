//===- LrSchedule.cpp - The learning rate of each step --------------------===//

#include "LrSchedule.h"

#include <algorithm>
#include <cmath>
#include <utility>

using namespace loom;

static constexpr std::pair<LrDecay, const char *> kDecayNames[] = {
    {LrDecay::Constant, "constant"},
    {LrDecay::Cosine, "cosine"},
    {LrDecay::Linear, "linear"}};

std::optional<LrDecay> loom::parseLrDecay(const std::string &name) {
  for (auto [decay, spelling] : kDecayNames)
    if (name == spelling)
      return decay;
  return std::nullopt;
}

const char *loom::lrDecayName(LrDecay decay) {
  for (auto [known, spelling] : kDecayNames)
    if (known == decay)
      return spelling;
  return "constant";
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
