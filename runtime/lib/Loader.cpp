//===- Loader.cpp - Windows from many token shards, shuffled --------------===//
//
// loom_loader: training data as a directory or a pattern of llm.c shards,
// as prepare-data writes them and llm.c's runs read them. Windows of
// sequence + 1 tokens start every `sequence` tokens of each shard; an
// epoch takes every window once, with the shards' order and each shard's
// windows permuted anew per epoch from the seed (llm.c's loader does the
// same), or in order. The k-th window of the run is a function of k
// alone, so a resumed run continues at the exact position by its count,
// and only the shard being read is held in memory.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime.h"
#include "loom/splitmix.h"

#include "Error.h"
#include "Json.h"
#include "TokenFiles.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <dirent.h>
#include <glob.h>
#include <sys/stat.h>

using namespace loom;

struct loom_loader {
  struct Shard {
    std::string path;
    int64_t windows = 0;
  };
  std::vector<Shard> shards;
  int64_t vocab = 0, sequence = 0, tokens = 0, windowsPerEpoch = 0;
  bool shuffle = false;
  uint64_t seed = 0;

  /// The shard whose tokens are held, and the order of the epoch last
  /// asked for: its shards and the first window of each, then the window
  /// permutation of the shard last read from.
  int64_t heldShard = -1, orderEpoch = -1, permutedShard = -1;
  std::vector<int32_t> held;
  std::vector<int64_t> order, firstWindow, windowOrder;

  bool window(int64_t index, int32_t *tokens, int32_t *targets);

private:
  void orderEpochOf(int64_t epoch);
  bool hold(int64_t shard);
};

namespace {
struct Random {
  uint64_t state;
  uint64_t next() { return loom_splitmix64(&state); }
};

/// 0 .. n-1, shuffled (Fisher-Yates) from `key`, or in order.
std::vector<int64_t> permutation(int64_t n, bool shuffle, uint64_t key) {
  std::vector<int64_t> p(n);
  for (int64_t i = 0; i < n; ++i)
    p[i] = i;
  Random random{key};
  if (shuffle)
    for (int64_t i = n - 1; i > 0; --i)
      std::swap(p[i], p[random.next() % static_cast<uint64_t>(i + 1)]);
  return p;
}

uint64_t mixKey(uint64_t seed, int64_t epoch, int64_t shard) {
  Random random{seed ^ (static_cast<uint64_t>(epoch) * 0x2545f4914f6cdd1dULL)};
  random.state ^= static_cast<uint64_t>(shard + 1) * 0x9e3779b97f4a7c15ULL;
  return random.next();
}

bool isDirectory(const char *path) {
  struct stat status;
  return ::stat(path, &status) == 0 && S_ISDIR(status.st_mode);
}

/// A directory's shards of `part`: the files ending in .bin whose names
/// hold it ("train", "val"), by name.
bool directoryShards(const std::string &dir, const char *part,
                     std::vector<std::string> &paths) {
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return setError("%s: cannot read: %s", dir.c_str(), std::strerror(errno));
  std::vector<std::string> names;
  while (dirent *entry = ::readdir(d)) {
    std::string name = entry->d_name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".bin") == 0 &&
        name.find(part) != std::string::npos)
      names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string &name : names)
    paths.push_back(dir + "/" + name);
  if (paths.empty())
    return setError("%s: no %s shards (files *%s*.bin) in the directory",
                    dir.c_str(), part, part);
  return true;
}

/// A directory prepare-data wrote says which vocabulary its tokens are
/// of: refused, up front, when the model's is smaller.
bool checkMeta(const std::string &dir, int64_t vocab) {
  std::string path = dir + "/meta.json";
  std::ifstream file(path);
  if (!file)
    return true;
  std::string text((std::istreambuf_iterator<char>(file)),
                   std::istreambuf_iterator<char>());
  Json meta;
  if (!JsonReader(text).parse(meta) || meta.kind != Json::Object)
    return setError("%s: not JSON", path.c_str());
  const Json *size = meta.get("vocab_size");
  if (!size || size->kind != Json::Number || size->number < 1)
    return setError("%s: field 'vocab_size': no positive number", path.c_str());
  if (size->number > static_cast<double>(vocab)) {
    const Json *tokenizer = meta.get("tokenizer");
    const Json *name = tokenizer ? tokenizer->get("name") : nullptr;
    if (!name && tokenizer)
      name = tokenizer->get("file");
    return setError(
        "%s: the data was tokenized with a vocabulary of %.0f tokens%s%s%s, "
        "more than the model's %lld",
        path.c_str(), size->number, name ? " (" : "",
        name && name->kind == Json::String ? name->text.c_str() : "",
        name ? ")" : "", static_cast<long long>(vocab));
  }
  return true;
}

