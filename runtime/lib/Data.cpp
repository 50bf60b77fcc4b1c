//===- Data.cpp - Token shards, text files and batches --------------------===//

#include "loom/runtime.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

#include "Error.h"
#include "TokenFiles.h"

using namespace loom;

struct loom_dataset {
  std::vector<int32_t> tokens;
  bool shard = false;
};

/// llm.c's token shards: a header of 256 int32 (magic, version, token
/// count), then the tokens, 16-bit for GPT-2's vocabulary and 32-bit for
/// larger ones (llm.c's Llama 3 shards).
struct ShardFormat {
  int32_t magic, version;
  size_t tokenBytes;
};
static constexpr ShardFormat kShardFormats[] = {{20240520, 1, 2},
                                                {20240801, 7, 4}};

/// Whether [begin, end) holds one window of `sequence` tokens and its
/// targets; sets the error otherwise.
static bool checkRange(const loom_dataset *data, int64_t begin, int64_t end,
                       int64_t sequence) {
  if (begin >= 0 && begin <= end &&
      end <= static_cast<int64_t>(data->tokens.size()) &&
      end - begin >= sequence + 1)
    return true;
  return setError("the data range holds %lld tokens, fewer than the %lld "
                  "one sequence and its targets need",
                  static_cast<long long>(end - begin),
                  static_cast<long long>(sequence + 1));
}

/// The start of the next window from `*cursor`, which moves past it:
/// consecutive windows overlapping by the last window's target, from
/// `begin` again where the next would not fit.
static int64_t nextWindow(int64_t begin, int64_t end, int64_t *cursor,
                          int64_t sequence) {
  if (*cursor < begin || *cursor + sequence + 1 > end)
    *cursor = begin;
  int64_t at = *cursor;
  *cursor += sequence;
  return at;
}

/// The shard format of a file starting with `magic`, or none for text.
static const ShardFormat *shardFormat(int32_t magic) {
  for (const ShardFormat &f : kShardFormats)
    if (magic == f.magic)
      return &f;
  return nullptr;
}

/// Checks a shard's header against the file's size: the tokens it holds
/// into `count`, or false with the error set.
static bool checkShardHeader(const char *path, const ShardFormat &format,
                             const int32_t *header, uint64_t fileBytes,
                             int64_t &count) {
  constexpr uint64_t headerBytes = 256 * sizeof(int32_t);
  if (fileBytes < headerBytes)
    return setError("%s: truncated llm.c token shard: no complete 256-int "
                    "header",
                    path);
  if (header[1] != format.version)
    return setError("%s: token shard version %d; a shard of magic %d is read "
                    "in version %d",
                    path, header[1], format.magic, format.version);
  count = header[2];
  if (count < 0 || fileBytes != headerBytes + format.tokenBytes *
                                                  static_cast<uint64_t>(count))
    return setError("%s: the header promises %lld tokens but the file holds "
                    "%llu bytes of tokens (truncated or corrupt)",
                    path, static_cast<long long>(count),
                    static_cast<unsigned long long>(fileBytes - headerBytes));
  return true;
}

bool loom::countTokenFile(const char *path, int64_t &count) {
  if (!checkRegularFile(path))
    return false;
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file)
    return setError("%s: cannot open: %s", path, std::strerror(errno));
  uint64_t size = static_cast<uint64_t>(file.tellg());
  int32_t header[256] = {};
  file.seekg(0);
  file.read(reinterpret_cast<char *>(header),
            std::min<uint64_t>(size, sizeof(header)));
  const ShardFormat *format = size >= 4 ? shardFormat(header[0]) : nullptr;
  if (!format) {
    count = static_cast<int64_t>(size);
    return true;
  }
  return checkShardHeader(path, *format, header, size, count);
}

/// Whether a file that is no shard has a shard's header nonetheless, one
/// word off: a magic of 0 or near llm.c's, or a version and token count
/// that match the file's size as a 16- or 32-bit shard. Text has none.
static bool looksLikeShard(const int32_t *header, uint64_t fileBytes) {
  constexpr uint64_t headerBytes = 256 * sizeof(int32_t);
  if (fileBytes < headerBytes)
    return false;
  if (header[0] == 0)
    return true;
  for (const ShardFormat &f : kShardFormats) {
    if (std::abs(static_cast<int64_t>(header[0]) - f.magic) <= 1000)
      return true;
    if (header[1] == f.version && header[2] > 0 &&
        fileBytes == headerBytes + f.tokenBytes * uint64_t(header[2]))
      return true;
  }
  return false;
}

