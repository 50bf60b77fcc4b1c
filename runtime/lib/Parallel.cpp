//===- Parallel.cpp - The parallel loops of generated code ----------------===//
//
// Generated code runs the outermost loop of an elementwise or row-wise nest
// through loom_rt_parallel_for: the iterations are split into as many equal,
// contiguous ranges as there are threads, the caller runs the first and the
// pool's workers the others. Iterations of such a loop write disjoint data,
// so the result does not depend on the split, nor on the number of threads.
//
// Loops and GEMMs alternate many times per step, and OpenBLAS's threads want
// the same cores; a worker therefore spins only briefly for the next loop
// before it sleeps, and the caller runs whatever parts no worker has
// claimed instead of waiting for one to wake. The pool also sets OpenBLAS's
// threads: as many as its own for GEMMs outside its loops, one inside them.
//
//===----------------------------------------------------------------------===//

#include "Parallel.h"

#include "loom/rt.h"
#include "loom/runtime.h"

#include <algorithm>
#include <atomic>
#include <cblas.h>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <sched.h>
#include <thread>
#include <vector>

namespace {
using TaskFn = void (*)(void *, int64_t, int64_t);

/// Iterations a spinning thread waits before it blocks: a few hundred
/// microseconds, longer than most gaps between a step's loops (waking a
/// sleeping worker takes tens of microseconds, and gpt2-tiny runs hundreds
/// of loops a step), shorter than a large GEMM, whose OpenBLAS threads
/// want the cores.
constexpr int kSpinIterations = 10000;

void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int64_t availableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

/// Set while a thread runs iterations, so that a parallel loop inside one
/// runs inline instead of waiting for workers that are busy.
thread_local bool inParallelLoop = false;
} // namespace

bool loom::isInParallelLoop() { return inParallelLoop; }

namespace {

/// The pool's state word: the loop's generation, its number of parts and
/// the next part nobody has claimed yet. Parts are claimed with one atomic
/// operation, so a worker that wakes late finds nothing left to do rather
/// than keeping the caller waiting, and can never claim a part of a loop
/// that is over.
struct State {
  uint32_t generation;
  uint16_t parts, next;
  static State unpack(uint64_t word) {
    return {static_cast<uint32_t>(word >> 32),
            static_cast<uint16_t>(word >> 16), static_cast<uint16_t>(word)};
  }
  uint64_t pack() const {
    return (static_cast<uint64_t>(generation) << 32) |
           (static_cast<uint64_t>(parts) << 16) | next;
  }
};

class ThreadPool {
public:
  int64_t size() const { return numThreads.load(std::memory_order_acquire); }

  /// Keeps `threads` - 1 workers (the caller is the last thread).
  void resize(int64_t threads) {
    std::lock_guard<std::mutex> lock(configure);
    stopWorkers();
    // Parts are counted in 16 bits.
    numThreads.store(std::clamp<int64_t>(threads, 1, 1024),
                     std::memory_order_release);
    stop.store(false, std::memory_order_release);
    for (int64_t i = 1; i < size(); ++i)
      workers.emplace_back([this] { work(); });
    // GEMMs outside parallel loops take as many threads as the loops.
    openblas_set_num_threads(static_cast<int>(size()));
  }

  void run(TaskFn fn, void *context, int64_t begin, int64_t end) {
    int64_t count = end - begin;
    if (count <= 0)
      return;
    if (inParallelLoop) {
      fn(context, begin, end);
      return;
    }
    std::lock_guard<std::mutex> lock(configure);
    int64_t parts = std::min<int64_t>(size(), count);
    if (parts == 1) {
      fn(context, begin, end);
      return;
    }
    // The loop's threads are the cores: a GEMM inside it runs on the
    // thread that calls it (OpenBLAS's threaded GEMMs, called from every
    // part at once, would take turns on its global lock).
    openblas_set_num_threads(1);
    task = {fn, context, begin, count, parts};
    done.store(0, std::memory_order_relaxed);
    State next{State::unpack(state.load(std::memory_order_relaxed)).generation +
                   1,
               static_cast<uint16_t>(parts), 0};
    {
      std::lock_guard<std::mutex> guard(mutex);
      state.store(next.pack(), std::memory_order_release);
    }
    if (sleeping.load(std::memory_order_acquire))
      wake.notify_all();
    int64_t part;
    while (claim(next.generation, part))
      runPart(part);
    // What is left runs on workers that are awake.
    for (int spin = 0; done.load(std::memory_order_acquire) != parts; ++spin) {
      if (spin < kSpinIterations) {
        pause();
        continue;
      }
      std::unique_lock<std::mutex> guard(mutex);
      finished.wait(
          guard, [&] { return done.load(std::memory_order_acquire) == parts; });
    }
    openblas_set_num_threads(static_cast<int>(size()));
  }

private:
  struct Task {
    TaskFn fn = nullptr;
    void *context = nullptr;
    int64_t begin = 0, count = 0, parts = 0;
  };

