//===- Memory.cpp - The heap of generated code ----------------------------===//
//
// Generated code allocates every intermediate buffer of the step and frees it
// when its last use is done, so one step asks for the same sizes in the same
// order as the last. Served by malloc, the large ones are fresh mmaps every
// time and the kernel zeroes each page again on first touch, which costs
// more than the loops that use them. Freed blocks are therefore kept on a
// free list per size and handed out again; the heap grows to the step's peak
// once and stays there until loom_release_cached_memory.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime.h"

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace {
/// Every block starts with a header that records its usable size and how far
/// the caller's pointer is from the start of the allocation. Cache lines are
/// 64 bytes, and vector loads want at least that alignment.
constexpr size_t kHeaderAlign = 64;

struct Header {
  size_t size;
  size_t offset;
};

class BlockCache {
public:
  void *allocate(size_t alignment, size_t size) {
    if (alignment < kHeaderAlign)
      alignment = kHeaderAlign;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = freeBlocks.find(Key{size, alignment});
      if (it != freeBlocks.end() && !it->second.empty()) {
        void *p = it->second.back();
        it->second.pop_back();
        cachedBytes -= size;
        return p;
      }
    }
    // The header sits right before the returned pointer, in the padding the
    // alignment leaves.
    size_t offset = alignment;
    size_t total = (offset + size + alignment - 1) / alignment * alignment;
    char *base = static_cast<char *>(std::aligned_alloc(alignment, total));
    if (!base)
      return nullptr;
    char *p = base + offset;
    auto *header = reinterpret_cast<Header *>(p - sizeof(Header));
    header->size = size;
    header->offset = offset;
    return p;
  }

  void release(void *ptr) {
    if (!ptr)
      return;
    auto *header =
        reinterpret_cast<Header *>(static_cast<char *>(ptr) - sizeof(Header));
    std::lock_guard<std::mutex> lock(mutex);
    freeBlocks[Key{header->size, header->offset}].push_back(ptr);
    cachedBytes += header->size;
  }

  void trim() {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto &entry : freeBlocks)
      for (void *p : entry.second) {
        auto *header =
            reinterpret_cast<Header *>(static_cast<char *>(p) - sizeof(Header));
        std::free(static_cast<char *>(p) - header->offset);
      }
    freeBlocks.clear();
    cachedBytes = 0;
  }

private:
  struct Key {
    size_t size, alignment;
    bool operator==(const Key &other) const {
      return size == other.size && alignment == other.alignment;
    }
  };
  struct KeyHash {
    size_t operator()(const Key &k) const {
      return std::hash<size_t>()(k.size * 31 + k.alignment);
    }
  };
  std::mutex mutex;
  std::unordered_map<Key, std::vector<void *>, KeyHash> freeBlocks;
  size_t cachedBytes = 0;
};

BlockCache &cache() {
  // Leaked on purpose: artifacts may free after static destructors run.
  static BlockCache *instance = new BlockCache();
  return *instance;
}
} // namespace

extern "C" {

// The names MLIR's memref-to-LLVM lowering calls with use-generic-functions.
void *_mlir_memref_to_llvm_alloc(size_t size) {
  return cache().allocate(kHeaderAlign, size);
}

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
  return cache().allocate(alignment, size);
}

void _mlir_memref_to_llvm_free(void *ptr) { cache().release(ptr); }

void loom_release_cached_memory(void) { cache().trim(); }

} // extern "C"
