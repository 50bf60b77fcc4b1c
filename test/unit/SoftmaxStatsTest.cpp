//===- SoftmaxStatsTest.cpp - The loss's softmax statistics on the CPU ----===//

#include "SoftmaxStatsReference.h"
#include "loom/rt.h"

using namespace loom_test;

TEST(SoftmaxStats, MatchDouble) {
  checkSoftmaxCases([](const SoftmaxCase &c, const SoftmaxProblem &p,
                       std::vector<float> &max, std::vector<float> &sum) {
    loom_rt_softmax_stats(p.dtype, c.rows, c.columns, c.classes,
                          p.stored.data(), max.data(), sum.data());
  });
}

// Classes outside [1, columns] leave NaN, not statistics of other columns.
TEST(SoftmaxStats, RefusesOtherClasses) {
  std::vector<float> logits(8, 1.0f);
  for (int64_t classes : {0, 5}) {
    std::vector<float> max(2, 0.0f), sum(2, 0.0f);
    loom_rt_softmax_stats(LOOM_DTYPE_F32, 2, 4, classes, logits.data(),
                          max.data(), sum.data());
    EXPECT_TRUE(std::isnan(max[0]) && std::isnan(sum[1])) << classes;
  }
}