  /// Claims the next part of loop `generation`; false when none is left.
  bool claim(uint32_t generation, int64_t &part) {
    uint64_t word = state.load(std::memory_order_acquire);
    while (true) {
      State s = State::unpack(word);
      if (s.generation != generation || s.next >= s.parts)
        return false;
      State claimed = s;
      ++claimed.next;
      if (state.compare_exchange_weak(word, claimed.pack(),
                                      std::memory_order_acq_rel)) {
        part = s.next;
        return true;
      }
    }
  }

  /// Runs part `part` of the loop and reports it done.
  void runPart(int64_t part) {
    // Equal contiguous ranges, the first (count % parts) one longer.
    int64_t parts = task.parts;
    int64_t base = task.count / parts, extra = task.count % parts;
    int64_t from = task.begin + part * base + std::min(part, extra);
    int64_t to = from + base + (part < extra ? 1 : 0);
    inParallelLoop = true;
    task.fn(task.context, from, to);
    inParallelLoop = false;
    // The caller may post the next loop as soon as the count is complete:
    // `task` is not read after this.
    if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == parts) {
      std::lock_guard<std::mutex> guard(mutex);
      finished.notify_all();
    }
  }

  void work() {
    uint32_t seen =
        State::unpack(state.load(std::memory_order_acquire)).generation;
    auto posted = [&] {
      return State::unpack(state.load(std::memory_order_acquire)).generation !=
                 seen ||
             stop.load(std::memory_order_acquire);
    };
    while (true) {
      for (int spin = 0; !posted(); ++spin) {
        if (spin < kSpinIterations) {
          pause();
          continue;
        }
        std::unique_lock<std::mutex> guard(mutex);
        sleeping.fetch_add(1, std::memory_order_acq_rel);
        wake.wait(guard, posted);
        sleeping.fetch_sub(1, std::memory_order_acq_rel);
      }
      if (stop.load(std::memory_order_acquire))
        return;
      seen = State::unpack(state.load(std::memory_order_acquire)).generation;
      int64_t part;
      while (claim(seen, part))
        runPart(part);
    }
  }

  void stopWorkers() {
    {
      std::lock_guard<std::mutex> guard(mutex);
      stop.store(true, std::memory_order_release);
    }
    wake.notify_all();
    for (std::thread &worker : workers)
      worker.join();
    workers.clear();
  }

  /// Held by the thread that runs a loop or resizes the pool.
  std::mutex configure;
  /// Guards the sleeping side of the hand-offs.
  std::mutex mutex;
  std::condition_variable wake, finished;
  std::atomic<uint64_t> state{0};
  std::atomic<int64_t> done{0};
  std::atomic<int> sleeping{0};
  std::atomic<bool> stop{false};
  Task task;
  std::atomic<int64_t> numThreads{1};
  std::vector<std::thread> workers;
};

ThreadPool &getPool() {
  static ThreadPool *pool = [] {
    auto *created = new ThreadPool();
    created->resize(availableCores());
    return created;
  }();
  return *pool;
}
} // namespace

extern "C" {

void loom_rt_parallel_for(void (*fn)(void *, int64_t, int64_t), void *context,
                          int64_t begin, int64_t end) {
  getPool().run(fn, context, begin, end);
}

int64_t loom_get_num_threads(void) { return getPool().size(); }

void loom_set_num_threads(int64_t threads) {
  getPool().resize(std::max<int64_t>(1, threads));
}

} // extern "C"
