//===- ScheduleTest.cpp - Pipeline schedule orders and timelines ----------===//

#include "loom/Plan/Schedule.h"

#include "llvm/ADT/STLExtras.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

using namespace mlir::loom;

namespace {
/// A rank's order as "F0 F1 B0 ...", chunks as "F0.1".
std::string order(const PipelineSchedule &schedule, int64_t rank) {
  std::string text;
  for (const PipelineAction &action : schedule.ranks[rank]) {
    if (!text.empty())
      text += " ";
    text += (action.backward ? "B" : "F") + std::to_string(action.microBatch);
    if (schedule.virtualStages > 1)
      text += "." + std::to_string(action.chunk);
  }
  return text;
}

PlanConfig pipeline(int64_t pp, int64_t m, Schedule kind, int64_t v = 1) {
  PlanConfig plan;
  plan.pp = pp;
  plan.microBatches = m;
  plan.schedule = kind;
  plan.virtualStages = v;
  return plan;
}

TEST(Schedule, GpipeRunsEveryForwardFirst) {
  PipelineSchedule s = buildPipelineSchedule(pipeline(4, 8, Schedule::gpipe));
  EXPECT_EQ(order(s, 2), "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7");
  // (m + pp - 1) forward and backward slots; the bubble is (pp - 1) of them.
  EXPECT_EQ(s.length, (8 + 3) * 3);
  EXPECT_NEAR(s.getBubbleFraction(), 3.0 / 11, 1e-12);
  for (int64_t peak : s.peakInFlight)
    EXPECT_EQ(peak, 8);
}

TEST(Schedule, OneFOneBHoldsAsManyAsStagesAhead) {
  PipelineSchedule s =
      buildPipelineSchedule(pipeline(4, 8, Schedule::one_f_one_b));
  EXPECT_EQ(order(s, 0), "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(order(s, 3), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
  EXPECT_EQ(s.length, (8 + 3) * 3);
  EXPECT_EQ(s.peakInFlight, (llvm::SmallVector<int64_t>{4, 3, 2, 1}));
  // The last stage's backward pass follows its forward pass at once.
  const PipelineAction &f0 = s.ranks[3][0], &b0 = s.ranks[3][1];
  EXPECT_EQ(b0.start, f0.end);
}

TEST(Schedule, FewerMicroBatchesThanStages) {
  PipelineSchedule s =
      buildPipelineSchedule(pipeline(4, 2, Schedule::one_f_one_b));
  EXPECT_EQ(order(s, 0), "F0 F1 B0 B1");
  EXPECT_EQ(order(s, 3), "F0 B0 F1 B1");
}

TEST(Schedule, InterleavedTakesGroupsOfPpThroughEachChunk) {
  PipelineSchedule s =
      buildPipelineSchedule(pipeline(2, 4, Schedule::interleaved, 2));
  // Warm-up of (pp - r - 1) * 2 + (v - 1) * pp chunk passes, then 1F1B.
  EXPECT_EQ(order(s, 0), "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 "
                         "F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  EXPECT_EQ(order(s, 1), "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 "
                         "F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
  EXPECT_EQ(s.peakInFlight, (llvm::SmallVector<int64_t>{5, 3}));
  // With chunk passes of 1/v the work, the bubble is 1/v of 1F1B's:
  // (pp - 1) / (v m + pp - 1) of the time.
  EXPECT_NEAR(s.getBubbleFraction(), 1.0 / 9, 1e-12);
}

TEST(Schedule, EveryPassRunsOnceAfterWhatItNeeds) {
  for (Schedule kind :
       {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved}) {
    int64_t v = kind == Schedule::interleaved ? 3 : 1;
    PipelineSchedule s = buildPipelineSchedule(pipeline(4, 12, kind, v));
    std::map<std::tuple<bool, int64_t, int64_t>, const PipelineAction *> at;
    for (auto [rank, actions] : llvm::enumerate(s.ranks))
      for (const PipelineAction &a : actions) {
        int64_t stage = a.chunk * 4 + rank;
        EXPECT_TRUE(at.insert({{a.backward, a.microBatch, stage}, &a}).second);
      }
    EXPECT_EQ(at.size(), 2u * 12 * 4 * v);
    int64_t last = 4 * v - 1;
    for (auto &[key, a] : at) {
      auto [backward, mb, stage] = key;
      // A forward pass follows the previous stage's; a backward pass the
      // next stage's, or on the last stage its own forward pass.
      std::tuple<bool, int64_t, int64_t> needs{false, mb, stage - 1};
      if (backward)
        needs = {stage != last, mb, stage == last ? stage : stage + 1};
      if (backward || stage > 0) {
        EXPECT_GE(a->start, at.at(needs)->end);
      }
    }
  }
}
} // namespace
