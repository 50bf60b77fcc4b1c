//===- Trace.h - The timeline of a run's steps ------------------*- C++ -*-===//
//
// What `loom-run --trace` records: spans of each rank's steps (generated
// code marks the forward and backward passes and the optimizer; the runtime
// its collectives, messages and steps) on one clock base across the ranks,
// written as Chrome trace-event JSON.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_TRACE_H
#define LOOM_RUNTIME_TRACE_H

#include <chrono>
#include <cstdint>
#include <string>

namespace loom {
using TraceClock = std::chrono::steady_clock;

/// Whether spans are being recorded (loom_trace_start).
bool traceActive();
/// Records the span [start, now): its name, its category, and `args`, the
/// body of a JSON object ("" for none).
void traceSpan(const std::string &name, const char *category,
               TraceClock::time_point start, const std::string &args = "");
/// Records a span of the GPU's work (a kernel, a GEMM) on the rank's GPU
/// track: `start` on the host's clock, `durationMicros` long.
void traceDeviceSpan(const std::string &name, TraceClock::time_point start,
                     double durationMicros);
/// This rank's spans as trace events of process `pid`, comma-separated,
/// after one naming the process `label`.
std::string traceEvents(int64_t pid, const std::string &label);
} // namespace loom

#endif // LOOM_RUNTIME_TRACE_H
