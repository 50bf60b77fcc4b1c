//===- AttentionProducts.cpp - Small products in registers ----------------===//
//
// Compiled once per instruction set (runtime/CMakeLists.txt), with the
// vector's bytes and a tile's rows set for it; the namespace is the
// instruction set's, and everything else here has internal linkage, so
// that no function compiled for wider units than the CPU has is linked
// where another object expects it. A tile of C lives in registers: each
// step of the inner index loads a row of B and multiplies it by an element
// of A for each of the tile's rows.
//
//===----------------------------------------------------------------------===//

#include "AttentionProducts.h"

#if defined(__FMA__)
#include <immintrin.h>
#endif

#if !defined(LOOM_PRODUCTS_ISA) || !defined(LOOM_PRODUCTS_VECTOR_BYTES) ||     \
    !defined(LOOM_PRODUCTS_TILE_ROWS)
#error "built by runtime/CMakeLists.txt, once per instruction set"
#endif

namespace loom::attention::LOOM_PRODUCTS_ISA {
namespace {
typedef float Vector __attribute__((vector_size(LOOM_PRODUCTS_VECTOR_BYTES)));
constexpr int64_t kLanes = LOOM_PRODUCTS_VECTOR_BYTES / sizeof(float);
constexpr int kTileRows = LOOM_PRODUCTS_TILE_ROWS;
/// A tile's columns, in vectors.
constexpr int kTileVectors = 2;

inline int64_t least(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t most(int64_t a, int64_t b) { return a < b ? b : a; }

/// acc + a b: fused where the instruction set has it, in vectors and
/// alone alike, so that a column computed alone is a lane's.
inline Vector multiplyAdd(Vector acc, float a, Vector b) {
#if defined(__FMA__) && LOOM_PRODUCTS_VECTOR_BYTES == 64
  return _mm512_fmadd_ps(_mm512_set1_ps(a), b, acc);
#elif defined(__FMA__) && LOOM_PRODUCTS_VECTOR_BYTES == 32
  return _mm256_fmadd_ps(_mm256_set1_ps(a), b, acc);
#elif defined(__FMA__)
#error "no fused multiply-add for this vector's bytes"
#else
  return acc + a * b;
#endif
}
inline float multiplyAdd(float acc, float a, float b) {
#if defined(__FMA__)
  return __builtin_fmaf(a, b, acc);
#else
  return acc + a * b;
#endif
}

inline Vector load(const float *from) {
  Vector v;
  __builtin_memcpy(&v, from, sizeof(v));
  return v;
}
inline void store(float *to, Vector v) { __builtin_memcpy(to, &v, sizeof(v)); }

/// The terms [k0, k1) and columns [0, n) that rows [r0, r1) of C need.
struct Span {
  int64_t k0, k1, n;
};
Span span(const Product &p, int64_t r0, int64_t r1) {
  switch (p.causal) {
  case Causal::None:
    break;
  case Causal::Columns:
    return {0, p.k, least(p.n, p.diagonal + r1)};
  case Causal::Depth:
    return {0, least(p.k, p.diagonal + r1), p.n};
  case Causal::DepthFrom:
    return {least(p.k, most(0, r0 - p.diagonal)), p.k, p.n};
  }
  return {0, p.k, p.n};
}

template <bool TransA>
inline float elementA(const Product &p, int64_t row, int64_t k) {
  return TransA ? p.a[k * p.lda + row] : p.a[row * p.lda + k];
}

/// C's rows [r0, r0 + R) by columns [j, j + V * kLanes).
template <bool TransA, int R, int V>
void tile(const Product &p, int64_t r0, int64_t j, const Span &s) {
  Vector sums[R][V] = {};
  for (int64_t k = s.k0; k < s.k1; ++k) {
    Vector b[V];
    for (int v = 0; v < V; ++v)
      b[v] = load(p.b + k * p.ldb + j + v * kLanes);
    for (int r = 0; r < R; ++r) {
      float a = elementA<TransA>(p, r0 + r, k);
      for (int v = 0; v < V; ++v)
        sums[r][v] = multiplyAdd(sums[r][v], a, b[v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) {
      float *c = p.c + (r0 + r) * p.ldc + j + v * kLanes;
      Vector out = p.alpha * sums[r][v];
      store(c, p.accumulate ? load(c) + out : out);
    }
}

/// Column j of C's rows [r0, r0 + rows), as a vector's lane computes it.
template <bool TransA>
void column(const Product &p, int64_t r0, int rows, int64_t j, const Span &s) {
  for (int r = 0; r < rows; ++r) {
    float sum = 0.0f;
    for (int64_t k = s.k0; k < s.k1; ++k)
      sum =
          multiplyAdd(sum, elementA<TransA>(p, r0 + r, k), p.b[k * p.ldb + j]);
    float *c = p.c + (r0 + r) * p.ldc + j;
    float out = p.alpha * sum;
    *c = p.accumulate ? *c + out : out;
  }
}

/// C's rows [r0, r0 + R): tiles as wide as fit, then single vectors, then
/// columns one by one.
template <bool TransA, int R> void rowBlock(const Product &p, int64_t r0) {
  Span s = span(p, r0, r0 + R);
  // Past a causal limit, a vector may run on up to p.n: its extra columns
  // are sums like the others, which nothing reads.
  int64_t vectorEnd = least(p.n, (s.n + kLanes - 1) / kLanes * kLanes);
  int64_t j = 0;
  for (; j + kTileVectors * kLanes <= vectorEnd; j += kTileVectors * kLanes)
    tile<TransA, R, kTileVectors>(p, r0, j, s);
  for (; j + kLanes <= vectorEnd; j += kLanes)
    tile<TransA, R, 1>(p, r0, j, s);
  for (; j < s.n; ++j)
    column<TransA>(p, r0, R, j, s);
}

/// The last rows, fewer than a tile's.
template <bool TransA, int R = kTileRows - 1>
void lastRows(const Product &p, int64_t r0, int rows) {
  if constexpr (R > 0) {
    if (rows == R)
      return rowBlock<TransA, R>(p, r0);
    lastRows<TransA, R - 1>(p, r0, rows);
  }
}

template <bool TransA> void rows(const Product &p) {
  int64_t r0 = 0;
  for (; r0 + kTileRows <= p.m; r0 += kTileRows)
    rowBlock<TransA, kTileRows>(p, r0);
  if (r0 < p.m)
    lastRows<TransA>(p, r0, static_cast<int>(p.m - r0));
}
} // namespace

void multiply(const Product &p) {
  if (p.m <= 0 || p.n <= 0)
    return;
  if (p.transA)
    rows<true>(p);
  else
    rows<false>(p);
}
} // namespace loom::attention::LOOM_PRODUCTS_ISA
