//===- Transfer.cpp - Copies between host and device memory ---------------===//
//
// An offloaded step moves gradients to the host and parameters to the
// device (docs/offload.md). loom_rt_transfer copies and returns when the
// step may go on: on the CPU a memcpy between the two arenas, on a GPU a
// copy queued on the step's stream (Cuda.cpp).
//
// The transfers of a layer loop start instead (loom_rt_transfer_start) and
// run alongside the step's later work, in the order they were started, until
// the step waits for them (loom_rt_transfer_wait, named by the address of
// their source or destination): a layer's gradients cross while the next
// layer's backward pass runs, and the next layer's parameters while this one
// computes. A sum (loom_rt_transfer_add) is a copy whose destination adds
// what arrives: the micro-batches' gradients summed in host memory. On a GPU
// they go on a copy stream of their own (on the step's stream where the host
// may not touch managed memory while kernels run, which waits for each piece of
// work anyway); on the CPU a thread of their own copies them, so that the same
// overlap, and the same waits, run where there is no GPU. Everything started is
// waited for before the host reads what it was sent (loom_rt_host_begin) and at
// the end of each call of an entry point.
//
//===----------------------------------------------------------------------===//

#include "Device.h"
#include "Trace.h"
#include "loom/abi.h"
#include "loom/rt.h"
#include "loom/runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace {
/// Bytes copied either way, started or not.
std::atomic<int64_t> transferred{0};

/// The runtime's clock, the one its trace and communication times use.
using Clock = loom::TraceClock;
int64_t nanosecondsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() -
                                                              start)
      .count();
}

/// `bytes` from `src` into `dst`, as `landing` says.
void land(void *dst, const void *src, size_t bytes, loom::Landing landing) {
  if (landing == loom::Landing::copy)
    std::memcpy(dst, src, bytes);
  else
    loom::sumFloats(dst, src, bytes, landing == loom::Landing::sumInto);
}

/// The CPU's copying thread: started copies in order, and which of them are
/// done.
class CopyThread {
public:
  void start(void *dst, const void *src, size_t bytes, loom::Landing landing) {
    std::unique_lock<std::mutex> lock(mutex);
    if (!worker.joinable())
      worker = std::thread([this] { run(); });
    uint64_t ticket = ++started;
    queue.push_back({dst, src, bytes, landing, ticket});
    inFlight.push_back({dst, bytes, ticket});
    inFlight.push_back({src, bytes, ticket});
    queued.notify_one();
  }

  void wait(const void *ptr) {
    std::unique_lock<std::mutex> lock(mutex);
    uint64_t ticket = 0;
    for (const Span &span : inFlight)
      if (span.contains(ptr))
        ticket = std::max(ticket, span.ticket);
    waitFor(lock, ticket);
  }

  void waitAll() {
    std::unique_lock<std::mutex> lock(mutex);
    waitFor(lock, started);
  }

  /// Seconds spent on the copies, and waited for them.
  double busySeconds() const { return busy.load() * 1e-9; }
  double waitedSeconds() const { return waited.load() * 1e-9; }

private:
  struct Copy {
    void *dst;
    const void *src;
    size_t bytes;
    loom::Landing landing;
    uint64_t ticket;
  };
  /// The bytes a started copy reads or writes.
  struct Span {
    const void *begin;
    size_t bytes;
    uint64_t ticket;
    bool contains(const void *ptr) const {
      auto at = reinterpret_cast<uintptr_t>(ptr),
           from = reinterpret_cast<uintptr_t>(begin);
      return at >= from && at < from + (bytes ? bytes : 1);
    }
  };

  /// Under the lock: until the copy `ticket` and those before it are done.
  void waitFor(std::unique_lock<std::mutex> &lock, uint64_t ticket) {
    if (done < ticket) {
      Clock::time_point start = Clock::now();
      finished.wait(lock, [&] { return done >= ticket; });
      waited.fetch_add(nanosecondsSince(start));
    }
    prune();
  }

  /// Under the lock.
  void prune() {
    inFlight.erase(
        std::remove_if(inFlight.begin(), inFlight.end(),
                       [&](const Span &s) { return s.ticket <= done; }),
        inFlight.end());
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      queued.wait(lock, [&] { return !queue.empty(); });
      Copy copy = queue.front();
      queue.pop_front();
      lock.unlock();
      Clock::time_point start = Clock::now();
      land(copy.dst, copy.src, copy.bytes, copy.landing);
      busy.fetch_add(nanosecondsSince(start));
      lock.lock();
      done = copy.ticket;
      finished.notify_all();
    }
  }

  std::mutex mutex;
  std::condition_variable queued, finished;
  std::deque<Copy> queue;
  std::vector<Span> inFlight;
  uint64_t started = 0, done = 0;
  /// Nanoseconds; read without the lock.
  std::atomic<int64_t> busy{0}, waited{0};
  std::thread worker;
};

