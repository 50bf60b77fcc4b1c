//===- MetricsLog.cpp - One JSON line per training step -------------------===//

#include "MetricsLog.h"

#include <cerrno>
#include <cmath>
#include <cstring>

using namespace loom;

void JsonRecord::key(const char *name) {
  if (text.size() > 1)
    text += ", ";
  text += '"';
  text += name;
  text += "\": ";
}

JsonRecord &JsonRecord::add(const char *name, double value) {
  key(name);
  numberFields.emplace_back(name, value);
  if (!std::isfinite(value)) {
    text += "null";
    return *this;
  }
  // Enough digits that a float32 loss reads back as the value printed.
  char number[32];
  std::snprintf(number, sizeof(number), "%.9g", value);
  text += number;
  return *this;
}

JsonRecord &JsonRecord::add(const char *name, long long value) {
  key(name);
  numberFields.emplace_back(name, static_cast<double>(value));
  text += std::to_string(value);
  return *this;
}

/// The length of the UTF-8 sequence `text` starts at `at` with, or 0 for a
/// byte that starts none (a sample cut mid-character, a token of bytes).
static size_t utf8Length(const std::string &text, size_t at) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char lead = byte(at);
  size_t length = lead < 0x80                   ? 1
                  : lead >= 0xc2 && lead < 0xe0 ? 2
                  : lead >= 0xe0 && lead < 0xf0 ? 3
                  : lead >= 0xf0 && lead < 0xf5 ? 4
                                                : 0;
  if (length == 0 || at + length > text.size())
    return 0;
  for (size_t i = 1; i < length; ++i)
    if ((byte(at + i) & 0xc0) != 0x80)
      return 0;
  // Overlong forms, surrogates and code points past U+10FFFF.
  if ((lead == 0xe0 && byte(at + 1) < 0xa0) ||
      (lead == 0xed && byte(at + 1) >= 0xa0) ||
      (lead == 0xf0 && byte(at + 1) < 0x90) ||
      (lead == 0xf4 && byte(at + 1) >= 0x90))
    return 0;
  return length;
}

JsonRecord &JsonRecord::add(const char *name, const std::string &value) {
  key(name);
  text += '"';
  for (size_t at = 0; at < value.size();) {
    unsigned char c = static_cast<unsigned char>(value[at]);
    size_t length = utf8Length(value, at);
    if (length == 0) {
      // JSON is UTF-8: a stray byte becomes the replacement character.
      text += "\\ufffd";
      ++at;
    } else if (c == '"' || c == '\\') {
      text += '\\';
      text += static_cast<char>(c);
      ++at;
    } else if (c < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      text += escaped;
      ++at;
    } else {
      text.append(value, at, length);
      at += length;
    }
  }
  text += '"';
  return *this;
}

JsonRecord &JsonRecord::addBool(const char *name, bool value) {
  key(name);
  text += value ? "true" : "false";
  return *this;
}

MetricsLog::~MetricsLog() {
  if (file)
    std::fclose(file);
}

std::string MetricsLog::open(const std::string &to, bool append) {
  path = to;
  file = std::fopen(path.c_str(), append ? "a" : "w");
  if (!file)
    return path + " (--log): cannot write: " + std::strerror(errno);
  return "";
}

std::string MetricsLog::write(const JsonRecord &record) {
  if (!file)
    return "";
  std::string line = record.str() + "\n";
  if (std::fputs(line.c_str(), file) < 0 || std::fflush(file) != 0)
    return path + " (--log): cannot write: " + std::strerror(errno);
  return "";
}
