//===- CudaWaitTest.cpp - Waiting for the GPU while messages move ---------===//
//
// A rank waiting for its GPU may hold messages MPI moves on only inside its
// calls; the rank receiving them may be what the GPU's queued work (an
// NCCL collective) waits for. So a wait calls the progress function
// cudaSetWaitProgress gives, for as long as it asks to be called and the
// GPU is busy, and then blocks; and it ends when the GPU is done, however
// often the function asks for more. Skipped without a GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaManaged.h"

#include <memory>

using namespace loom_test;

namespace {
class CudaWait : public CudaTest {
protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (!IsSkipped() && !loom::cudaRunsAhead())
      GTEST_SKIP() << "this GPU's work is waited for as it is queued";
  }
  void TearDown() override { loom::cudaSetWaitProgress(nullptr); }

  /// Queues a few milliseconds of GEMMs: far longer than the host takes to
  /// reach the wait.
  void queueWork() {
    constexpr int64_t kN = 2048;
    for (auto *buffer : {&a, &b, &c})
      buffer->reset(new ManagedCopy<float>(kN * kN));
    ASSERT_TRUE(a->at && b->at && c->at) << loom_last_error();
    for (int i = 0; i < 8; ++i)
      loom::cudaGemm(LOOM_DTYPE_F32, 0, 0, kN, kN, kN, 1.0f, a->at, kN, b->at,
                     kN, 0.0f, c->at, kN);
  }
  std::unique_ptr<ManagedCopy<float>> a, b, c;
};

int calls = 0, callsWanted = 0;
bool countCalls() { return ++calls < callsWanted; }
} // namespace

TEST_F(CudaWait, ProgressIsCalledUntilItHasNothingLeft) {
  loom::cudaSetWaitProgress(countCalls);
  calls = 0;
  callsWanted = 3;
  ASSERT_NO_FATAL_FAILURE(queueWork());
  loom::cudaWait();
  EXPECT_EQ(calls, 3) << "called until it returned false, then no more";
  EXPECT_TRUE(loom::cudaSynchronize()) << loom_last_error();
}

TEST_F(CudaWait, EndsWhenTheGpuIsDone) {
  loom::cudaSetWaitProgress(countCalls);
  calls = 0;
  callsWanted = 1 << 30;
  ASSERT_NO_FATAL_FAILURE(queueWork());
  EXPECT_TRUE(loom::cudaSynchronize()) << loom_last_error();
  EXPECT_GE(calls, 1);
  EXPECT_LT(calls, callsWanted);
  // Nothing queued since: no wait, no call.
  int before = calls;
  loom::cudaWait();
  EXPECT_EQ(calls, before);
}
