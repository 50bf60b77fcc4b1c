//===- loom-comm-check.cpp - Checks of the runtime's communication --------===//
//
//   [mpirun -np N] loom-comm-check PP DP TP
//
// Lays the job on the grid PP x DP x TP through the runtime's C API and runs
// every collective on every group with data whose result is known in closed
// form. Rank 0 prints one line per check with the number of ranks on which
// it failed; the exit status is 0 when every check held on every rank, 1
// when one failed, 2 when the job could not be set up (every rank prints
// why).
//
//===----------------------------------------------------------------------===//

#include "loom/runtime.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {
constexpr int64_t kCount = 1000;

struct Checker {
  int64_t rank = 0;
  loom_comm *world = nullptr;
  int failures = 0;

  /// Counts the ranks on which `ok` is false and reports on rank 0.
  void report(const std::string &what, bool ok) {
    float failed = ok ? 0.0f : 1.0f;
    if (loom_rt_all_reduce(world, LOOM_DTYPE_F32, &failed, &failed, 1)) {
      std::fprintf(stderr, "loom-comm-check: rank %lld: %s\n",
                   static_cast<long long>(rank), loom_last_error());
      std::exit(2);
    }
    if (failed > 0)
      ++failures;
    if (rank == 0)
      std::printf(
          "%s: %s\n", what.c_str(),
          failed > 0
              ? ("FAILED on " + std::to_string(int(failed)) + " ranks").c_str()
              : "ok");
  }
};

bool equal(const std::vector<float> &got, const std::vector<float> &want) {
  return got == want;
}

/// Checks group `group`, whose rank j should be the job's rank
/// `member(j)`, and in which this rank should be `wantRank` of `wantSize`.
void checkGroup(Checker &check, const char *name, loom_group group,
                int64_t wantSize, int64_t wantRank,
                const std::function<int64_t(int64_t)> &member) {
  loom_comm *comm = loom_dist_group(group);
  std::string prefix = std::string(name) + " ";
  int64_t size = comm ? loom_comm_size(comm) : -1;
  int64_t r = comm ? loom_comm_rank(comm) : -1;
  check.report(prefix + "size and rank", size == wantSize && r == wantRank);
  if (size != wantSize || r != wantRank)
    return;

  // The members, by gathering the job's rank of each.
  float own = static_cast<float>(check.rank);
  std::vector<float> members(size), wantMembers(size);
  for (int64_t j = 0; j < size; ++j)
    wantMembers[j] = static_cast<float>(member(j));
  check.report(
      prefix + "members",
      !loom_rt_all_gather(comm, LOOM_DTYPE_F32, &own, members.data(), 1) &&
          equal(members, wantMembers));

  // All-reduce, apart and in place: rank r sends (r + 1) + i / 2.
  std::vector<float> send(kCount), recv(kCount, -1.0f), want(kCount);
  for (int64_t i = 0; i < kCount; ++i) {
    send[i] = static_cast<float>(r + 1) + 0.5f * static_cast<float>(i);
    want[i] = static_cast<float>(size * (size + 1) / 2) +
              0.5f * static_cast<float>(size * i);
  }
  bool ok = !loom_rt_all_reduce(comm, LOOM_DTYPE_F32, send.data(), recv.data(),
                                kCount) &&
            equal(recv, want);
  ok = ok &&
       !loom_rt_all_reduce(comm, LOOM_DTYPE_F32, send.data(), send.data(),
                           kCount) &&
       equal(send, want);
  check.report(prefix + "all-reduce", ok);

  // Reduce-scatter: slice j of rank r's input is (r + 1) * (j + 1) + i.
  std::vector<float> all(size * kCount);
  for (int64_t j = 0; j < size; ++j)
    for (int64_t i = 0; i < kCount; ++i)
      all[j * kCount + i] = static_cast<float>((r + 1) * (j + 1) + i);
  for (int64_t i = 0; i < kCount; ++i)
    want[i] = static_cast<float>((r + 1) * size * (size + 1) / 2 + size * i);
  ok = !loom_rt_reduce_scatter(comm, LOOM_DTYPE_F32, all.data(), recv.data(),
                               kCount) &&
       equal(recv, want);
  check.report(prefix + "reduce-scatter", ok);

  // Reduce onto each end of the group, in place: the root's buffer is the
  // sum, every other rank's is left as it was.
  for (int64_t root : {int64_t(0), size - 1}) {
    std::vector<float> mine(kCount);
    for (int64_t i = 0; i < kCount; ++i) {
      mine[i] = static_cast<float>(r + 1) + 0.25f * static_cast<float>(i);
      want[i] = r == root ? static_cast<float>(size * (size + 1) / 2) +
                                0.25f * static_cast<float>(size * i)
                          : mine[i];
    }
    ok = !loom_rt_reduce(comm, LOOM_DTYPE_F32, mine.data(), mine.data(), kCount,
                         root) &&
         equal(mine, want);
    check.report(prefix + "reduce to " + std::to_string(root), ok);
  }

  // All-gather, f32 and bf16 (16-bit words moved as they are).
  for (int64_t i = 0; i < kCount; ++i)
    send[i] = static_cast<float>(r * 1000 + i);
  std::vector<float> gathered(size * kCount), wantAll(size * kCount);
  for (int64_t j = 0; j < size; ++j)
    for (int64_t i = 0; i < kCount; ++i)
      wantAll[j * kCount + i] = static_cast<float>(j * 1000 + i);
  ok = !loom_rt_all_gather(comm, LOOM_DTYPE_F32, send.data(), gathered.data(),
                           kCount) &&
       equal(gathered, wantAll);
  std::vector<uint16_t> words(kCount), gatheredWords(size * kCount);
  for (int64_t i = 0; i < kCount; ++i)
    words[i] = static_cast<uint16_t>(r * 1000 + i);
  ok = ok && !loom_rt_all_gather(comm, LOOM_DTYPE_BF16, words.data(),
                                 gatheredWords.data(), kCount);
  for (int64_t j = 0; ok && j < size; ++j)
    for (int64_t i = 0; i < kCount; ++i)
      ok = ok && gatheredWords[j * kCount + i] == j * 1000 + i;
  check.report(prefix + "all-gather", ok);

  // Broadcast from the last rank.
  int64_t root = size - 1;
  for (int64_t i = 0; i < kCount; ++i) {
    send[i] = static_cast<float>(r * 7 + i);
    want[i] = static_cast<float>(root * 7 + i);
  }
  ok = !loom_rt_broadcast(comm, LOOM_DTYPE_F32, send.data(), kCount, root) &&
       equal(send, want);
  check.report(prefix + "broadcast", ok);

  // Send and receive between pairs (0, 1), (2, 3), ...; the even rank sends
  // first.
  if (size > 1) {
    int64_t peer = r ^ 1;
    bool paired = peer < size;
    for (int64_t i = 0; i < kCount; ++i) {
      send[i] = static_cast<float>(r * 100 + i);
      want[i] = static_cast<float>(peer * 100 + i);
    }
    ok = true;
    if (paired && r % 2 == 0)
      ok = !loom_rt_send(comm, LOOM_DTYPE_F32, send.data(), kCount, peer) &&
           !loom_rt_recv(comm, LOOM_DTYPE_F32, recv.data(), kCount, peer);
    else if (paired)
      ok = !loom_rt_recv(comm, LOOM_DTYPE_F32, recv.data(), kCount, peer) &&
           !loom_rt_send(comm, LOOM_DTYPE_F32, send.data(), kCount, peer);
    check.report(prefix + "send/recv", ok && (!paired || equal(recv, want)));
  }
}

