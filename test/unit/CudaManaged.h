//===- CudaManaged.h - GPU tests' fixture and managed memory ----*- C++ -*-===//
//-*-===//

#ifndef LOOM_TEST_UNIT_CUDAMANAGED_H
#define LOOM_TEST_UNIT_CUDAMANAGED_H

#include "Device.h"

#include "gtest/gtest.h"

#include <cstring>
#include <vector>

namespace loom_test {
/// The GPU tests' fixture: without a GPU, or in a runtime built without
/// CUDA, each test is skipped (lit counts it skipped, never passed).
class CudaTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!loom::useCuda("sm_80"))
      GTEST_SKIP() << loom_last_error();
  }
};

/// Managed memory holding a copy of `from`, or of `count` poisoned
/// elements.
template <typename T> struct ManagedCopy {
  ManagedCopy(const std::vector<T> &from)
      : count(from.size()),
        at(static_cast<T *>(loom::cudaAllocate(count * sizeof(T)))) {
    if (at)
      std::memcpy(at, from.data(), count * sizeof(T));
  }
  explicit ManagedCopy(size_t count)
      : count(count),
        at(static_cast<T *>(loom::cudaAllocate(count * sizeof(T)))) {
    if (at)
      std::memset(at, 0xff, count * sizeof(T));
  }
  ~ManagedCopy() { loom::cudaFree(at); }
  ManagedCopy(const ManagedCopy &) = delete;
  ManagedCopy &operator=(const ManagedCopy &) = delete;
  size_t count;
  T *at;
};
} // namespace loom_test

#endif // LOOM_TEST_UNIT_CUDAMANAGED_H