bool loom::readTokenFile(const char *path, int64_t vocab,
                         std::vector<int32_t> &tokens, bool &shard,
                         bool asBytes) {
  if (!checkRegularFile(path))
    return false;
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return setError("%s: cannot open: %s", path, std::strerror(errno));
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                          std::istreambuf_iterator<char>());
  if (file.bad())
    return setError("%s: cannot read", path);
  int32_t header[256] = {};
  // An empty file's data() may be null, which memcpy must not get.
  if (!bytes.empty())
    std::memcpy(header, bytes.data(), std::min(bytes.size(), sizeof(header)));
  const ShardFormat *format = bytes.size() >= sizeof(int32_t) && !asBytes
                                  ? shardFormat(header[0])
                                  : nullptr;
  shard = format != nullptr;
  if (format) {
    int64_t count = 0;
    if (!checkShardHeader(path, *format, header, bytes.size(), count))
      return false;
    tokens.resize(count);
    size_t width = format->tokenBytes;
    const unsigned char *p =
        reinterpret_cast<const unsigned char *>(bytes.data()) + sizeof(header);
    for (int64_t i = 0; i < count; ++i) {
      uint32_t token = 0;
      for (size_t b = 0; b < width; ++b)
        token |= uint32_t(p[width * i + b]) << (8 * b);
      // Past int32's range no vocabulary reaches: refused below as outside
      // the model's.
      tokens[i] = static_cast<int32_t>(std::min<uint32_t>(token, INT32_MAX));
    }
  } else {
    // Plain text: each byte is a token. A damaged shard must not quietly
    // become another dataset.
    if (!asBytes && looksLikeShard(header, bytes.size()))
      return setError("%s: starts like an llm.c token shard (its first word "
                      "%d is not a shard's magic, %d or %d), but is none: "
                      "damaged? (loom-run --data-bytes reads it as bytes "
                      "anyway)",
                      path, header[0], kShardFormats[0].magic,
                      kShardFormats[1].magic);
    if (vocab < 256)
      return setError("%s: is not an llm.c token shard, and reading it as "
                      "text bytes needs a vocabulary of at least 256, but the "
                      "model has %lld",
                      path, static_cast<long long>(vocab));
    tokens.assign(reinterpret_cast<unsigned char *>(bytes.data()),
                  reinterpret_cast<unsigned char *>(bytes.data()) +
                      bytes.size());
  }
  if (tokens.empty())
    return setError("%s: holds no tokens", path);
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] >= vocab)
      return setError("%s: token %d at position %zu is outside the model's "
                      "vocabulary of %lld",
                      path, tokens[i], i, static_cast<long long>(vocab));
  return true;
}

extern "C" {

loom_dataset *loom_dataset_open(const char *path, int64_t vocab) {
  auto data = std::make_unique<loom_dataset>();
  if (!readTokenFile(path, vocab, data->tokens, data->shard))
    return nullptr;
  return data.release();
}

loom_dataset *loom_dataset_open_bytes(const char *path, int64_t vocab) {
  auto data = std::make_unique<loom_dataset>();
  if (!readTokenFile(path, vocab, data->tokens, data->shard,
                     /*asBytes=*/true))
    return nullptr;
  return data.release();
}

void loom_dataset_close(loom_dataset *data) { delete data; }

int64_t loom_dataset_size(const loom_dataset *data) {
  return static_cast<int64_t>(data->tokens.size());
}

int loom_dataset_is_shard(const loom_dataset *data) { return data->shard; }

int loom_dataset_batch(const loom_dataset *data, int64_t begin, int64_t end,
                       int64_t *cursor, int64_t batch, int64_t sequence,
                       int32_t *tokens, int32_t *targets) {
  if (!checkRange(data, begin, end, sequence))
    return 1;
  for (int64_t b = 0; b < batch; ++b) {
    const int32_t *window =
        data->tokens.data() + nextWindow(begin, end, cursor, sequence);
    std::memcpy(tokens + b * sequence, window, sequence * sizeof(int32_t));
    std::memcpy(targets + b * sequence, window + 1, sequence * sizeof(int32_t));
  }
  return 0;
}

int loom_dataset_skip(const loom_dataset *data, int64_t begin, int64_t end,
                      int64_t *cursor, int64_t windows, int64_t sequence) {
  if (!checkRange(data, begin, end, sequence))
    return 1;
  // In constant time: a resumed run's count of windows may be anything a
  // state file says.
  int64_t perPass = (end - begin - 1) / sequence;
  if (*cursor < begin || *cursor + sequence + 1 > end)
    *cursor = begin;
  int64_t leftInPass = (end - *cursor - 1) / sequence;
  if (windows < leftInPass) {
    *cursor += windows * sequence;
    return 0;
  }
  *cursor = begin + (windows - leftInPass) % perPass * sequence;
  return 0;
}

} // extern "C"
