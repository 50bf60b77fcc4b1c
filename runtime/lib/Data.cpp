//===- Data.cpp - Token shards, text files and batches --------------------===//

#include "loom/runtime.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "Error.h"

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

extern "C" {

loom_dataset *loom_dataset_open(const char *path, int64_t vocab) {
  if (!checkRegularFile(path))
    return nullptr;
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    setError("%s: cannot open: %s", path, std::strerror(errno));
    return nullptr;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                          std::istreambuf_iterator<char>());
  if (file.bad()) {
    setError("%s: cannot read", path);
    return nullptr;
  }
  auto data = new loom_dataset();
  int32_t magic = 0;
  if (bytes.size() >= sizeof(magic))
    std::memcpy(&magic, bytes.data(), sizeof(magic));
  int32_t header[256];
  const ShardFormat *format = nullptr;
  for (const ShardFormat &f : kShardFormats)
    if (magic == f.magic)
      format = &f;
  if (format) {
    data->shard = true;
    if (bytes.size() < sizeof(header)) {
      setError("%s: truncated llm.c token shard: no complete 256-int header",
               path);
      delete data;
      return nullptr;
    }
    std::memcpy(header, bytes.data(), sizeof(header));
    if (header[1] != format->version) {
      setError("%s: token shard version %d; a shard of magic %d is read in "
               "version %d",
               path, header[1], format->magic, format->version);
      delete data;
      return nullptr;
    }
    int64_t count = header[2];
    size_t width = format->tokenBytes;
    if (count < 0 ||
        bytes.size() != sizeof(header) + width * static_cast<size_t>(count)) {
      setError("%s: the header promises %lld tokens but the file holds %zu "
               "bytes of tokens (truncated or corrupt)",
               path, static_cast<long long>(count),
               bytes.size() - sizeof(header));
      delete data;
      return nullptr;
    }
    data->tokens.resize(count);
    const unsigned char *p =
        reinterpret_cast<const unsigned char *>(bytes.data()) + sizeof(header);
    for (int64_t i = 0; i < count; ++i) {
      uint32_t token = 0;
      for (size_t b = 0; b < width; ++b)
        token |= uint32_t(p[width * i + b]) << (8 * b);
      // Past int32's range no vocabulary reaches: refused below as outside
      // the model's.
      data->tokens[i] =
          static_cast<int32_t>(std::min<uint32_t>(token, INT32_MAX));
    }
  } else {
    // Plain text: each byte is a token.
    if (vocab < 256) {
      setError("%s: is not an llm.c token shard, and reading it as text bytes "
               "needs a vocabulary of at least 256, but the model has %lld",
               path, static_cast<long long>(vocab));
      delete data;
      return nullptr;
    }
    data->tokens.assign(reinterpret_cast<unsigned char *>(bytes.data()),
                        reinterpret_cast<unsigned char *>(bytes.data()) +
                            bytes.size());
  }
  if (data->tokens.empty()) {
    setError("%s: holds no tokens", path);
    delete data;
    return nullptr;
  }
  for (size_t i = 0; i < data->tokens.size(); ++i)
    if (data->tokens[i] >= vocab) {
      setError("%s: token %d at position %zu is outside the model's "
               "vocabulary of %lld",
               path, data->tokens[i], i, static_cast<long long>(vocab));
      delete data;
      return nullptr;
    }
  return data;
}

void loom_dataset_close(loom_dataset *data) { delete data; }

int64_t loom_dataset_size(const loom_dataset *data) {
  return static_cast<int64_t>(data->tokens.size());
}

int loom_dataset_is_shard(const loom_dataset *data) { return data->shard; }

int loom_dataset_batch(const loom_dataset *data, int64_t begin, int64_t end,
                       int64_t *cursor, int64_t batch, int64_t sequence,
                       int32_t *tokens, int32_t *targets) {
  if (end - begin < sequence + 1)
    return !setError("the data range holds %lld tokens, fewer than the %lld "
                     "one sequence and its targets need",
                     static_cast<long long>(end - begin),
                     static_cast<long long>(sequence + 1));
  for (int64_t b = 0; b < batch; ++b) {
    if (*cursor < begin || *cursor + sequence + 1 > end)
      *cursor = begin;
    const int32_t *window = data->tokens.data() + *cursor;
    std::memcpy(tokens + b * sequence, window, sequence * sizeof(int32_t));
    std::memcpy(targets + b * sequence, window + 1, sequence * sizeof(int32_t));
    *cursor += sequence;
  }
  return 0;
}

} // extern "C"
