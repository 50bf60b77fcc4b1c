//===- Manifest.cpp - Reading an artifact's manifest strictly -------------===//

#include "Manifest.h"

#include "Error.h"
#include "loom/Version.h"
#include "loom/abi.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace loom {

ManifestFields::ManifestFields(std::istringstream &line) {
  std::string word;
  while (line >> word) {
    size_t eq = word.find('=');
    std::string key = word.substr(0, eq);
    if (eq == std::string::npos || eq == 0) {
      fail("'" + word + "' is not key=value");
      return;
    }
    if (!values.emplace(key, word.substr(eq + 1)).second) {
      fail("'" + key + "' is given twice");
      return;
    }
  }
}

bool ManifestFields::fail(const std::string &message) {
  if (why.empty())
    why = message;
  return false;
}

bool parseInteger(const std::string &text, int64_t min, int64_t max,
                  int64_t &out) {
  if (text.empty() || text.size() > 19 ||
      text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  long long value = std::strtoll(text.c_str(), nullptr, 10);
  if (value < min || value > max)
    return false;
  out = value;
  return true;
}

const std::string *ManifestFields::find(const std::string &key) {
  if (!why.empty())
    return nullptr;
  read.insert(key);
  auto it = values.find(key);
  if (it == values.end() || it->second.empty()) {
    fail("no '" + key + "'");
    return nullptr;
  }
  return &it->second;
}

bool ManifestFields::integer(const std::string &key, int64_t &out, int64_t min,
                             int64_t max) {
  const std::string *value = find(key);
  if (value && !parseInteger(*value, min, max, out))
    return fail("'" + key + "=" + *value + "' is not an integer from " +
                std::to_string(min) + " to " + std::to_string(max));
  return value != nullptr;
}

bool ManifestFields::number(const std::string &key, double &out, double min,
                            double max) {
  const std::string *value = find(key);
  if (!value)
    return false;
  char *end = nullptr;
  double parsed = std::strtod(value->c_str(), &end);
  if (*end || !std::isfinite(parsed) || parsed < min || parsed > max) {
    char range[64];
    std::snprintf(range, sizeof(range), "%g to %g", min, max);
    return fail("'" + key + "=" + *value + "' is not a number from " + range);
  }
  out = parsed;
  return true;
}

bool ManifestFields::text(const std::string &key, std::string &out) {
  const std::string *value = find(key);
  if (value)
    out = *value;
  return value != nullptr;
}

bool ManifestFields::allRead() {
  if (!why.empty())
    return false;
  for (const auto &field : values)
    if (!read.count(field.first))
      return fail("unknown field '" + field.first + "'");
  return true;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string text;
  for (int64_t d : shape)
    text += (text.empty() ? "" : "x") + std::to_string(d);
  return text.empty() ? std::string("a scalar") : text;
}

/// Sizes in [1, kMaxManifestSize] separated by `separator`, their product
/// below 2^62.
static bool parseSizes(const std::string &text, char separator,
                       std::vector<int64_t> &sizes) {
  sizes.clear();
  std::stringstream ss(text);
  std::string dim;
  int64_t elements = 1, value = 0;
  while (std::getline(ss, dim, separator)) {
    if (!parseInteger(dim, 1, kMaxManifestSize, value) ||
        __builtin_mul_overflow(elements, value, &elements) ||
        elements > (int64_t(1) << 62))
      return false;
    sizes.push_back(value);
  }
  return !sizes.empty() && text.back() != separator;
}

bool parseShape(const std::string &text, std::vector<int64_t> &shape) {
  shape.clear();
  return text == "-" || parseSizes(text, 'x', shape);
}

bool parseRowList(const std::string &text, std::vector<int64_t> &rows) {
  return parseSizes(text, ',', rows);
}

bool checkArtifactChecksum(const char *path, const std::vector<char> &bytes) {
  // The manifest is the one NUL-terminated string starting with its first
  // line, whatever its format; its checksum line follows the version.
  static const char kStart[] = "loom-artifact ";
  static const char kKey[] = "\n" LOOM_CHECKSUM_KEY;
  const char *data = bytes.data(), *end = data + bytes.size();
  const char *manifest = static_cast<const char *>(
      memmem(data, bytes.size(), kStart, sizeof(kStart) - 1));
  if (!manifest)
    return setError("%s: not a Loom artifact (no manifest)", path);
  const char *manifestEnd =
      static_cast<const char *>(std::memchr(manifest, '\0', end - manifest));
  if (!manifestEnd)
    manifestEnd = end;
  // Another version may checksum otherwise: say which version it is.
  static const char kVersion[] = "loom-version " LOOM_VERSION "\n";
  const char *firstEnd = static_cast<const char *>(
      std::memchr(manifest, '\n', manifestEnd - manifest));
  const char *version = firstEnd ? firstEnd + 1 : manifestEnd;
  if (manifestEnd - version < static_cast<ptrdiff_t>(sizeof(kVersion) - 1) ||
      std::memcmp(version, kVersion, sizeof(kVersion) - 1) != 0) {
    const char *eol = static_cast<const char *>(
        std::memchr(version, '\n', manifestEnd - version));
    return setError("%s: compiled by another Loom version (%.*s); this "
                    "runtime is %s: recompile it with this version's loomc",
                    path, static_cast<int>((eol ? eol : manifestEnd) - version),
                    version, LOOM_VERSION);
  }
  const char *key = static_cast<const char *>(
      memmem(manifest, manifestEnd - manifest, kKey, sizeof(kKey) - 1));
  const char *digits = key ? key + sizeof(kKey) - 1 : nullptr;
  if (!digits || manifestEnd - digits < LOOM_CHECKSUM_DIGITS + 1 ||
      digits[LOOM_CHECKSUM_DIGITS] != '\n' ||
      std::string(digits, LOOM_CHECKSUM_DIGITS)
              .find_first_not_of("0123456789abcdef") != std::string::npos)
    return setError("%s: bad manifest: no 'checksum' line of %d hex digits "
                    "after the version",
                    path, LOOM_CHECKSUM_DIGITS);
  // The hash of the file with the digits written as zeros.
  static const char kZeros[LOOM_CHECKSUM_DIGITS + 1] = "0000000000000000";
  uint64_t hash = loom_checksum(LOOM_CHECKSUM_SEED, data, digits - data);
  hash = loom_checksum(hash, kZeros, LOOM_CHECKSUM_DIGITS);
  const char *after = digits + LOOM_CHECKSUM_DIGITS;
  hash = loom_checksum(hash, after, end - after);
  char computed[LOOM_CHECKSUM_DIGITS + 1];
  std::snprintf(computed, sizeof(computed), "%016" PRIx64, hash);
  if (std::memcmp(computed, digits, LOOM_CHECKSUM_DIGITS) != 0)
    return setError("%s: the artifact is corrupt: its contents do not match "
                    "its manifest's checksum (%.*s, computed %s); compile it "
                    "again with loomc",
                    path, LOOM_CHECKSUM_DIGITS, digits, computed);
  return true;
}

} // namespace loom
