//===- JobFiles.cpp - Files one rank of a job writes for all -------------===//
//
// JobFiles.h's helpers.
//
//===----------------------------------------------------------------------===//

#include "JobFiles.h"
#include "Dist.h"
#include "Error.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/stat.h>

/// Whether this process is rank 0 of its job (or in no job).
bool loom::isFirstRank() {
  const loom_dist_info *dist = loom_dist_get_info();
  return !dist || dist->rank == 0;
}

/// The job's communicator when it has several ranks, else null.
loom_comm *loom::jobComm() {
  loom_comm *world = loom_dist_group(LOOM_GROUP_WORLD);
  return world && loom_comm_size(world) > 1 ? world : nullptr;
}

/// Rank 0's outcome of work only it did, on every rank: 0 on success. The
/// others report that rank 0 failed; rank 0 has the reason.
int loom::shareOutcome(int failed, const char *what, const char *path) {
  loom_comm *world = jobComm();
  if (!world)
    return failed;
  float flag = failed ? 1.0f : 0.0f;
  if (loom_rt_broadcast(world, LOOM_DTYPE_F32, &flag, 1, 0))
    return 1;
  if (flag != 0 && !failed)
    return !setError("%s: rank 0 could not %s it (rank 0 says why)", path,
                     what);
  return flag != 0;
}

/// Writes `path` with `write(file)`, false on a failed write. A regular
/// file (or a missing one) is written as `<path>.partial` and renamed over
/// it once complete, so that a failure never leaves a partial file and
/// keeps the previous one; anything else that exists (/dev/null, a pipe) is
/// written directly: renaming would replace it.
int loom::writeFile(const char *path,
                    const std::function<bool(FILE *)> &write) {
  struct stat status;
  bool direct = ::stat(path, &status) == 0 && !S_ISREG(status.st_mode);
  std::string target =
      direct ? std::string(path) : std::string(path) + ".partial";
  FILE *file = std::fopen(target.c_str(), "wb");
  if (!file)
    return !setError("%s: cannot write%s: %s", path,
                     direct ? "" : (" (as " + target + ")").c_str(),
                     std::strerror(errno));
  bool ok = write(file);
  ok &= std::fclose(file) == 0;
  if (ok && (direct || std::rename(target.c_str(), path) == 0))
    return 0;
  int error = errno;
  if (!direct)
    std::remove(target.c_str());
  return !setError("%s: cannot write (as %s): %s", path, target.c_str(),
                   std::strerror(error));
}

int loom::broadcastFromFirstRank(std::vector<float> &values, int64_t count) {
  loom_comm *world = jobComm();
  if (!world)
    return 0;
  values.resize(count);
  for (int64_t done = 0; done < count;) {
    int64_t chunk = std::min<int64_t>(count - done, 1 << 30);
    if (loom_rt_broadcast(world, LOOM_DTYPE_F32, values.data() + done, chunk,
                          0))
      return 1;
    done += chunk;
  }
  return 0;
}