/// The files `spec` names: a directory's shards of `part`, the files a
/// pattern matches, or the one file it is.
bool resolve(const char *spec, const char *part, int64_t vocab,
             std::vector<std::string> &paths) {
  if (isDirectory(spec))
    return checkMeta(spec, vocab) && directoryShards(spec, part, paths);
  if (!std::strpbrk(spec, "*?[")) {
    paths.emplace_back(spec);
    return true;
  }
  glob_t matches;
  int rc = ::glob(spec, 0, nullptr, &matches);
  if (rc == 0)
    for (size_t i = 0; i < matches.gl_pathc; ++i)
      paths.emplace_back(matches.gl_pathv[i]);
  ::globfree(&matches);
  if (paths.empty())
    return setError("%s: no file matches the pattern", spec);
  return true;
}
} // namespace

void loom_loader::orderEpochOf(int64_t epoch) {
  if (orderEpoch == epoch)
    return;
  order = permutation(static_cast<int64_t>(shards.size()), shuffle,
                      mixKey(seed, epoch, -1));
  firstWindow.assign(1, 0);
  for (int64_t shard : order)
    firstWindow.push_back(firstWindow.back() + shards[shard].windows);
  orderEpoch = epoch;
  permutedShard = -1;
}

bool loom_loader::hold(int64_t shard) {
  if (heldShard == shard)
    return true;
  bool isShard = false;
  held.clear();
  heldShard = -1;
  if (!readTokenFile(shards[shard].path.c_str(), vocab, held, isShard))
    return false;
  heldShard = shard;
  return true;
}

bool loom_loader::window(int64_t index, int32_t *tokensOut,
                         int32_t *targetsOut) {
  int64_t epoch = index / windowsPerEpoch;
  int64_t within = index % windowsPerEpoch;
  orderEpochOf(epoch);
  size_t slot =
      std::upper_bound(firstWindow.begin(), firstWindow.end(), within) -
      firstWindow.begin() - 1;
  int64_t shard = order[slot];
  if (permutedShard != shard) {
    windowOrder =
        permutation(shards[shard].windows, shuffle, mixKey(seed, epoch, shard));
    permutedShard = shard;
  }
  if (!hold(shard))
    return false;
  int64_t start = windowOrder[within - firstWindow[slot]] * sequence;
  std::memcpy(tokensOut, held.data() + start, sequence * sizeof(int32_t));
  std::memcpy(targetsOut, held.data() + start + 1, sequence * sizeof(int32_t));
  return true;
}

extern "C" {

loom_loader *loom_loader_open(const char *spec, const char *part, int64_t vocab,
                              int64_t sequence, int shuffle, uint64_t seed) {
  std::vector<std::string> paths;
  if (!resolve(spec, part, vocab, paths))
    return nullptr;
  auto loader = std::make_unique<loom_loader>();
  loader->vocab = vocab;
  loader->sequence = sequence;
  loader->shuffle = shuffle != 0;
  loader->seed = seed;
  for (const std::string &path : paths) {
    int64_t count = 0;
    if (!countTokenFile(path.c_str(), count))
      return nullptr;
    // Windows of sequence + 1 tokens, one every `sequence`.
    int64_t windows = count > sequence ? (count - 1) / sequence : 0;
    loader->shards.push_back({path, windows});
    loader->tokens += count;
    loader->windowsPerEpoch += windows;
  }
  if (loader->windowsPerEpoch == 0) {
    setError("%s: %lld tokens in %zu files, none of which holds the %lld "
             "tokens of one sequence and its targets",
             spec, static_cast<long long>(loader->tokens), paths.size(),
             static_cast<long long>(sequence + 1));
    return nullptr;
  }
  return loader.release();
}

void loom_loader_close(loom_loader *loader) { delete loader; }

int64_t loom_loader_files(const loom_loader *loader) {
  return static_cast<int64_t>(loader->shards.size());
}

int64_t loom_loader_tokens(const loom_loader *loader) { return loader->tokens; }

int64_t loom_loader_windows(const loom_loader *loader) {
  return loader->windowsPerEpoch;
}

int loom_loader_batch(loom_loader *loader, int64_t first, int64_t batch,
                      int32_t *tokens, int32_t *targets) {
  for (int64_t b = 0; b < batch; ++b)
    if (!loader->window(first + b, tokens + b * loader->sequence,
                        targets + b * loader->sequence))
      return 1;
  return 0;
}

} // extern "C"
