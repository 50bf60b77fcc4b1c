//===- Memory.cpp - The heap of generated code ----------------------------===//
//
// Each call of a compiled entry point allocates its static arena, one block
// of the same size every time, and frees it at the end (docs/memory.md).
// Served by malloc, such a block is a fresh mmap every time and the kernel
// zeroes each page again on first touch, which costs more than the loops
// that use it. Freed blocks are therefore kept on a free list per size and
// handed out again; the heap grows to the step's peak once and stays there
// until loom_release_cached_memory.
//
// The bytes handed out and not yet freed are counted, with their peak: the
// memory the step's tensors and the runtime's own (parameters, gradients,
// optimizer state) need at once, the figure the compiler's memory report
// predicts, without what the free lists and the process hold besides. The
// peak of each call of an entry point is counted apart: what the step
// itself allocates, which a compiled step's static arena accounts for.
//
// Under the CUDA backend the blocks are managed memory, which the GPU's
// kernels and the host's code both address. Between loom_rt_host_begin and
// loom_rt_host_end (an offloaded optimizer's function, its arena) and in a
// HostMemoryScope (the runtime's master weights and optimizer state under
// offload) blocks are host memory, counted apart: pinned under the CUDA
// backend, which copies them to and from the GPU (loom_rt_transfer).
//
//===----------------------------------------------------------------------===//

#include "Device.h"
#include "loom/rt.h"
#include "loom/runtime.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace {
/// Cache lines are 64 bytes, and vector loads want at least that alignment.
constexpr size_t kMinAlignment = 64;
/// What cuMemAllocManaged's memory is aligned to, at least.
constexpr size_t kManagedAlignment = 256;

/// Who allocated a block: the C library, the CUDA driver as managed memory
/// (the GPU's) or as pinned host memory.
enum class Source : uint8_t { Heap, Managed, Pinned };

/// Sits right before the pointer handed out, in the padding at the start of
/// the allocation, which begins `offset` bytes before that pointer.
struct Header {
  size_t size, alignment, offset;
  Source source;
  bool host;
};

/// How many host-memory brackets are open: allocations are host memory
/// while any is.
std::atomic<int> hostDepth{0};

Header *headerOf(void *ptr) {
  return reinterpret_cast<Header *>(static_cast<char *>(ptr) - sizeof(Header));
}

class BlockCache {
public:
  void *allocate(size_t alignment, size_t size) {
    alignment = std::max(alignment, kMinAlignment);
    bool host = hostDepth.load() > 0;
    Source source = !loom::cudaActive() ? Source::Heap
                    : host              ? Source::Pinned
                                        : Source::Managed;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = freeBlocks.find(Key{size, alignment, source, host});
      if (it != freeBlocks.end() && !it->second.empty()) {
        void *p = it->second.back();
        it->second.pop_back();
        count(size, host);
        return p;
      }
    }
    // Room for the header and, where the allocator aligns less than asked
    // (the driver's memory: at least 256 bytes; kernels are told the
    // alignment asked for), to align within.
    size_t slack =
        source != Source::Heap && alignment > kManagedAlignment ? alignment : 0;
    size_t total =
        (alignment + slack + size + alignment - 1) / alignment * alignment;
    char *base = static_cast<char *>(
        source == Source::Managed  ? loom::cudaAllocate(total)
        : source == Source::Pinned ? loom::cudaHostAllocate(total)
                                   : std::aligned_alloc(alignment, total));
    if (!base)
      return nullptr;
    uintptr_t first = reinterpret_cast<uintptr_t>(base) + sizeof(Header);
    char *p = base + ((first + alignment - 1) / alignment * alignment -
                      reinterpret_cast<uintptr_t>(base));
    *headerOf(p) =
        Header{size, alignment, static_cast<size_t>(p - base), source, host};
    bool generated;
    {
      std::lock_guard<std::mutex> lock(mutex);
      count(size, host);
      generated = inCall;
    }
    // Generated code's blocks (the step's arena) are touched by kernels
    // first: on the GPU before any of them runs. The runtime's own (the
    // parameters, filled on the host first) are moved before each step
    // that follows the host's access instead (Step.cpp).
    if (source == Source::Managed && generated)
      loom::cudaPrefetch(base, total);
    return p;
  }

  void release(void *ptr) {
    if (!ptr)
      return;
    Header *header = headerOf(ptr);
    std::lock_guard<std::mutex> lock(mutex);
    at(header->host).live -= header->size;
    freeBlocks[Key{header->size, header->alignment, header->source,
                   header->host}]
        .push_back(ptr);
  }

  void trim() {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto &entry : freeBlocks)
      for (void *p : entry.second) {
        char *base = static_cast<char *>(p) - headerOf(p)->offset;
        switch (headerOf(p)->source) {
        case Source::Managed:
          loom::cudaFree(base);
          break;
        case Source::Pinned:
          loom::cudaHostFree(base);
          break;
        case Source::Heap:
          std::free(base);
          break;
        }
      }
    freeBlocks.clear();
  }

  size_t getPeak(bool host) {
    std::lock_guard<std::mutex> lock(mutex);
    return at(host).peak;
  }

  void beginCall() {
    std::lock_guard<std::mutex> lock(mutex);
    inCall = true;
    for (Counts &c : counts)
      c.callBase = c.callPeak = c.live;
  }

  void endCall() {
    std::lock_guard<std::mutex> lock(mutex);
    inCall = false;
    for (Counts &c : counts)
      c.stepPeak = std::max(c.stepPeak, c.callPeak - c.callBase);
  }

  size_t getStepPeak(bool host) {
    std::lock_guard<std::mutex> lock(mutex);
    return at(host).stepPeak;
  }

