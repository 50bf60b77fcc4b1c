//===- DnnlSgemmTest.cpp - oneDNN's SGEMM under signals -------------------===//
//
// oneDNN's f32 GEMM kernels (2.x, and 3.x before 3.12) point the stack
// pointer into a heap buffer while they run, so a signal handled meanwhile
// writes its frame over the heap. The runtime blocks signals around each
// call; a step interrupted by SIGINT or SIGTERM stops cleanly rather than
// with a corrupted heap.
//
//===----------------------------------------------------------------------===//

#include "DnnlGemm.h"

#include "gtest/gtest.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <pthread.h>
#include <thread>
#include <vector>

using namespace loom;

namespace {
std::atomic<int> handled{0};

void countSignal(int) { handled.fetch_add(1, std::memory_order_relaxed); }

TEST(DnnlSgemm, SignalsDuringProductsLeaveTheHeapAlone) {
  if (!dnnlSgemmAvailable())
    GTEST_SKIP() << "the runtime was built without oneDNN";
  struct sigaction action {
  }, previous{};
  action.sa_handler = countSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ASSERT_EQ(sigaction(SIGUSR1, &action, &previous), 0);

  const int64_t m = 192, n = 256, k = 320;
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f);
  pthread_t self = pthread_self();
  std::atomic<bool> done{false};
  // As a profiler or a scheduler's signals would: many, at any moment.
  std::thread sender([&] {
    while (!done.load(std::memory_order_relaxed)) {
      pthread_kill(self, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });
  auto start = std::chrono::steady_clock::now();
  int products = 0;
  bool exact = true;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(1)) {
    // Heap blocks of their own beside oneDNN's, freed each round: a
    // corrupted heap aborts in malloc or free.
    std::vector<float> c(m * n, 1.0f);
    dnnlSgemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f,
              c.data(), n);
    exact = exact && c.front() == 0.125f * k && c.back() == 0.125f * k;
    ++products;
  }
  done = true;
  sender.join();
  sigaction(SIGUSR1, &previous, nullptr);
  EXPECT_TRUE(exact);
  EXPECT_GT(products, 10);
  // The signals blocked during the products still arrive, between them.
  EXPECT_GT(handled.load(), 0);
}
} // namespace
