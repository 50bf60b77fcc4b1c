//===- Planner.h - Choosing a parallel plan ---------------------*- C++ -*-===//
//
// Enumerates every legal plan of a model on a cluster, prices each with the
// cost model, drops those that do not fit in memory and ranks the rest by
// step time; prints the reports of `loomc --emit=plan` and `--emit=cost`.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PLAN_PLANNER_H
#define LOOM_PLAN_PLANNER_H

#include "loom/Plan/CostModel.h"

#include <optional>
#include <vector>

namespace mlir {
namespace loom {

/// What a search found. Of the plans priced, it keeps those a report
/// shows, so that its memory does not grow with the plans it prices.
struct PlanSearch {
  /// The fastest plans that fit, fastest first; among plans as fast, the
  /// one with the most headroom first. At most kKeptPlans.
  std::vector<PlanEstimate> ranked;
  /// Legal plans that do not fit in memory: the one that needs least
  /// memory first, then the fastest others (at most kKeptPlans in all).
  std::vector<PlanEstimate> outOfMemory;
  int64_t evaluated = 0;
  int64_t illegal = 0;
  int64_t fit = 0;      ///< Plans that fit, kept or not.
  int64_t doNotFit = 0; ///< Legal plans out of memory, kept or not.
  /// Nothing fit without offload, and the search went on with it.
  bool offloaded = false;
  static constexpr size_t kKeptPlans = 64;
};

/// Whether `a` ranks before `b` among plans that fit: faster, or as fast
/// (in the same millionth, on a log scale) with more headroom (by a
/// millionth of the memory a plan may use), or as both with the lower ZeRO
/// stage. A strict weak ordering: plans that close fall in the same
/// buckets.
bool isBetterPlan(const PlanEstimate &a, const PlanEstimate &b);

/// Why `est` does not fit: what it lacks, needs and may use.
std::string describeOutOfMemory(const PlanEstimate &est);

/// The precisions a plan may use when the description asks for
/// `requested` on `gpu`: fp32 stays fp32; bf16 falls back to fp16 on GPUs
/// without bf16 tensor cores.
llvm::SmallVector<Precision> getAllowedPrecisions(Precision requested,
                                                  const GpuSpec &gpu);

/// Prices every legal plan of `model`'s cluster.
PlanSearch searchPlans(CostModel &model);

/// The report of --emit=plan for a search (`explicitPlan` null) or for one
/// plan the user gave.
void printPlanReport(llvm::raw_ostream &os, const CostModel &model,
                     const PlanSearch &search,
                     const PlanEstimate *explicitPlan);

/// The per-op breakdown of --emit=cost for `estimate`.
/// One line of a rank's bytes of parameters, gradients and optimizer
/// state, from `source` (the cost model, or the compiled step), so that
/// both read alike in `loomc --emit=memory`.
void printStateMemory(llvm::raw_ostream &os, llvm::StringRef source,
                      double parameters, double gradients, double optimizer);

/// One line of the bytes a rank keeps for the backward pass of one
/// micro-batch: `perLayer` for each of its `layers` layers, of which
/// `statistics` (when given) are a fused attention's softmax statistics,
/// and `outside` for the rest (the embedding, the head and the loss).
void printActivationMemory(llvm::raw_ostream &os, llvm::StringRef source,
                           double perLayer, std::optional<double> statistics,
                           int64_t layers, double outside);

/// One line of what pipeline rank `rank` needs at once: its state, the
/// activations of `inFlight` micro-batches (`kept` each) its schedule holds,
/// and, when given, the temporaries of one pass.
void printPipelineRankMemory(llvm::raw_ostream &os, llvm::StringRef source,
                             int64_t rank, double state, double kept,
                             double inFlight, std::optional<double> temporary);

void printCostReport(llvm::raw_ostream &os, const CostModel &model,
                     const PlanEstimate &estimate);

/// Records `estimate`'s plan on the module (loom.plan) and its precision in
/// loom.training.
void recordPlan(ModuleOp module, const PlanEstimate &estimate);

} // namespace loom
} // namespace mlir

#endif // LOOM_PLAN_PLANNER_H
