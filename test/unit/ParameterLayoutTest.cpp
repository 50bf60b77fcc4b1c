//===- ParameterLayoutTest.cpp - Where a rank's part lies in the whole ----===//
//
// loom::Param::forEachRun places each element of a rank's part of a
// parameter in the whole tensor, as the compiler's loom.tp_split and
// loom.shard divided it. Over the ranks, the parts must hold every element
// of the whole, and the runs a gathered whole takes (ownedOnly) each
// element exactly once: for blocks divided among all ranks, and for blocks
// shared by teams of ranks (replicated key/value heads), whose shared rows
// every rank of the team holds and the first gives.
//
//===----------------------------------------------------------------------===//

#include "Model.h"

#include "gtest/gtest.h"

#include <vector>

using loom::Param;
using loom::TpSplit;

namespace {
/// A stacked parameter of `layers` x `rows` x `inner` elements whole,
/// divided by `split` among `tp` ranks (and ZeRO-3 along `shard` among
/// `dp`); each rank's part then holds the whole's element indices, which
/// the test checks against the runs.
struct Layout {
  int64_t layers, rows, inner, tp, dp = 1, shard = -1;
  TpSplit split = {};

  Param part(int64_t partRows) const {
    Param p;
    p.shape = {layers, rows, inner};
    p.size = layers * rows * inner;
    p.part = {layers, partRows, inner};
    p.dpShape = p.part;
    p.shard = shard;
    p.tpSplit = split;
    p.localSize = layers * partRows * inner / dp;
    return p;
  }

  /// How often each element of the whole is visited over all ranks.
  std::vector<int> visits(int64_t partRows, bool ownedOnly) const {
    std::vector<int> seen(layers * rows * inner, 0);
    Param p = part(partRows);
    for (int64_t t = 0; t < tp; ++t)
      for (int64_t d = 0; d < dp; ++d)
        p.forEachRun(
            dp, d, tp, t,
            [&](int64_t local, int64_t at, int64_t count) {
              EXPECT_GE(local, 0);
              EXPECT_LE(local + count, p.localSize);
              for (int64_t i = 0; i < count; ++i)
                ++seen[at + i];
            },
            ownedOnly);
    return seen;
  }
};

int count(const std::vector<int> &seen, int times) {
  int n = 0;
  for (int s : seen)
    n += s == times;
  return n;
}
} // namespace

TEST(ParameterLayout, BlocksDividedAmongAllRanks) {
  // GPT-2's fused projection: 3 blocks (queries, keys, values) of 8 rows.
  Layout layout{2, 24, 4, /*tp=*/4};
  layout.split = TpSplit{1, 3, 0};
  EXPECT_EQ(layout.split.wholeExtent(6, 4), 24);
  std::vector<int> seen = layout.visits(6, /*ownedOnly=*/true);
  EXPECT_EQ(count(seen, 1), static_cast<int>(seen.size()));
}

TEST(ParameterLayout, BlocksSharedByTeams) {
  // 2 key/value groups of 4 query heads, head width 2, over 4 ranks: teams
  // of 2 ranks, each holding 2 query heads (4 rows) and the group's key and
  // value (4 shared rows) of a group's 12.
  TpSplit split{1, 2, 4};
  EXPECT_EQ(split.wholeExtent(8, 4), 24);
  EXPECT_EQ(split.wholeExtent(8, 2), 0) << "one rank a team shares nothing";
  EXPECT_EQ(split.wholeExtent(8, 3), 0) << "3 ranks in 2 teams";
  // Rank 3 (team 1, second rank): its query rows 4..7 of the second group,
  // then the group's key and value, which rank 2 gives.
  EXPECT_EQ(split.wholeRow(0, 8, 4, 3), std::make_pair(int64_t{16}, true));
  EXPECT_EQ(split.wholeRow(4, 8, 4, 3), std::make_pair(int64_t{20}, false));
  EXPECT_EQ(split.wholeRow(4, 8, 4, 2), std::make_pair(int64_t{20}, true));

  Layout layout{2, 24, 3, /*tp=*/4};
  layout.split = split;
  std::vector<int> owned = layout.visits(8, /*ownedOnly=*/true);
  EXPECT_EQ(count(owned, 1), static_cast<int>(owned.size()));
  // Every rank reads its part whole: the shared rows twice over a team.
  std::vector<int> all = layout.visits(8, /*ownedOnly=*/false);
  EXPECT_EQ(count(all, 2), 2 * 2 * 4 * 3);
  EXPECT_EQ(count(all, 1), static_cast<int>(all.size()) - 2 * 2 * 4 * 3);
}

TEST(ParameterLayout, SharedBlocksUnderZeroShards) {
  // The same part further divided by ZeRO along the layers.
  Layout layout{4, 24, 3, /*tp=*/4, /*dp=*/2, /*shard=*/0};
  layout.split = TpSplit{1, 2, 4};
  std::vector<int> owned = layout.visits(8, /*ownedOnly=*/true);
  EXPECT_EQ(count(owned, 1), static_cast<int>(owned.size()));
}
