/* Preloaded into loom-run: OpenBLAS seems to have taken its generic
   Prescott kernels, as it does on a processor it does not know, unless
   OPENBLAS_CORETYPE says which to take. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

char *openblas_get_corename(void) {
  if (!getenv("OPENBLAS_CORETYPE"))
    return "Prescott";
  char *(*real)(void) =
      (char *(*)(void))dlsym(RTLD_NEXT, "openblas_get_corename");
  return real();
}
