//===- JobFiles.h - Files one rank of a job writes for all -----*- C++ -*-===//
//
// What checkpoints, exports and traces share: rank 0 does a file's work,
// every rank learns its outcome, and a file is written through a temporary
// renamed over it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_JOBFILES_H
#define LOOM_RUNTIME_JOBFILES_H

#include "loom/runtime.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

namespace loom {
/// Whether this process is rank 0 of its job (or in no job).
bool isFirstRank();
/// The job's communicator when it has several ranks, else null.
loom_comm *jobComm();
/// Rank 0's outcome of work only it did, on every rank: 0 on success. The
/// others report that rank 0 failed; rank 0 has the reason.
int shareOutcome(int failed, const char *what, const char *path);
/// Gives every rank rank 0's `values` (`count` of them): the whole model
/// rank 0 read from a file. Nonzero, the error set, on a failed broadcast.
int broadcastFromFirstRank(std::vector<float> &values, int64_t count);
/// Writes `path` with `write(file)`, nonzero (the error set) on a failed
/// write; a regular file through a temporary renamed over it, a symbolic
/// link through to the file it names; a FIFO or socket is refused.
int writeFile(const char *path, const std::function<bool(FILE *)> &write);
} // namespace loom

#endif // LOOM_RUNTIME_JOBFILES_H
