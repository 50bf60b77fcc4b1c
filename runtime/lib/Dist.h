//===- Dist.h - The distributed context, inside the runtime -----*- C++ -*-===//

#ifndef LOOM_RUNTIME_DIST_H
#define LOOM_RUNTIME_DIST_H

#include <string>
#include <vector>

namespace loom {
/// Every rank's `mine`, in rank order, into `all` on rank 0 (all = {mine}
/// in a job of one rank); every rank of the job calls it. False, with the
/// error set, when the ranks could not communicate.
bool gatherToFirst(const std::string &mine, std::vector<std::string> &all);
} // namespace loom

#endif // LOOM_RUNTIME_DIST_H
