//===- Error.cpp - The runtime's error reporting --------------------------===//

#include "Error.h"
#include "loom/runtime.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

static thread_local char lastError[1024];

bool loom::setError(const char *format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(lastError, sizeof(lastError), format, args);
  va_end(args);
  return false;
}

bool loom::checkRegularFile(const char *path) {
  struct stat status;
  if (stat(path, &status) != 0)
    return setError("%s: cannot open: %s", path, std::strerror(errno));
  if (S_ISDIR(status.st_mode))
    return setError("%s: is a directory, not a file", path);
  if (!S_ISREG(status.st_mode))
    return setError("%s: not a regular file", path);
  return true;
}

extern "C" const char *loom_last_error(void) { return lastError; }
