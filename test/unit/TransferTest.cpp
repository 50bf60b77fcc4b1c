//===- TransferTest.cpp - Started copies between host and device ----------===//

#include "Device.h"
#include "loom/abi.h"
#include "loom/rt.h"
#include "loom/runtime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

namespace {
/// Started copies run in order on the copying thread: a wait on a buffer
/// (either side of a copy, or a byte inside it) returns once that copy and
/// every one started before it are done, and each is counted once.
TEST(RuntimeTransfer, StartedCopiesFinishByTheirWait) {
  constexpr size_t kCount = 1 << 20;
  std::vector<float> device(kCount), host(kCount), back(kCount);
  for (size_t i = 0; i < kCount; ++i)
    device[i] = static_cast<float>(i);
  int64_t before = loom_transferred_bytes();
  int64_t bytes = static_cast<int64_t>(kCount * sizeof(float));
  loom_rt_transfer_start(host.data(), device.data(), bytes, LOOM_TO_HOST);
  loom_rt_transfer_start(back.data(), host.data(), bytes, LOOM_TO_DEVICE);
  // The second copy, named by a byte in the middle of its destination.
  loom_rt_transfer_wait(back.data() + kCount / 2);
  EXPECT_EQ(host, device);
  EXPECT_EQ(back, device);
  EXPECT_EQ(loom_transferred_bytes() - before, 2 * bytes);
}

/// A wait on a buffer no copy touches returns at once; so does one after
/// its copy is done and waited for already.
TEST(RuntimeTransfer, WaitWithoutCopyReturns) {
  std::vector<float> a(16, 1.0f), b(16, 0.0f), unrelated(16);
  loom_rt_transfer_wait(unrelated.data());
  loom_rt_transfer_start(b.data(), a.data(), 16 * sizeof(float), LOOM_TO_HOST);
  loom_rt_transfer_wait(a.data());
  EXPECT_EQ(a, b);
  loom_rt_transfer_wait(a.data());
  loom_rt_transfer_wait(b.data());
}

/// The host's bracket waits for every started copy before the host reads
/// what it was sent.
TEST(RuntimeTransfer, HostBeginWaitsForAll) {
  constexpr size_t kCount = 1 << 18;
  std::vector<std::vector<float>> sources(8, std::vector<float>(kCount));
  std::vector<std::vector<float>> sent(8, std::vector<float>(kCount));
  for (size_t s = 0; s < sources.size(); ++s) {
    for (size_t i = 0; i < kCount; ++i)
      sources[s][i] = static_cast<float>(s * kCount + i);
    loom_rt_transfer_start(sent[s].data(), sources[s].data(),
                           static_cast<int64_t>(kCount * sizeof(float)),
                           LOOM_TO_HOST);
  }
  loom_rt_host_begin();
  loom_rt_host_end();
  EXPECT_EQ(sent, sources);
}
/// A sum (loom_rt_transfer_add): the first micro-batch's lands as 0 + the
/// source, as a device's sum from +0 would (a -0 becomes +0); the next ones
/// add to what the buffer holds. Started or not, in order with the copies.
TEST(RuntimeTransfer, SumsAddWhereTold) {
  constexpr size_t kCount = 1 << 16;
  std::vector<float> first(kCount), second(kCount), sum(kCount, 123.0f);
  for (size_t i = 0; i < kCount; ++i) {
    first[i] = i == 0 ? -0.0f : static_cast<float>(i) * 0.5f;
    second[i] = i == 0 ? -0.0f : 1.0f / static_cast<float>(i + 1);
  }
  int64_t bytes = static_cast<int64_t>(kCount * sizeof(float));
  int64_t before = loom_transferred_bytes();
  loom_rt_transfer_add(sum.data(), first.data(), bytes, 0);
  EXPECT_FALSE(std::signbit(sum[0]));
  for (size_t i = 1; i < kCount; ++i)
    ASSERT_EQ(sum[i], first[i]) << i;
  loom_rt_transfer_add_start(sum.data(), second.data(), bytes, 1);
  loom_rt_transfer_wait(sum.data() + kCount - 1);
  for (size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(sum[i], (i == 0 ? 0.0f : first[i]) + second[i]) << i;
  EXPECT_FALSE(std::signbit(sum[0]));
  // Started from zero again: what the buffer held does not count.
  loom_rt_transfer_add_start(sum.data(), second.data(), bytes, 0);
  loom_rt_transfer_wait(second.data());
  EXPECT_EQ(sum[kCount - 1], second[kCount - 1]);
  EXPECT_EQ(loom_transferred_bytes() - before, 3 * bytes);
}
/// A GPU's host function sums each piece on the runtime's threads, called
/// from the driver's thread: the same elements as one thread's sum.
TEST(RuntimeTransfer, SumsOnThreadsAsOnOne) {
  constexpr size_t kCount = (3 << 16) + 5;
  std::vector<float> part(kCount), serial(kCount), threaded(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    part[i] = i % 7 == 0 ? -0.0f : 1.0f / static_cast<float>(i + 3);
    serial[i] = threaded[i] = static_cast<float>(i % 11) * 0.1f;
  }
  size_t bytes = kCount * sizeof(float);
  for (bool into : {true, false}) {
    loom::sumFloats(serial.data(), part.data(), bytes, into);
    std::thread driver([&] {
      loom::sumFloatsOnThreads(threaded.data(), part.data(), bytes, into);
    });
    driver.join();
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(serial[i], threaded[i]) << i;
      ASSERT_EQ(std::signbit(serial[i]), std::signbit(threaded[i])) << i;
    }
  }
}
} // namespace