private:
  struct Counts {
    size_t live = 0, peak = 0;
    /// What was live when the current entry point's call began, the most
    /// live during it, and the most any call added to what it began with.
    size_t callBase = 0, callPeak = 0, stepPeak = 0;
  };
  /// The device's (all memory without offload), then the host's.
  Counts &at(bool host) { return counts[host ? 1 : 0]; }

  /// Under the lock.
  void count(size_t size, bool host) {
    Counts &c = at(host);
    c.live += size;
    c.peak = std::max(c.peak, c.live);
    c.callPeak = std::max(c.callPeak, c.live);
  }

  struct Key {
    size_t size, alignment;
    Source source;
    bool host;
    bool operator==(const Key &other) const {
      return size == other.size && alignment == other.alignment &&
             source == other.source && host == other.host;
    }
  };
  struct KeyHash {
    size_t operator()(const Key &k) const {
      return std::hash<size_t>()(
          ((k.size * 31 + k.alignment) * 3 + static_cast<size_t>(k.source)) *
              2 +
          k.host);
    }
  };
  std::mutex mutex;
  std::unordered_map<Key, std::vector<void *>, KeyHash> freeBlocks;
  Counts counts[2];
  /// Between heapBeginCall and heapEndCall: generated code allocates.
  bool inCall = false;
};

BlockCache &cache() {
  // Leaked on purpose: artifacts may free after static destructors run.
  static BlockCache *instance = new BlockCache();
  return *instance;
}
} // namespace

void *loom::heapAllocate(size_t alignment, size_t size) {
  return cache().allocate(alignment, size);
}

void loom::heapFree(void *ptr) { cache().release(ptr); }

loom::HostMemoryScope::HostMemoryScope(bool enabled) : enabled(enabled) {
  if (enabled)
    hostDepth.fetch_add(1);
}

loom::HostMemoryScope::~HostMemoryScope() {
  if (enabled)
    hostDepth.fetch_sub(1);
}

bool loom::inHostCall() { return hostDepth.load() > 0; }

void loom::heapBeginCall() { cache().beginCall(); }

void loom::heapEndCall() { cache().endCall(); }

extern "C" {

// The names MLIR's memref-to-LLVM lowering calls with use-generic-functions.
// Generated code does not check what they return, so a buffer that cannot
// be had ends the process with the reason rather than a fault.
void *_mlir_memref_to_llvm_alloc(size_t size) {
  return _mlir_memref_to_llvm_aligned_alloc(kMinAlignment, size);
}

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
  void *p = loom::heapAllocate(alignment, size);
  if (!p) {
    std::fprintf(stderr,
                 "loom: out of memory: a buffer of %zu bytes of the step "
                 "cannot be allocated%s%s\n",
                 size, *loom_last_error() ? ": " : "", loom_last_error());
    std::exit(1);
  }
  return p;
}

void _mlir_memref_to_llvm_free(void *ptr) { cache().release(ptr); }

void loom_release_cached_memory(void) { cache().trim(); }

int64_t loom_heap_peak_bytes(void) {
  return static_cast<int64_t>(cache().getPeak(false));
}

int64_t loom_heap_step_peak_bytes(void) {
  return static_cast<int64_t>(cache().getStepPeak(false));
}

int64_t loom_heap_host_peak_bytes(void) {
  return static_cast<int64_t>(cache().getPeak(true));
}

int64_t loom_heap_host_step_peak_bytes(void) {
  return static_cast<int64_t>(cache().getStepPeak(true));
}

void loom_rt_host_begin(void) {
  // The host is about to read what the device sent it, and to write what
  // the device may still be fetching: the step's stream first, with the
  // progress MPI needs (its work may wait on a collective), then the
  // started copies, which wait on nothing after it.
  loom::cudaWait();
  loom::transfersWaitAll();
  hostDepth.fetch_add(1);
}

void loom_rt_host_end(void) { hostDepth.fetch_sub(1); }

} // extern "C"
