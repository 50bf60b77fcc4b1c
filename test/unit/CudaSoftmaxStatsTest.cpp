//===- CudaSoftmaxStatsTest.cpp - The softmax statistics' GPU kernels -----===//
//
// loom_rt_softmax_stats on a GPU against the statistics in double
// (SoftmaxStatsReference.h), with the logits in managed memory (rows that
// start on 16 bytes take the kernels' vector loads). Skipped without a GPU.
//
//===----------------------------------------------------------------------===//

#include "CudaManaged.h"
#include "SoftmaxStatsReference.h"
#include "loom/rt.h"

using namespace loom_test;

namespace {
class CudaSoftmaxStats : public CudaTest {};
} // namespace

TEST_F(CudaSoftmaxStats, MatchDouble) {
  checkSoftmaxCases([](const SoftmaxCase &c, const SoftmaxProblem &p,
                       std::vector<float> &max, std::vector<float> &sum) {
    ManagedCopy<uint8_t> logits(p.stored);
    ManagedCopy<float> maxOut(c.rows), sumOut(c.rows);
    if (!logits.at || !maxOut.at || !sumOut.at) {
      ADD_FAILURE() << "no managed memory: " << loom_last_error();
      return;
    }
    loom_rt_softmax_stats(p.dtype, c.rows, c.columns, c.classes, logits.at,
                          maxOut.at, sumOut.at);
    if (!loom::cudaSynchronize()) {
      ADD_FAILURE() << "the kernels failed: " << loom_last_error();
      return;
    }
    std::memcpy(max.data(), maxOut.at, c.rows * sizeof(float));
    std::memcpy(sum.data(), sumOut.at, c.rows * sizeof(float));
  });
}
