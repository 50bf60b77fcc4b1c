//===- CudaTransferTimingTest.cpp - The copy stream's time, and its waits -===//
//
// Under offload, loom-run reports how long the copies started alongside
// the step took and how long the step stood waiting for them: on a GPU,
// the copy stream's time on each copy and the step's stream's time between
// its work before a wait and the copy's end. A copy waited for at once is
// waited for about as long as it takes; one waited for behind longer work
// hardly at all. Skipped without a GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaManaged.h"

#include "loom/runtime.h"

#include <memory>

using namespace loom_test;

namespace {
class CudaTransferTiming : public CudaTest {
protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped())
      return;
    if (!loom::cudaRunsAhead())
      GTEST_SKIP() << "this GPU's work is waited for as it is queued";
    device.reset(new ManagedCopy<float>(kCopyElements));
    host = static_cast<float *>(
        loom::cudaHostAllocate(kCopyElements * sizeof(float)));
    ASSERT_TRUE(device->at && host) << loom_last_error();
    // The copy's source on the GPU before it is timed.
    loom::cudaPrefetch(device->at, kCopyElements * sizeof(float));
    ASSERT_TRUE(loom::cudaSynchronize()) << loom_last_error();
  }
  void TearDown() override { loom::cudaHostFree(host); }

  /// Queues `gemms` GEMMs of 2048 x 2048 x 2048, tenths of a millisecond
  /// each on a recent GPU.
  void queueWork(int gemms) {
    constexpr int64_t kN = 2048;
    for (auto *buffer : {&a, &b, &c})
      if (!*buffer)
        buffer->reset(new ManagedCopy<float>(kN * kN));
    ASSERT_TRUE(a->at && b->at && c->at) << loom_last_error();
    for (int i = 0; i < gemms; ++i)
      loom::cudaGemm(LOOM_DTYPE_F32, 0, 0, kN, kN, kN, 1.0f, a->at, kN, b->at,
                     kN, 0.0f, c->at, kN);
  }

  /// 256 MiB: several milliseconds over any host link.
  static constexpr size_t kCopyElements = size_t(64) << 20;
  std::unique_ptr<ManagedCopy<float>> device, a, b, c;
  float *host = nullptr;
};
} // namespace

TEST_F(CudaTransferTiming, ACopyWaitedForAtOnceIsWaitedForWhole) {
  double copied = loom::cudaStartedTransferSeconds();
  double waited = loom::cudaTransferWaitSeconds();
  loom::cudaTransferStart(host, device->at, kCopyElements * sizeof(float),
                          /*toHost=*/true);
  loom::cudaTransferWait(host);
  ASSERT_TRUE(loom::cudaSynchronize()) << loom_last_error();
  loom::cudaTransfersWaitAll();
  copied = loom::cudaStartedTransferSeconds() - copied;
  waited = loom::cudaTransferWaitSeconds() - waited;
  EXPECT_GT(copied, 1e-3) << "256 MiB take more than a millisecond";
  EXPECT_GT(waited, 0.5 * copied);
  EXPECT_LT(waited, copied + 1e-3);
}

TEST_F(CudaTransferTiming, ACopyBehindLongerWorkIsHidden) {
  double copied = loom::cudaStartedTransferSeconds();
  double waited = loom::cudaTransferWaitSeconds();
  loom::cudaTransferStart(host, device->at, kCopyElements * sizeof(float),
                          /*toHost=*/true);
  // Far longer than the copy, queued after it on the step's stream.
  ASSERT_NO_FATAL_FAILURE(queueWork(200));
  loom::cudaTransferWait(host);
  ASSERT_TRUE(loom::cudaSynchronize()) << loom_last_error();
  loom::cudaTransfersWaitAll();
  copied = loom::cudaStartedTransferSeconds() - copied;
  waited = loom::cudaTransferWaitSeconds() - waited;
  EXPECT_GT(copied, 1e-3);
  EXPECT_LT(waited, 0.1 * copied) << "the GEMMs hide the copy";
}
