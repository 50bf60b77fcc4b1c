//===- Schedule.cpp - Pipeline schedules: order and timeline --------------===//
//
// The orders follow Megatron-LM's schedules: GPipe runs every forward pass
// before the first backward pass; 1F1B runs pp - r - 1 forward passes on
// rank r, then alternates one forward and one backward pass, then drains;
// interleaved 1F1B does the same over v model chunks per rank, taking
// micro-batches in groups of pp through one chunk after the other.
//
//===----------------------------------------------------------------------===//

#include "loom/Plan/Schedule.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FormatAdapters.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace mlir::loom;

namespace {
/// The k-th forward (or backward) pass of a rank under interleaving:
/// micro-batches in groups of pp go through chunk 0, then chunk 1, ...;
/// backward passes take the chunks in the other order.
PipelineAction interleavedAction(int64_t k, bool backward, int64_t pp,
                                 int64_t v) {
  PipelineAction action;
  action.backward = backward;
  int64_t group = k / (pp * v);
  action.microBatch = group * pp + k % pp;
  int64_t chunk = (k / pp) % v;
  action.chunk = backward ? v - 1 - chunk : chunk;
  return action;
}

SmallVector<PipelineAction> buildOrder(const PlanConfig &plan, int64_t rank) {
  int64_t pp = plan.pp, m = plan.microBatches;
  int64_t v = plan.schedule == Schedule::interleaved ? plan.virtualStages : 1;
  int64_t total = m * v;
  auto action = [&](int64_t k, bool backward) {
    return interleavedAction(k, backward, pp, v);
  };
  int64_t warmup = total;
  switch (plan.schedule) {
  case Schedule::gpipe:
    warmup = total;
    break;
  case Schedule::one_f_one_b:
    warmup = std::min(pp - rank - 1, total);
    break;
  case Schedule::interleaved:
    // Every chunk of the first group of micro-batches must be under way
    // before the first backward pass can reach this rank.
    warmup =
        m == pp ? total : std::min((pp - rank - 1) * 2 + (v - 1) * pp, total);
    break;
  }
  SmallVector<PipelineAction> order;
  for (int64_t k = 0; k < warmup; ++k)
    order.push_back(action(k, false));
  int64_t steady = total - warmup;
  for (int64_t k = 0; k < steady; ++k) {
    order.push_back(action(warmup + k, false));
    order.push_back(action(k, true));
  }
  for (int64_t k = steady; k < total; ++k)
    order.push_back(action(k, true));
  return order;
}
} // namespace

