//===- CudaNcclTest.cpp - NCCL's collectives on one GPU -------------------===//
//
// The NCCL side of the CUDA backend on a GPU of its own: a communicator of
// one rank (NCCL takes one rank per GPU, so one GPU makes no group of two),
// each collective in each storage type, out of place and in place, on
// managed memory as the step's buffers are. With one rank every collective
// hands its input back unchanged. Skipped without a GPU, and without
// NCCL (libnccl.so.2) or with LOOM_COMM=mpi, saying which.
//
//===----------------------------------------------------------------------===//

#include "CudaManaged.h"
#include "Float.h"
#include "Nccl.h"

#include <cstdlib>

using namespace loom_test;

namespace {
class CudaNccl : public CudaTest {};

struct Case {
  loom::NcclOp op;
  const char *name;
};
constexpr Case kCases[] = {{loom::NcclOp::Sum, "all-reduce sum"},
                           {loom::NcclOp::Max, "all-reduce max"},
                           {loom::NcclOp::AllGather, "all-gather"},
                           {loom::NcclOp::ReduceScatter, "reduce-scatter"},
                           {loom::NcclOp::Reduce, "reduce to rank 0"}};

/// `count` values of `dtype`'s storage, distinct and exact in each type.
std::vector<uint8_t> values(int32_t dtype, int64_t count) {
  size_t width = dtype == LOOM_DTYPE_F32 ? 4 : 2;
  std::vector<uint8_t> bytes(count * width);
  for (int64_t i = 0; i < count; ++i) {
    float v = static_cast<float>(i % 251) - 125.0f;
    if (dtype == LOOM_DTYPE_F32) {
      std::memcpy(&bytes[i * 4], &v, 4);
      continue;
    }
    uint16_t bits =
        dtype == LOOM_DTYPE_BF16 ? loom::narrowBf16(v) : loom::narrowHalf(v);
    std::memcpy(&bytes[i * 2], &bits, 2);
  }
  return bytes;
}
} // namespace

TEST_F(CudaNccl, OneRankGivesItsInputBack) {
  const char *choice = std::getenv("LOOM_COMM");
  if (choice && std::string(choice) == "mpi")
    GTEST_SKIP() << "LOOM_COMM=mpi: the collectives are MPI's";
  // Odd, and more than one of NCCL's chunks of a channel.
  constexpr int64_t kCount = 300007;
  for (int32_t dtype : {LOOM_DTYPE_F32, LOOM_DTYPE_BF16, LOOM_DTYPE_F16}) {
    std::vector<uint8_t> input = values(dtype, kCount);
    for (const Case &c : kCases) {
      SCOPED_TRACE(testing::Message() << c.name << ", dtype " << dtype);
      ManagedCopy<uint8_t> send(input), recv(input.size());
      ASSERT_TRUE(send.at && recv.at) << loom_last_error();
      int rc = loom::ncclCollectiveAlone(c.op, dtype, send.at, recv.at, kCount);
      if (rc < 0)
        GTEST_SKIP() << "NCCL does not run here (no libnccl.so.2; see the "
                        "runtime's message on stderr)";
      ASSERT_EQ(rc, 0) << loom_last_error();
      ASSERT_TRUE(loom::cudaSynchronize()) << loom_last_error();
      EXPECT_EQ(std::memcmp(recv.at, input.data(), input.size()), 0);
      EXPECT_EQ(std::memcmp(send.at, input.data(), input.size()), 0)
          << "the input changed";
      // In place, as the step reduces its gradients.
      rc = loom::ncclCollectiveAlone(c.op, dtype, send.at, send.at, kCount);
      ASSERT_EQ(rc, 0) << loom_last_error();
      ASSERT_TRUE(loom::cudaSynchronize()) << loom_last_error();
      EXPECT_EQ(std::memcmp(send.at, input.data(), input.size()), 0);
    }
  }
}

TEST_F(CudaNccl, OtherTypesAreMpis) {
  // A type NCCL is not given (integers): the caller's MPI runs it.
  ManagedCopy<uint8_t> buffer(16);
  ASSERT_TRUE(buffer.at) << loom_last_error();
  EXPECT_EQ(loom::ncclCollectiveAlone(loom::NcclOp::Sum, /*dtype=*/-1,
                                      buffer.at, buffer.at, 4),
            -1);
}
