//===- TensorBoard.cpp - Step metrics as TensorBoard event files ----------===//
//
// An event file is a sequence of TFRecords: the payload's length (8 bytes,
// little-endian), the masked CRC-32C of those 8 bytes, the payload, and
// its masked CRC-32C. Each payload is a `tensorflow.Event`: wall_time
// (field 1, double), step (2, int64), and the first event's file_version
// (3, "brain.Event:2") or a summary (5) of values, each a tag (1) and a
// simple_value (2, float).
//
//===----------------------------------------------------------------------===//

#include "TensorBoard.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

using namespace loom;

namespace {
/// CRC-32C (Castagnoli), reflected, as TFRecord checks its framing with.
uint32_t crc32c(const std::string &bytes) {
  static const auto table = [] {
    std::vector<uint32_t> t(256);
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? 0x82f63b78u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xffffffffu;
  for (unsigned char byte : bytes)
    crc = table[(crc ^ byte) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

uint32_t maskedCrc(const std::string &bytes) {
  uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

template <typename T> void appendLittleEndian(std::string &out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i)
    out += static_cast<char>(static_cast<uint64_t>(value) >> (8 * i) & 0xff);
}

void appendVarint(std::string &out, uint64_t value) {
  for (; value >= 0x80; value >>= 7)
    out += static_cast<char>(value & 0x7f | 0x80);
  out += static_cast<char>(value);
}

/// Protocol buffer fields: a tag (field number and wire type), then the
/// value.
void appendBytesField(std::string &out, int field, const std::string &bytes) {
  appendVarint(out, static_cast<uint64_t>(field) << 3 | 2);
  appendVarint(out, bytes.size());
  out += bytes;
}

void appendDoubleField(std::string &out, int field, double value) {
  appendVarint(out, static_cast<uint64_t>(field) << 3 | 1);
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  appendLittleEndian(out, bits);
}

void appendFloatField(std::string &out, int field, float value) {
  appendVarint(out, static_cast<uint64_t>(field) << 3 | 5);
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  appendLittleEndian(out, bits);
}

void appendVarintField(std::string &out, int field, int64_t value) {
  appendVarint(out, static_cast<uint64_t>(field) << 3);
  appendVarint(out, static_cast<uint64_t>(value));
}

double wallTime() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
} // namespace

TensorBoardWriter::~TensorBoardWriter() {
  if (file)
    std::fclose(file);
}

std::string TensorBoardWriter::open(const std::string &directory) {
  struct stat status;
  if (stat(directory.c_str(), &status) != 0) {
    if (mkdir(directory.c_str(), 0777) != 0)
      return "cannot create the --tensorboard directory " + directory + ": " +
             std::strerror(errno);
  } else if (!S_ISDIR(status.st_mode)) {
    return "--tensorboard " + directory + ": not a directory";
  }
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  double now = wallTime();
  // TensorBoard's own naming; the process id keeps two runs started in the
  // same second apart.
  path = directory + "/events.out.tfevents." +
         std::to_string(static_cast<long long>(now)) + "." + host + "." +
         std::to_string(getpid()) + ".loom";
  file = std::fopen(path.c_str(), "wbx");
  if (!file)
    return "cannot create " + path + ": " + std::strerror(errno);
  std::string event;
  appendDoubleField(event, 1, now);
  appendBytesField(event, 3, "brain.Event:2");
  return writeEvent(event);
}

std::string TensorBoardWriter::write(
    int64_t step, const std::vector<std::pair<std::string, double>> &scalars) {
  std::string summary;
  for (const auto &[tag, value] : scalars) {
    if (!std::isfinite(value))
      continue;
    std::string entry;
    appendBytesField(entry, 1, tag);
    appendFloatField(entry, 2, static_cast<float>(value));
    appendBytesField(summary, 1, entry);
  }
  std::string event;
  appendDoubleField(event, 1, wallTime());
  appendVarintField(event, 2, step);
  appendBytesField(event, 5, summary);
  return writeEvent(event);
}

std::string TensorBoardWriter::writeEvent(const std::string &event) {
  std::string length;
  appendLittleEndian(length, static_cast<uint64_t>(event.size()));
  std::string record = length;
  appendLittleEndian(record, maskedCrc(length));
  record += event;
  appendLittleEndian(record, maskedCrc(event));
  if (std::fwrite(record.data(), 1, record.size(), file) != record.size() ||
      std::fflush(file) != 0)
    return "cannot write " + path + ": " + std::strerror(errno);
  return "";
}