/// Calls that must fail, with the message the runtime gives.
void checkRefusals(Checker &check) {
  loom_comm *world = loom_dist_group(LOOM_GROUP_WORLD);
  uint16_t word = 0;
  bool refused = loom_rt_all_reduce(world, LOOM_DTYPE_BF16, &word, &word, 1) &&
                 std::strstr(loom_last_error(), "sums are computed in f32");
  check.report("bf16 sum refused", refused);
  float value = 0;
  refused =
      loom_rt_send(world, LOOM_DTYPE_F32, &value, 1, loom_comm_rank(world)) &&
      std::strstr(loom_last_error(), "is not another rank");
  check.report("send to itself refused", refused);
  refused = loom_rt_reduce(world, LOOM_DTYPE_F32, &value, &value, 1,
                           loom_comm_size(world)) &&
            std::strstr(loom_last_error(), "is not a rank of the");
  check.report("reduce to a rank outside the group refused", refused);
}
} // namespace

int main(int argc, char **argv) {
  long long grid[3];
  for (int i = 0; i < 3; ++i)
    grid[i] = argc == 4 ? std::atoll(argv[i + 1]) : 0;
  if (argc != 4 || grid[0] < 1 || grid[1] < 1 || grid[2] < 1) {
    std::fprintf(stderr, "usage: [mpirun -np N] loom-comm-check PP DP TP\n");
    return 2;
  }
  if (loom_dist_init(grid[0], grid[1], grid[2])) {
    const loom_dist_info *info = loom_dist_get_info();
    std::fprintf(stderr, "loom-comm-check: rank %lld of %lld: %s\n",
                 static_cast<long long>(info ? info->rank : 0),
                 static_cast<long long>(info ? info->world_size : 1),
                 loom_last_error());
    loom_dist_finalize();
    return 2;
  }
  const loom_dist_info &info = *loom_dist_get_info();
  Checker check;
  check.rank = info.rank;
  check.world = loom_dist_group(LOOM_GROUP_WORLD);
  if (info.rank == 0)
    std::printf("grid pp x dp x tp = %lld x %lld x %lld on %lld ranks\n",
                grid[0], grid[1], grid[2],
                static_cast<long long>(info.world_size));
  // rank = (pp_rank * dp + dp_rank) * tp + tp_rank.
  auto at = [&](int64_t p, int64_t d, int64_t t) {
    return (p * info.dp + d) * info.tp + t;
  };
  checkGroup(check, "world", LOOM_GROUP_WORLD, info.world_size, info.rank,
             [](int64_t j) { return j; });
  checkGroup(check, "dp", LOOM_GROUP_DP, info.dp, info.dp_rank,
             [&](int64_t j) { return at(info.pp_rank, j, info.tp_rank); });
  checkGroup(check, "tp", LOOM_GROUP_TP, info.tp, info.tp_rank,
             [&](int64_t j) { return at(info.pp_rank, info.dp_rank, j); });
  checkGroup(check, "pp", LOOM_GROUP_PP, info.pp, info.pp_rank,
             [&](int64_t j) { return at(j, info.dp_rank, info.tp_rank); });
  checkRefusals(check);
  std::fflush(stdout);
  loom_dist_finalize();
  return check.failures ? 1 : 0;
}
