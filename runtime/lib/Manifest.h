//===- Manifest.h - Reading an artifact's manifest strictly -----*- C++ -*-===//
//
// The manifest (docs/artifact.md) decides what the runtime allocates and
// what it writes into checkpoints, so no field of it is taken on trust: each
// is read whole, in its range, and a field nobody reads is an error.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_MANIFEST_H
#define LOOM_RUNTIME_MANIFEST_H

#include "loom/runtime.h"

#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace loom {

/// The largest size a manifest may give: loomc bounds every size of a model
/// by 2^32 (docs/model-format.md).
constexpr int64_t kMaxManifestSize = int64_t(1) << 32;
/// The most layers (loomc's bound) and ranks on a side of the plan's grid.
constexpr int64_t kMaxManifestLayers = 10000;
constexpr int64_t kMaxManifestRanks = int64_t(1) << 20;

/// The `key=value` fields of one manifest line. Each reader returns false
/// with problem() set on a missing or malformed field; allRead() fails on a
/// field no reader asked for.
class ManifestFields {
public:
  explicit ManifestFields(std::istringstream &line);

  bool has(const std::string &key) const { return values.count(key) != 0; }
  /// An integer in [min, max], written in decimal digits only.
  bool integer(const std::string &key, int64_t &out, int64_t min, int64_t max);
  /// A finite number in [min, max].
  bool number(const std::string &key, double &out, double min, double max);
  bool text(const std::string &key, std::string &out);
  /// Whether every field was read; problem() names the first that was not.
  bool allRead();
  const std::string &problem() const { return why; }

private:
  bool fail(const std::string &message);
  /// The value of `key`, marked read; null (problem() set) when absent or
  /// empty, or after an earlier problem.
  const std::string *find(const std::string &key);
  std::map<std::string, std::string> values;
  std::set<std::string> read;
  std::string why;
};

/// Parses a decimal integer in [min, max]: digits only, no sign, no spaces.
bool parseInteger(const std::string &text, int64_t min, int64_t max,
                  int64_t &out);

/// Parses an argument's shape ("4x128", "-" for a scalar): each dimension
/// in [1, kMaxManifestSize], their product below 2^62.
bool parseShape(const std::string &text, std::vector<int64_t> &shape);
/// Parses a tensor line's hf_rows ("128,32,32"): sizes as parseShape's.
bool parseRowList(const std::string &text, std::vector<int64_t> &rows);
/// `shape` as the manifest writes it ("4x128"); "a scalar" for none.
std::string formatShape(const std::vector<int64_t> &shape);

/// Checks the checksum line of the artifact `bytes` read from `path`
/// (abi.h) before any of its code is loaded; sets the error on a mismatch.
bool checkArtifactChecksum(const char *path, const std::vector<char> &bytes);

/// A model read from the manifest `text` alone, without an artifact: its
/// entry points have no code and cannot run, but its checks, its layout
/// (with `layout`; not for pipelines) and its checkpoint reader are the
/// real ones. For the fuzzers (fuzz/); null with the error set when the
/// manifest is refused. Close it with loom_model_close.
loom_model *openManifest(const char *text, bool layout);

} // namespace loom

#endif // LOOM_RUNTIME_MANIFEST_H
