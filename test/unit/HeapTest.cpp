//===- HeapTest.cpp - The generated code's heap ---------------------------===//

#include "loom/rt.h"
#include "loom/runtime.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace {
/// Buffers come at the alignment asked for (at least a cache line's), the
/// large ones too, which kernels are told they have; freed ones are kept
/// and handed out again for the same size and alignment, and given back.
TEST(RuntimeHeap, AlignmentAskedFor) {
  for (size_t alignment : {1, 64, 256, 4096, 65536}) {
    SCOPED_TRACE(alignment);
    void *p = _mlir_memref_to_llvm_aligned_alloc(alignment, 1000);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % std::max<size_t>(alignment, 64),
              0u);
    std::memset(p, 1, 1000);
    _mlir_memref_to_llvm_free(p);
    EXPECT_EQ(_mlir_memref_to_llvm_aligned_alloc(alignment, 1000), p);
    _mlir_memref_to_llvm_free(p);
  }
  loom_release_cached_memory();
}
} // namespace
