//===- LrSchedule.h - The learning rate of each step ------------*- C++ -*-===//
//
// loom-run's learning-rate schedules (docs/loom-run.md): a linear warm-up
// from 0, then a constant rate or a cosine or linear decay to a final
// rate at the run's last step, as nanoGPT and llm.c train GPT-2.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOMRUN_LRSCHEDULE_H
#define LOOM_TOOLS_LOOMRUN_LRSCHEDULE_H

#include <optional>
#include <string>

namespace loom {

enum class LrDecay { Constant, Cosine, Linear };

/// "constant", "cosine", "linear"; none for another name.
std::optional<LrDecay> parseLrDecay(const std::string &name);
/// The name parseLrDecay reads.
const char *lrDecayName(LrDecay decay);

struct LrSchedule {
  /// The rate after the warm-up, and the one the decay ends at.
  double peak = 0, final = 0;
  /// Steps of the warm-up: step s <= warmup trains at peak * s / warmup.
  long long warmup = 0;
  LrDecay decay = LrDecay::Constant;
  /// The step the decay reaches `final` at: the run's last.
  long long last = 1;

  /// The rate of step `step` (from 1).
  double at(long long step) const;
  /// Whether the rate changes from step to step.
  bool varies() const { return warmup > 0 || decay != LrDecay::Constant; }
};

} // namespace loom

#endif // LOOM_TOOLS_LOOMRUN_LRSCHEDULE_H
