/*===- splitmix.h - The runtime's pseudo-random stream ------------*- C -*-===//
 *
 * splitmix64 (Steele, Lea and Flood, 2014): small, fast, and independent
 * enough across seeds to shuffle data by (loom_loader) and to draw samples
 * with (loom-run). Header-only, so that tools draw the same numbers.
 *
 *===----------------------------------------------------------------------===*/

#ifndef LOOM_SPLITMIX_H
#define LOOM_SPLITMIX_H

#include <stdint.h>

/* The next number of the stream `*state` holds, which it advances. */
static inline uint64_t loom_splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

#endif /* LOOM_SPLITMIX_H */