CopyThread &copyThread() {
  // Leaked on purpose, with its thread: a step may still run while static
  // destructors do, and a joinable thread's destructor would end the
  // process.
  static CopyThread *instance = new CopyThread();
  return *instance;
}

/// One transfer of the runtime's four entry points: made at once, or only
/// started (`start`), whichever the backend.
void transfer(void *dst, const void *src, int64_t bytes, bool toHost,
              loom::Landing landing, bool start) {
  transferred.fetch_add(bytes);
  auto size = static_cast<size_t>(bytes);
  if (loom::cudaActive()) {
    // One made at once is queued on the step's stream, and the device's
    // part of the step goes on: the host reads what it receives after
    // loom_rt_host_begin's wait, and writes what the device fetches only
    // after that wait too. A host function's copies are waited for: it goes
    // on to read what it received, or to reuse the buffer it sent.
    if (start)
      loom::cudaTransferStart(dst, src, size, toHost, landing);
    else
      loom::cudaTransfer(dst, src, size, toHost, loom::inHostCall(), landing);
  } else if (start) {
    copyThread().start(dst, src, size, landing);
  } else {
    land(dst, src, size, landing);
  }
}

loom::Landing sumLanding(int32_t into) {
  return into ? loom::Landing::sumInto : loom::Landing::sumFromZero;
}
} // namespace

void loom::sumFloats(void *dst, const void *src, size_t bytes, bool into) {
  auto *sum = static_cast<float *>(dst);
  const auto *part = static_cast<const float *>(src);
  size_t count = bytes / sizeof(float);
  // The device's sum starts from +0: 0 + -0 is +0, as there.
  if (into)
    for (size_t i = 0; i < count; ++i)
      sum[i] = sum[i] + part[i];
  else
    for (size_t i = 0; i < count; ++i)
      sum[i] = 0.0f + part[i];
}

namespace {
struct SumParts {
  float *sum;
  const float *part;
  size_t count;
  bool into;
};

/// Elements are summed in blocks of this many, one block an iteration of
/// the parallel loop.
constexpr size_t kSumBlock = size_t(1) << 16;

void sumBlocks(void *context, int64_t from, int64_t to) {
  const SumParts &s = *static_cast<const SumParts *>(context);
  size_t begin = static_cast<size_t>(from) * kSumBlock;
  size_t end = std::min(s.count, static_cast<size_t>(to) * kSumBlock);
  loom::sumFloats(s.sum + begin, s.part + begin, (end - begin) * sizeof(float),
                  s.into);
}
} // namespace

void loom::sumFloatsOnThreads(void *dst, const void *src, size_t bytes,
                              bool into) {
  SumParts parts{static_cast<float *>(dst), static_cast<const float *>(src),
                 bytes / sizeof(float), into};
  int64_t blocks =
      static_cast<int64_t>((parts.count + kSumBlock - 1) / kSumBlock);
  if (blocks < 2)
    return sumFloats(dst, src, bytes, into);
  loom_rt_parallel_for(sumBlocks, &parts, 0, blocks);
}

void loom::transfersWaitAll() {
  if (cudaActive())
    cudaTransfersWaitAll();
  else
    copyThread().waitAll();
}

extern "C" {

void loom_rt_transfer(void *dst, const void *src, int64_t bytes, int32_t to) {
  transfer(dst, src, bytes, to == LOOM_TO_HOST, loom::Landing::copy,
           /*start=*/false);
}

void loom_rt_transfer_start(void *dst, const void *src, int64_t bytes,
                            int32_t to) {
  transfer(dst, src, bytes, to == LOOM_TO_HOST, loom::Landing::copy,
           /*start=*/true);
}

void loom_rt_transfer_add(void *dst, const void *src, int64_t bytes,
                          int32_t add) {
  transfer(dst, src, bytes, /*toHost=*/true, sumLanding(add), /*start=*/false);
}

void loom_rt_transfer_add_start(void *dst, const void *src, int64_t bytes,
                                int32_t add) {
  transfer(dst, src, bytes, /*toHost=*/true, sumLanding(add), /*start=*/true);
}

void loom_rt_transfer_wait(const void *ptr) {
  if (loom::cudaActive())
    loom::cudaTransferWait(ptr);
  else
    copyThread().wait(ptr);
}

int64_t loom_transferred_bytes(void) { return transferred.load(); }

double loom_started_transfer_seconds(void) {
  return loom::cudaActive() ? loom::cudaStartedTransferSeconds()
                            : copyThread().busySeconds();
}

double loom_transfer_wait_seconds(void) {
  return loom::cudaActive() ? loom::cudaTransferWaitSeconds()
                            : copyThread().waitedSeconds();
}

} // extern "C"
