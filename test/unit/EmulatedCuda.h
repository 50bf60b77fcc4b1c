//===- EmulatedCuda.h - CUDA's built-ins on the CPU, for kernel tests --===//
//
// The runtime's own kernels (runtime/lib/kernels) compiled for the CPU: a
// test includes this, then the kernels' .cu file, and runs them with
// launch() or launchGrid() as the CUDA backend launches them. Blocks run
// one after another, so that a kernel's __shared__ arrays (static here)
// hold one block's data at a time. In the kernels that synchronize, a
// block's threads are fibers (ucontext) of the calling thread, switched at
// __syncthreads and at the warp-wide built-ins (__shfl_xor_sync,
// EmulatedWarp.h's matrix instructions), where they meet at a barrier of
// the block or of the warp's 32 lanes; in those that do not, the threads
// run one after the other. Fibers, not threads of the process: a barrier
// is then a switch of stacks, not a system call, and a kernel's thousands
// of them take milliseconds.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_EMULATEDCUDA_H
#define LOOM_TEST_UNIT_EMULATEDCUDA_H

#include "Float.h"

#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

// The built-ins are inline: a test's kernels use some of them, and the
// others then go unused without a warning.
namespace {
struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
// One thread of the process runs every emulated thread in turn: these are
// the running one's.
Dim3 threadIdx, blockIdx, gridDim;
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
struct __nv_bfloat16 {
  uint16_t bits;
};
struct __half {
  uint16_t bits;
};
struct uint4 {
  uint32_t x, y, z, w;
};
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) {
  return {x, y, z, w};
}
inline float __bfloat162float(__nv_bfloat16 x) {
  return loom::bitsFloat(static_cast<uint32_t>(x.bits) << 16);
}
inline float __half2float(__half x) {
  return loom::bitsFloat(loom::widenHalf(x.bits));
}
inline __nv_bfloat16 __float2bfloat16_rn(float x) {
  return {loom::narrowBf16(x)};
}
inline __half __float2half_rn(float x) { return {loom::narrowHalf(x)}; }
inline float atomicAdd(float *at, float value) {
  float old = *at;
  *at = old + value;
  return old;
}

/// A block's threads as fibers, and the barriers they meet at.
class Block {
public:
  struct Barrier {
    int expected = 0, arrived = 0;
    unsigned generation = 0;
  };
  /// The warp-wide built-ins' exchange: each lane leaves its operands in
  /// `in`, and the last to arrive computes every lane's results into `out`
  /// before the barrier opens. Nothing is written over before every lane
  /// has read it: the next results only once all have come to the next
  /// barrier.
  struct Warp {
    Barrier barrier;
    uint64_t in[32][8];
    uint32_t out[32][4];
  };

  /// Runs `run(t)` as thread t of `threads`, until every one returns.
  template <typename Run> void execute(int threads, Run run) {
    size_t stackBytes = kStackBytes * threads;
    if (stacks.size() < stackBytes)
      stacks.resize(stackBytes);
    fibers.assign(threads, Fiber{});
    warps.assign(threads % 32 == 0 ? threads / 32 : 0, Warp{});
    for (Warp &warp : warps)
      warp.barrier.expected = 32;
    block = Barrier{threads, 0, 0};
    entry = [&run](int t) { run(t); };
    for (int t = 0; t < threads; ++t) {
      Fiber &f = fibers[t];
      getcontext(&f.context);
      f.context.uc_stack.ss_sp = stacks.data() + t * kStackBytes;
      f.context.uc_stack.ss_size = kStackBytes;
      f.context.uc_link = &scheduler;
      makecontext(&f.context, &Block::start, 0);
    }
    // Round robin over the fibers that can go on: not returned, not
    // waiting at a barrier that has not opened; from the last thread first
    // with `reversed`, so that a thread reading what another writes before
    // a barrier that is missing reads it unwritten in one order or the
    // other.
    for (int live = threads; live > 0;)
      for (int i = 0; i < threads; ++i) {
        int t = reversed ? threads - 1 - i : i;
        Fiber &f = fibers[t];
        if (f.done || (f.waitingAt && f.waitingAt->generation == f.since))
          continue;
        f.waitingAt = nullptr;
        current = t;
        threadIdx = {static_cast<unsigned>(t), 0, 0};
        swapcontext(&scheduler, &f.context);
        live -= f.done;
      }
    entry = nullptr;
  }

