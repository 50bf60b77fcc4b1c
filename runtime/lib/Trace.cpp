//===- Trace.cpp - The timeline of a run's steps --------------------------===//
//
// Spans are kept in memory until loom_trace_write: a few per micro-batch
// and collective, small next to the step. Times are microseconds from one
// base: rank 0's clock reading after a barrier in loom_trace_start, which
// the ranks on its machine share exactly (one monotonic clock); those on
// other machines take their own reading after the barrier, to its latency.
//
//===----------------------------------------------------------------------===//

#include "Trace.h"

#include "Dist.h"
#include "JobFiles.h"

#include "Device.h"
#include "Error.h"
#include "loom/abi.h"
#include "loom/rt.h"
#include "loom/runtime.h"

#include <cinttypes>
#include <cstdio>
#include <unistd.h>
#include <vector>

namespace {
struct Span {
  std::string name, args;
  const char *category;
  double start, duration; // microseconds
  /// The track: 0 the host's, 1 the GPU's.
  int tid = 0;
};

/// A span generated code opened and has not closed yet.
struct Open {
  int32_t kind;
  int64_t microBatch, chunk;
  loom::TraceClock::time_point start;
};

struct Recorder {
  bool active = false;
  loom::TraceClock::time_point base;
  std::vector<Span> spans;
  std::vector<Open> open;
};

Recorder &recorder() {
  static Recorder r;
  return r;
}

double microseconds(loom::TraceClock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

/// A JSON string's body: the names here are the runtime's own, but quotes
/// and control characters are escaped all the same.
std::string escape(const std::string &text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char code[8];
      std::snprintf(code, sizeof(code), "\\u%04x", c);
      out += code;
      continue;
    }
    out += c;
  }
  return out;
}
} // namespace

bool loom::traceActive() { return recorder().active; }

void loom::traceSpan(const std::string &name, const char *category,
                     TraceClock::time_point start, const std::string &args) {
  Recorder &r = recorder();
  if (!r.active)
    return;
  TraceClock::time_point end = TraceClock::now();
  r.spans.push_back({name, args, category, microseconds(start - r.base),
                     microseconds(end - start)});
}

void loom::traceDeviceSpan(const std::string &name,
                           TraceClock::time_point start,
                           double durationMicros) {
  Recorder &r = recorder();
  if (r.active)
    r.spans.push_back({name, "", "gpu", microseconds(start - r.base),
                       durationMicros, /*tid=*/1});
}

std::string loom::traceEvents(int64_t pid, const std::string &label) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line),
                "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%" PRId64
                ",\"tid\":0,\"args\":{\"name\":\"%s\"}},\n"
                "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%" PRId64
                ",\"tid\":0,\"args\":{\"sort_index\":%" PRId64 "}}",
                pid, escape(label).c_str(), pid, pid);
  out += line;
  bool device = false;
  for (const Span &s : recorder().spans) {
    if (s.tid == 1 && !device) {
      device = true;
      std::snprintf(line, sizeof(line),
                    ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%" PRId64
                    ",\"tid\":1,\"args\":{\"name\":\"GPU\"}}",
                    pid);
      out += line;
    }
    std::snprintf(
        line, sizeof(line),
        ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%" PRId64
        ",\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f",
        escape(s.name).c_str(), s.category, pid, s.tid, s.start, s.duration);
    out += line;
    if (!s.args.empty())
      out += ",\"args\":{" + s.args + "}";
    out += "}";
  }
  return out;
}

extern "C" {

int loom_trace_start(void) {
  Recorder &r = recorder();
  r.spans.clear();
  r.open.clear();
  r.base = loom::TraceClock::now();
  loom_comm *world = loom_dist_group(LOOM_GROUP_WORLD);
  if (world && loom_comm_size(world) > 1) {
    // The ranks start their clocks together: each leaves a collective that
    // none leaves before all have entered. Those on rank 0's machine share
    // its monotonic clock, and take its reading as theirs exactly.
    struct {
      char host[64];
      int64_t base;
    } first = {};
    gethostname(first.host, sizeof(first.host) - 1);
    std::string mine = first.host;
    static_assert(sizeof(first) % 4 == 0, "moved as 4-byte words");
    float token = 0;
    if (loom_rt_all_reduce(world, LOOM_DTYPE_F32, &token, &token, 1))
      return 1;
    r.base = loom::TraceClock::now();
    first.base = r.base.time_since_epoch().count();
    if (loom_rt_broadcast(world, LOOM_DTYPE_F32, &first, sizeof(first) / 4, 0))
      return 1;
    if (mine == first.host)
      r.base =
          loom::TraceClock::time_point(loom::TraceClock::duration(first.base));
  }
  r.active = true;
  return 0;
}

void loom_rt_trace_begin(int32_t kind, int64_t micro_batch, int64_t chunk) {
  Recorder &r = recorder();
  // On a GPU, a span's times are the device's only once the work queued
  // before its marks has run.
  if (!r.active)
    return;
  loom::cudaWait();
  r.open.push_back({kind, micro_batch, chunk, loom::TraceClock::now()});
}

void loom_rt_trace_end(int32_t kind) {
  Recorder &r = recorder();
  // A span the generated code did not open (or closed out of order) is
  // dropped rather than recorded wrong.
  if (!r.active || r.open.empty() || r.open.back().kind != kind)
    return;
  loom::cudaWait();
  Open o = r.open.back();
  r.open.pop_back();
  static const char *const categories[] = {"forward", "backward", "optimizer"};
  if (kind < LOOM_TRACE_FORWARD || kind > LOOM_TRACE_OPTIMIZER)
    return;
  std::string name = kind == LOOM_TRACE_OPTIMIZER ? "optimizer" : "";
  std::string args;
  if (kind != LOOM_TRACE_OPTIMIZER) {
    // F3, B3; F3.1 in chunk 1, as --emit=schedule draws them.
    name =
        (kind == LOOM_TRACE_FORWARD ? "F" : "B") + std::to_string(o.microBatch);
    if (o.chunk > 0)
      name += "." + std::to_string(o.chunk);
    args = "\"micro_batch\":" + std::to_string(o.microBatch) +
           ",\"chunk\":" + std::to_string(o.chunk);
  }
  loom::traceSpan(name, categories[kind], o.start, args);
}

} // extern "C"

extern "C" int loom_trace_write(const char *path) {
  const loom_dist_info *dist = loom_dist_get_info();
  int64_t rank = dist ? dist->rank : 0;
  std::string label = "rank " + std::to_string(rank);
  if (dist && dist->pp > 0)
    label += " (pp " + std::to_string(dist->pp_rank) + ", dp " +
             std::to_string(dist->dp_rank) + ", tp " +
             std::to_string(dist->tp_rank) + ")";
  std::vector<std::string> ranks;
  if (!loom::gatherToFirst(loom::traceEvents(rank, label), ranks))
    return 1;
  int failed = 0;
  if (loom::isFirstRank())
    failed = loom::writeFile(path, [&](FILE *file) {
      std::string text = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
      for (size_t r = 0; r < ranks.size(); ++r)
        text += (r ? ",\n" : "") + ranks[r];
      text += "\n]}\n";
      return std::fwrite(text.data(), 1, text.size(), file) == text.size();
    });
  return loom::shareOutcome(failed, "write", path);
}
