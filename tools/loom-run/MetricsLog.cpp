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
  text += std::to_string(value);
  return *this;
}

JsonRecord &JsonRecord::add(const char *name, const std::string &value) {
  key(name);
  text += '"';
  for (unsigned char c : value) {
    if (c == '"' || c == '\\') {
      text += '\\';
      text += static_cast<char>(c);
    } else if (c < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      text += escaped;
    } else {
      text += static_cast<char>(c);
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
