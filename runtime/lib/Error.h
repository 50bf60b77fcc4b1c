//===- Error.h - The runtime's error reporting ------------------*- C++ -*-===//

#ifndef LOOM_RUNTIME_ERROR_H
#define LOOM_RUNTIME_ERROR_H

namespace loom {
/// Records a printf-formatted message for loom_last_error(); returns false
/// so that failures read `return setError(...)`.
bool setError(const char *format, ...) __attribute__((format(printf, 1, 2)));

/// Checks that `path` names a regular file, which the runtime reads whole:
/// a directory fails the read midway, and a device (/dev/zero) never ends.
bool checkRegularFile(const char *path);
} // namespace loom

#endif // LOOM_RUNTIME_ERROR_H
