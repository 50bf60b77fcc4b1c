//===- MetricsLog.h - One JSON line per training step -----------*- C++ -*-===//
//
// `--log FILE` (docs/metrics.md): the run's configuration, then a record
// per step, then the summary, each one JSON object on a line of its own,
// written as it happens so that a plot or a dashboard can follow a run
// that is still going. `scripts/plot.py` draws them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOMRUN_METRICSLOG_H
#define LOOM_TOOLS_LOOMRUN_METRICSLOG_H

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace loom {

/// One JSON object, built field by field in order.
class JsonRecord {
public:
  explicit JsonRecord(const char *type) : kind(type) {
    add("type", std::string(type));
  }

  /// A number; NaN and infinities, which JSON cannot hold, as null.
  JsonRecord &add(const char *key, double value);
  JsonRecord &add(const char *key, long long value);
  JsonRecord &add(const char *key, const std::string &value);
  JsonRecord &add(const char *key, const char *value) {
    return add(key, std::string(value));
  }
  JsonRecord &addBool(const char *key, bool value);

  std::string str() const { return text + "}"; }
  /// The record's type ("config", "step", "summary") and its numbers, by
  /// key, in order (TensorBoard's scalars).
  const std::string &type() const { return kind; }
  const std::vector<std::pair<std::string, double>> &numbers() const {
    return numberFields;
  }

private:
  void key(const char *name);
  std::string kind;
  std::string text = "{";
  std::vector<std::pair<std::string, double>> numberFields;
};

class MetricsLog {
public:
  MetricsLog() = default;
  MetricsLog(const MetricsLog &) = delete;
  MetricsLog &operator=(const MetricsLog &) = delete;
  ~MetricsLog();

  /// Opens `path`, appending to what a resumed run wrote or starting it
  /// afresh; "" or why not.
  std::string open(const std::string &path, bool append);
  bool isOpen() const { return file != nullptr; }
  /// Writes and flushes one record; "" or why it could not be written.
  std::string write(const JsonRecord &record);

private:
  std::string path;
  std::FILE *file = nullptr;
};

} // namespace loom

#endif // LOOM_TOOLS_LOOMRUN_METRICSLOG_H