PipelineSchedule mlir::loom::buildPipelineSchedule(const PlanConfig &plan,
                                                   int64_t forwardSlots,
                                                   int64_t backwardSlots) {
  PipelineSchedule schedule;
  schedule.kind = plan.schedule;
  schedule.stages = plan.pp;
  schedule.microBatches = plan.microBatches;
  schedule.virtualStages =
      plan.schedule == Schedule::interleaved ? plan.virtualStages : 1;
  schedule.forwardSlots = forwardSlots;
  schedule.backwardSlots = backwardSlots;
  int64_t pp = plan.pp, v = schedule.virtualStages;
  int64_t lastStage = pp * v - 1;
  for (int64_t rank = 0; rank < pp; ++rank)
    schedule.ranks.push_back(buildOrder(plan, rank));

  // List scheduling, each rank in its program order: an action starts when
  // its rank is free and what it consumes is done (the previous stage's
  // forward pass, the next stage's backward pass, and the last stage's
  // backward pass its own forward pass).
  std::map<std::tuple<bool, int64_t, int64_t>, int64_t> done;
  SmallVector<size_t> next(pp, 0);
  SmallVector<int64_t> free(pp, 0);
  size_t remaining = 0;
  for (const auto &order : schedule.ranks)
    remaining += order.size();
  while (remaining > 0) {
    bool progress = false;
    for (int64_t rank = 0; rank < pp; ++rank) {
      while (next[rank] < schedule.ranks[rank].size()) {
        PipelineAction &action = schedule.ranks[rank][next[rank]];
        int64_t stage = action.chunk * pp + rank;
        std::tuple<bool, int64_t, int64_t> needs;
        bool hasNeed = true;
        if (!action.backward)
          hasNeed = stage > 0, needs = {false, action.microBatch, stage - 1};
        else if (stage == lastStage)
          needs = {false, action.microBatch, stage};
        else
          needs = {true, action.microBatch, stage + 1};
        int64_t ready = 0;
        if (hasNeed) {
          auto it = done.find(needs);
          if (it == done.end())
            break;
          ready = it->second;
        }
        action.start = std::max(free[rank], ready);
        action.end =
            action.start + (action.backward ? backwardSlots : forwardSlots);
        free[rank] = action.end;
        done[{action.backward, action.microBatch, stage}] = action.end;
        schedule.length = std::max(schedule.length, action.end);
        ++next[rank];
        --remaining;
        progress = true;
      }
    }
    if (!progress)
      llvm::report_fatal_error("pipeline schedule deadlocks");
  }

  for (const auto &order : schedule.ranks) {
    int64_t held = 0, peak = 0;
    for (const PipelineAction &action : order) {
      held += action.backward ? -1 : 1;
      peak = std::max(peak, held);
    }
    schedule.peakInFlight.push_back(peak);
  }
  return schedule;
}

double PipelineSchedule::getBubbleFraction() const {
  if (length == 0)
    return 0;
  int64_t busy = 0;
  for (const auto &order : ranks)
    for (const PipelineAction &action : order)
      busy += action.end - action.start;
  return 1.0 - static_cast<double>(busy) / (length * ranks.size());
}

void mlir::loom::printScheduleDiagram(raw_ostream &os,
                                      const PipelineSchedule &schedule) {
  auto label = [&](const PipelineAction &action) {
    std::string text =
        (action.backward ? "B" : "F") + std::to_string(action.microBatch);
    if (schedule.virtualStages > 1)
      text += "." + std::to_string(action.chunk);
    return text;
  };
  size_t width = 1;
  for (const auto &order : schedule.ranks)
    for (const PipelineAction &action : order)
      width = std::max(width, label(action).size());

  os << llvm::formatv("schedule {0}: {1} stage{2}, {3} micro-batch{4}",
                      getScheduleName(schedule.kind), schedule.stages,
                      schedule.stages == 1 ? "" : "s", schedule.microBatches,
                      schedule.microBatches == 1 ? "" : "es");
  if (schedule.virtualStages > 1)
    os << llvm::formatv(", {0} model chunks per rank (F3.1: chunk 1, the "
                        "model's stage pp + rank)",
                        schedule.virtualStages);
  os << llvm::formatv("; a column is a time slot, a forward pass takes {0}, "
                      "a backward pass {1}\n",
                      schedule.forwardSlots, schedule.backwardSlots);
  for (auto [rank, order] : llvm::enumerate(schedule.ranks)) {
    SmallVector<std::string> cells(schedule.length, ".");
    for (const PipelineAction &action : order)
      for (int64_t t = action.start; t < action.end; ++t)
        cells[t] = label(action);
    os << llvm::formatv("rank {0,-3}|", rank);
    for (const std::string &cell : cells)
      os << " "
         << llvm::formatv("{0}",
                          llvm::fmt_align(cell, llvm::AlignStyle::Left, width));
    os << "\n";
  }
  os << llvm::formatv("{0} slots; bubble {1:P1} of the ranks' time; "
                      "forward passes held for their backward at most:",
                      schedule.length, schedule.getBubbleFraction());
  for (auto [rank, peak] : llvm::enumerate(schedule.peakInFlight))
    os << llvm::formatv(" {0} (rank {1})", peak, rank);
  os << "\n";
}
