//===- RunDir.cpp - A run directory's periodic checkpoints ----------------===//

#include "RunDir.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace loom;

namespace {
constexpr const char *kPositionFile = "position";
constexpr const char *kPositionHeader = "loom-run checkpoint 1";

std::string stepName(long long step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld", step);
  return name;
}

bool isDirectory(const std::string &path) {
  struct stat status;
  return ::stat(path.c_str(), &status) == 0 && S_ISDIR(status.st_mode);
}

bool exists(const std::string &path) {
  struct stat status;
  return ::lstat(path.c_str(), &status) == 0;
}

/// The step of a complete checkpoint's directory name (`step-` and digits
/// only), or -1: partial and replaced ones start with a dot.
long long stepOf(const char *name) {
  if (std::strncmp(name, "step-", 5) != 0 || !name[5])
    return -1;
  long long step = 0;
  for (const char *c = name + 5; *c; ++c) {
    if (*c < '0' || *c > '9' || step > (1LL << 50))
      return -1;
    step = step * 10 + (*c - '0');
  }
  return step;
}

/// The names in `dir`; false with `error` set when it cannot be read.
bool listDirectory(const std::string &dir, std::vector<std::string> &names,
                   std::string &error) {
  DIR *d = ::opendir(dir.c_str());
  if (!d) {
    error = dir + ": cannot read the run directory: " + std::strerror(errno);
    return false;
  }
  while (dirent *entry = ::readdir(d))
    names.emplace_back(entry->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return true;
}

int removeEntry(const char *path, const struct stat *, int, struct FTW *) {
  return ::remove(path);
}

/// Removes a checkpoint directory and what it holds.
std::string removeTree(const std::string &path) {
  if (!exists(path))
    return "";
  if (::nftw(path.c_str(), removeEntry, 8, FTW_DEPTH | FTW_PHYS) != 0)
    return path + ": cannot remove: " + std::strerror(errno);
  return "";
}

/// Flushes a file or directory to the disk, so that the rename that
/// publishes a checkpoint never lands before its contents.
std::string syncPath(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return path + ": cannot open: " + std::strerror(errno);
  int rc = ::fsync(fd);
  int savedErrno = errno;
  ::close(fd);
  // A device written directly (--save /dev/null) has nothing to flush.
  if (rc != 0 && savedErrno != EINVAL && savedErrno != EROFS)
    return path + ": cannot flush to the disk: " + std::strerror(savedErrno);
  return "";
}

/// Whether a complete step directory holds every file of a checkpoint.
bool holdsCheckpoint(const std::string &dir) {
  for (const char *file :
       {RunDir::modelFile(), RunDir::optimizerFile(), kPositionFile})
    if (!exists(dir + "/" + file))
      return false;
  return true;
}
} // namespace

std::string RunDir::partialPath(long long step) const {
  return path + "/." + stepName(step) + ".partial";
}

std::string RunDir::stepPath(long long step) const {
  return path + "/" + stepName(step);
}

std::string RunDir::create() const {
  if (isDirectory(path))
    return "";
  if (exists(path))
    return path + " (--out): is not a directory";
  if (::mkdir(path.c_str(), 0777) != 0)
    return path +
           " (--out): cannot create the run directory: " + std::strerror(errno);
  return "";
}

std::string RunDir::newest(long long &step) const {
  if (!isDirectory(path))
    return path + " (--resume): no such run directory";
  std::vector<std::string> names;
  std::string error;
  if (!listDirectory(path, names, error))
    return error;
  step = -1;
  for (const std::string &name : names) {
    long long s = stepOf(name.c_str());
    if (s > step && holdsCheckpoint(path + "/" + name))
      step = s;
  }
  if (step < 0)
    return path +
           " (--resume): no checkpoint to resume from: no complete "
           "step-NNNNNNNN directory (loom-run --out " +
           path + " --save-every N writes them)";
  return "";
}

std::string RunDir::readPosition(long long step, RunPosition &position) const {
  std::string file = stepPath(step) + "/" + kPositionFile;
  FILE *f = std::fopen(file.c_str(), "r");
  if (!f)
    return file + ": cannot open: " + std::strerror(errno);
  char header[64] = "";
  bool ok = std::fgets(header, sizeof(header), f) &&
            std::strncmp(header, kPositionHeader,
                         std::strlen(kPositionHeader)) == 0 &&
            std::fscanf(f,
                        "step %lld\nsequences %lld\ndata_seed %lld\nlast_step "
                        "%lld\n",
                        &position.step, &position.sequences, &position.dataSeed,
                        &position.lastStep) == 4;
  std::fclose(f);
  if (!ok || position.step != step || position.sequences < 0 ||
      position.lastStep < 0)
    return file + ": not a loom-run checkpoint position of step " +
           std::to_string(step) + " (expected '" + kPositionHeader +
           "', then step, sequences, data_seed and last_step lines)";
  return "";
}

std::string RunDir::begin(long long step) const {
  std::string partial = partialPath(step);
  if (std::string error = removeTree(partial); !error.empty())
    return error;
  if (::mkdir(partial.c_str(), 0777) != 0)
    return partial + ": cannot create: " + std::strerror(errno);
  return "";
}

std::string RunDir::commit(const RunPosition &position, long long keep) const {
  std::string partial = partialPath(position.step);
  std::string file = partial + "/" + kPositionFile;
  FILE *f = std::fopen(file.c_str(), "w");
  if (!f)
    return file + ": cannot write: " + std::strerror(errno);
  std::fprintf(f,
               "%s\nstep %lld\nsequences %lld\ndata_seed %lld\nlast_step "
               "%lld\n",
               kPositionHeader, position.step, position.sequences,
               position.dataSeed, position.lastStep);
  if (std::fclose(f) != 0)
    return file + ": cannot write: " + std::strerror(errno);
  for (const std::string &written :
       {partial + "/" + modelFile(), partial + "/" + optimizerFile(), file,
        partial})
    if (std::string error = syncPath(written); !error.empty())
      return error;
  // A checkpoint of the same step (a run resumed from an earlier one) is
  // moved aside first: rename cannot replace a directory that holds files.
  std::string target = stepPath(position.step);
  std::string replaced = path + "/." + stepName(position.step) + ".replaced";
  if (isDirectory(target)) {
    if (std::string error = removeTree(replaced); !error.empty())
      return error;
    if (::rename(target.c_str(), replaced.c_str()) != 0)
      return target + ": cannot move aside: " + std::strerror(errno);
  }
  if (::rename(partial.c_str(), target.c_str()) != 0)
    return partial + ": cannot rename to " + target + ": " +
           std::strerror(errno);
  if (std::string error = syncPath(path); !error.empty())
    return error;
  // The newest `keep`, and no leftovers of checkpoints a killed run was
  // writing.
  std::vector<std::string> names;
  std::string error;
  if (!listDirectory(path, names, error))
    return error;
  std::vector<std::string> complete, stale;
  for (const std::string &name : names) {
    if (stepOf(name.c_str()) >= 0)
      complete.push_back(name);
    else if (name.rfind(".step-", 0) == 0)
      stale.push_back(name);
  }
  std::sort(complete.begin(), complete.end(),
            [](const std::string &a, const std::string &b) {
              return stepOf(a.c_str()) < stepOf(b.c_str());
            });
  if (static_cast<long long>(complete.size()) > keep)
    stale.insert(stale.end(), complete.begin(), complete.end() - keep);
  for (const std::string &name : stale)
    if (std::string error = removeTree(path + "/" + name); !error.empty())
      return error;
  return "";
}
