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
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

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

/// The file a path names for writing: a symbolic link's target, followed
/// to the end of a chain (relative targets from the link's directory),
/// whether or not that file exists yet; false when the chain loops.
static bool followLinks(const std::string &path, std::string &target) {
  target = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat status;
    if (::lstat(target.c_str(), &status) != 0 || !S_ISLNK(status.st_mode))
      return true;
    std::vector<char> buffer(static_cast<size_t>(status.st_size) + 256);
    ssize_t n = ::readlink(target.c_str(), buffer.data(), buffer.size() - 1);
    if (n < 0)
      return true;
    std::string link(buffer.data(), static_cast<size_t>(n));
    size_t slash = target.find_last_of('/');
    if (link.front() != '/' && slash != std::string::npos)
      link = target.substr(0, slash + 1) + link;
    target = link;
  }
  return false;
}

/// Writes `path` with `write(file)`, false on a failed write. A regular
/// file (or a missing one) is written as `<path>.partial` and renamed over
/// it once complete, so that a failure never leaves a partial file and
/// keeps the previous one; a symbolic link is written through, the file it
/// names replaced so. A device (/dev/null) is written directly: renaming
/// would replace it. A FIFO or a socket is refused: opening one waits for
/// a reader, maybe forever.
int loom::writeFile(const char *path,
                    const std::function<bool(FILE *)> &write) {
  std::string file;
  if (!followLinks(path, file))
    return !setError("%s: cannot write: a loop of symbolic links", path);
  struct stat status;
  bool exists = ::stat(file.c_str(), &status) == 0;
  if (exists && (S_ISFIFO(status.st_mode) || S_ISSOCK(status.st_mode)))
    return !setError("%s: is a %s, whose opening would wait for a reader: "
                     "give a regular file",
                     path, S_ISFIFO(status.st_mode) ? "FIFO" : "socket");
  bool direct = exists && !S_ISREG(status.st_mode);
  std::string target = direct ? file : file + ".partial";
  FILE *out = std::fopen(target.c_str(), "wb");
  if (!out)
    return !setError("%s: cannot write%s: %s", path,
                     direct ? "" : (" (as " + target + ")").c_str(),
                     std::strerror(errno));
  bool ok = write(out);
  ok &= std::fclose(out) == 0;
  if (ok && (direct || std::rename(target.c_str(), file.c_str()) == 0))
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
