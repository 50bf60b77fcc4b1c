//===- Error.cpp - The runtime's error reporting --------------------------===//

#include "Error.h"
#include "loom/runtime.h"

#include <cstdarg>
#include <cstdio>

static thread_local char lastError[1024];

bool loom::setError(const char *format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(lastError, sizeof(lastError), format, args);
  va_end(args);
  return false;
}

extern "C" const char *loom_last_error(void) { return lastError; }
