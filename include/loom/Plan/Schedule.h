//===- Schedule.h - Pipeline schedules: order and timeline ------*- C++ -*-===//
//
// Which micro-batch's forward or backward pass each pipeline rank runs when,
// for GPipe, 1F1B and interleaved 1F1B. The order is what a rank's program
// executes; the timeline places it on time slots under unit costs (a
// forward pass one slot, a backward pass two, transfers free), which is how
// the schedules are drawn and how their bubble and the micro-batches they
// hold in flight are counted.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PLAN_SCHEDULE_H
#define LOOM_PLAN_SCHEDULE_H

#include "loom/Dialect/LoomConfig.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir {
namespace loom {

/// One pass of one micro-batch through one of a rank's model chunks.
struct PipelineAction {
  bool backward = false;
  int64_t microBatch = 0;
  /// The rank's model chunk (0 to v - 1); chunk c of rank r is the model's
  /// stage c * pp + r.
  int64_t chunk = 0;
  /// Time slots [start, end) of the timeline.
  int64_t start = 0, end = 0;
};

struct PipelineSchedule {
  Schedule kind = Schedule::gpipe;
  int64_t stages = 1, microBatches = 1, virtualStages = 1;
  int64_t forwardSlots = 1, backwardSlots = 2;
  /// Each rank's actions in the order its program runs them.
  llvm::SmallVector<llvm::SmallVector<PipelineAction>> ranks;
  /// Slots from the first action to the last.
  int64_t length = 0;
  /// The most forward passes a rank holds the activations of at once (one
  /// per micro-batch and chunk, until that chunk's backward pass has run).
  llvm::SmallVector<int64_t> peakInFlight;

  /// Idle slots over all slots of all ranks.
  double getBubbleFraction() const;
};

/// The schedule of `plan` (pp ranks, its micro-batches and schedule kind, v
/// chunks per rank when interleaved), timed with a forward pass of
/// `forwardSlots` and a backward pass of `backwardSlots`. The plan must be
/// legal (checkPlan).
PipelineSchedule buildPipelineSchedule(const PlanConfig &plan,
                                       int64_t forwardSlots = 1,
                                       int64_t backwardSlots = 2);

/// The diagram of `loomc --emit=schedule`: a row per rank, a column per
/// time slot, `F3` or `B3` for micro-batch 3's forward or backward pass
/// (`F3.1` in chunk 1 when interleaved), `.` where the rank waits; then the
/// bubble and the forward passes held.
void printScheduleDiagram(llvm::raw_ostream &os,
                          const PipelineSchedule &schedule);

} // namespace loom
} // namespace mlir

#endif // LOOM_PLAN_SCHEDULE_H