  /// Waits at `barrier`; the last to arrive runs `opening` first.
  template <typename Opening> void wait(Barrier &barrier, Opening opening) {
    if (++barrier.arrived == barrier.expected) {
      opening();
      barrier.arrived = 0;
      ++barrier.generation;
      return;
    }
    Fiber &f = fibers[current];
    f.waitingAt = &barrier;
    f.since = barrier.generation;
    swapcontext(&f.context, &scheduler);
  }
  void syncThreads() {
    wait(block, [] {});
  }
  Warp &warp() { return warps.at(current / 32); }

  /// Whether the threads run from the last one first.
  bool reversed = false;

private:
  /// Enough for the kernels' registers.
  static constexpr size_t kStackBytes = 64 << 10;
  struct Fiber {
    ucontext_t context;
    bool done = false;
    const Barrier *waitingAt = nullptr;
    unsigned since = 0;
  };

  static void start();

  std::vector<char> stacks;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  Barrier block;
  ucontext_t scheduler;
  int current = 0;
  std::function<void(int)> entry;
};
Block theBlock;
void Block::start() {
  int t = theBlock.current;
  theBlock.entry(t);
  theBlock.fibers[t].done = true;
  // Returning resumes uc_link, the scheduler.
}

void __syncthreads() { theBlock.syncThreads(); }
int laneId() { return static_cast<int>(threadIdx.x % 32); }
/// The lane's slot of operands, and of results.
uint64_t *warpIn(int lane) { return theBlock.warp().in[lane]; }
uint32_t *warpOut(int lane) { return theBlock.warp().out[lane]; }
/// Meets the warp's other lanes, the last running `computeAll`, which reads
/// every lane's warpIn and writes every lane's warpOut.
template <typename F> void warpMeet(F computeAll) {
  theBlock.wait(theBlock.warp().barrier, computeAll);
}

/// Each lane's x from lane (its own ^ laneMask). All 32 lanes take part.
inline float __shfl_xor_sync(unsigned, float x, int laneMask) {
  std::memcpy(warpIn(laneId()), &x, sizeof(x));
  warpMeet([laneMask] {
    for (int t = 0; t < 32; ++t)
      std::memcpy(warpOut(t), warpIn(t ^ laneMask), sizeof(float));
  });
  float y;
  std::memcpy(&y, warpOut(laneId()), sizeof(y));
  return y;
}

/// Runs `kernel(args...)` on a grid of blocks of `threads`;
/// `synchronizes`: whether its threads meet at __syncthreads or in
/// warp-wide built-ins (then fibers, in warps of 32 where the block has
/// whole warps), else they run one after another.
template <typename Kernel, typename... Args>
void launchGrid(Dim3 grid, int threads, bool synchronizes, Kernel kernel,
                Args... args) {
  gridDim = grid;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = {x, y, z};
        auto run = [&](int t) {
          threadIdx = {static_cast<unsigned>(t), 0, 0};
          kernel(args...);
        };
        if (synchronizes) {
          theBlock.execute(threads, run);
          continue;
        }
        for (int t = 0; t < threads; ++t)
          run(t);
      }
}

/// A grid of blocksX x blocksY blocks.
template <typename Kernel, typename... Args>
void launch(unsigned blocksX, unsigned blocksY, int threads, bool synchronizes,
            Kernel kernel, Args... args) {
  launchGrid(Dim3{blocksX, blocksY, 1}, threads, synchronizes, kernel, args...);
}
} // namespace

// What the kernels' sources expect of nvcc.
#define LOOM_EMULATE_CUDA 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(bytes) __attribute__((aligned(bytes)))

#endif // LOOM_TEST_UNIT_EMULATEDCUDA_H
