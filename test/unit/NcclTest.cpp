//===- NcclTest.cpp - The NCCL backend's checks before NCCL runs ----------===//

#include "Nccl.h"
#include "Device.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <string>

namespace {
using Ids = std::vector<std::string>;

/// NCCL takes one rank per GPU: two ranks on one GPU are named before
/// NCCL's own "invalid usage", the first pair in rank order; ranks whose
/// GPU is unknown (no CUDA backend) are never a pair, nor are two hosts'
/// GPUs at the same bus id.
TEST(RuntimeNccl, RanksSharingGpu) {
  EXPECT_FALSE(loom::ranksSharingGpu({}).has_value());
  EXPECT_FALSE(
      loom::ranksSharingGpu(Ids{"a GPU 0000:1A:00.0", "a GPU 0000:1B:00.0",
                                "b GPU 0000:1A:00.0", "b GPU 0000:1B:00.0"})
          .has_value());
  EXPECT_FALSE(loom::ranksSharingGpu(Ids{"", ""}).has_value());
  auto shared =
      loom::ranksSharingGpu(Ids{"a GPU 0000:1A:00.0", "a GPU 0000:1B:00.0",
                                "a GPU 0000:1B:00.0", "a GPU 0000:1A:00.0"});
  ASSERT_TRUE(shared.has_value());
  EXPECT_EQ(shared->first, 1);
  EXPECT_EQ(shared->second, 2);
}

/// A GPU's id names its host as NCCL does: by NCCL_HOSTID where it is set,
/// even empty, as far as NCCL reads it, so that ranks NCCL takes for hosts
/// of their own may share a GPU, and hosts it takes for one may not share
/// a bus id.
TEST(RuntimeNccl, RankGpuIdNamesTheHostAsNcclDoes) {
  const char *saved = std::getenv("NCCL_HOSTID");
  std::string restore = saved ? saved : "";
  unsetenv("NCCL_HOSTID");
  EXPECT_EQ(loom::rankGpuId("node1", "0000:1A:00.0"), "node1 GPU 0000:1A:00.0");
  EXPECT_EQ(loom::rankGpuId("node1", ""), "");
  setenv("NCCL_HOSTID", "", 1);
  EXPECT_EQ(loom::rankGpuId("node1", "0000:1A:00.0"), " GPU 0000:1A:00.0");
  // Two ids NCCL reads alike, past its 1023 bytes, are one host.
  std::string longId(loom::kNcclHostBytes - 1, 'h');
  setenv("NCCL_HOSTID", (longId + "-rank-0").c_str(), 1);
  std::string first = loom::rankGpuId("node1", "0000:1A:00.0");
  setenv("NCCL_HOSTID", (longId + "-rank-1").c_str(), 1);
  EXPECT_EQ(loom::rankGpuId("node1", "0000:1A:00.0"), first);
  EXPECT_EQ(first, longId + " GPU 0000:1A:00.0");
  setenv("NCCL_HOSTID", "rank-1", 1);
  EXPECT_EQ(loom::rankGpuId("node1", "0000:1A:00.0"),
            "rank-1 GPU 0000:1A:00.0");
  EXPECT_EQ(loom::rankGpuId("node1", ""), "");
  if (saved)
    setenv("NCCL_HOSTID", restore.c_str(), 1);
  else
    unsetenv("NCCL_HOSTID");
}

/// Without the CUDA backend (this process never started it), NCCL runs
/// nothing: every collective is left to MPI.
TEST(RuntimeNccl, NothingWithoutTheCudaBackend) {
  float value = 1.0f;
  EXPECT_EQ(loom::ncclCollectiveAlone(loom::NcclOp::Sum, LOOM_DTYPE_F32, &value,
                                      &value, 1),
            -1);
  EXPECT_EQ(loom::ncclCollective(MPI_COMM_NULL, 2, 0, "dp", loom::NcclOp::Sum,
                                 LOOM_DTYPE_F32, &value, &value, 1),
            -1);
}
} // namespace
