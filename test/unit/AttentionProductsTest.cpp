//===- AttentionProductsTest.cpp - The CPU attention's small products -----===//
//
// Every instruction set's products this CPU can run, against sums in
// double: shapes that end inside a tile and a vector, transposed A,
// accumulation, and each causal mask, whose skipped terms are zeros.
//
//===----------------------------------------------------------------------===//

#include "AttentionProducts.h"
#include "CpuFeatures.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace loom::attention;

namespace {
using Kernel = void (*)(const Product &);

struct Isa {
  const char *name;
  Kernel kernel;
};

/// The instruction sets whose products this CPU runs.
std::vector<Isa> runnable() {
  std::vector<Isa> sets = {{"baseline", baseline::multiply}};
#if defined(__x86_64__)
  int width = loom::vectorWidth(loom::hostCpuFeatures());
  if (width >= 2)
    sets.push_back({"avx2", avx2::multiply});
  if (width >= loom::kAvx512Width)
    sets.push_back({"avx512", avx512::multiply});
#endif
  return sets;
}

/// Whether A's element (row, k) is one the mask makes zero.
bool maskedTerm(Causal causal, int64_t diagonal, int64_t row, int64_t k) {
  if (causal == Causal::Depth)
    return k > diagonal + row;
  if (causal == Causal::DepthFrom)
    return diagonal + k < row;
  return false;
}

/// Whether C's element (row, column) must be written.
bool written(Causal causal, int64_t diagonal, int64_t row, int64_t column) {
  return causal != Causal::Columns || column <= diagonal + row;
}

struct Case {
  int64_t m, n, k;
  bool transA, accumulate;
  Causal causal;
  int64_t diagonal;
};

/// C of `c` (its initial values `initial`) against a double reference.
void check(const Isa &isa, const Case &c) {
  std::mt19937 rng(static_cast<uint32_t>(c.m * 131 + c.n * 17 + c.k));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  // Leading dimensions past the widths, as the attention's are.
  int64_t lda = (c.transA ? c.m : c.k) + 3, ldb = c.n + 5, ldc = c.n + 2;
  std::vector<float> a((c.transA ? c.k : c.m) * lda + 1),
      b(std::max<int64_t>(c.k, 1) * ldb), initial(c.m * ldc);
  auto aAt = [&](int64_t row, int64_t k) -> float & {
    return c.transA ? a[k * lda + row] : a[row * lda + k];
  };
  for (int64_t row = 0; row < c.m; ++row)
    for (int64_t k = 0; k < c.k; ++k)
      aAt(row, k) =
          maskedTerm(c.causal, c.diagonal, row, k) ? 0.0f : uniform(rng);
  for (float &x : b)
    x = uniform(rng);
  for (float &x : initial)
    x = uniform(rng);
  std::vector<float> out(initial);
  Product p{c.m,      c.n,      c.k, a.data(),   lda,
            c.transA, b.data(), ldb, out.data(), ldc};
  p.alpha = 0.75f;
  p.accumulate = c.accumulate;
  p.causal = c.causal;
  p.diagonal = c.diagonal;
  isa.kernel(p);
  for (int64_t row = 0; row < c.m; ++row)
    for (int64_t j = 0; j < c.n; ++j) {
      if (!written(c.causal, c.diagonal, row, j))
        continue;
      double sum = 0, magnitude = 0;
      for (int64_t k = 0; k < c.k; ++k) {
        double term = static_cast<double>(aAt(row, k)) * b[k * ldb + j];
        sum += term;
        magnitude += std::fabs(term);
      }
      double expected =
          p.alpha * sum + (c.accumulate ? initial[row * ldc + j] : 0.0);
      ASSERT_NEAR(out[row * ldc + j], expected, 1e-6 * (1 + magnitude))
          << isa.name << ": m " << c.m << " n " << c.n << " k " << c.k
          << " transA " << c.transA << " causal " << static_cast<int>(c.causal)
          << " diagonal " << c.diagonal << " at (" << row << ", " << j << ")";
    }
  // Columns of C past the product's are the caller's.
  for (int64_t row = 0; row < c.m; ++row)
    for (int64_t j = c.n; j < ldc; ++j)
      ASSERT_EQ(out[row * ldc + j], initial[row * ldc + j]) << isa.name;
}
} // namespace

TEST(AttentionProducts, MatchDoubleOnEveryInstructionSet) {
  std::vector<Isa> sets = runnable();
  for (const Isa &isa : sets)
    for (int64_t m : {1, 7, 8, 13, 64})
      for (int64_t n : {1, 5, 16, 33, 64, 70})
        for (int64_t k : {0, 1, 9, 32, 64})
          for (bool transA : {false, true})
            for (Causal causal : {Causal::None, Causal::Columns, Causal::Depth,
                                  Causal::DepthFrom})
              for (int64_t diagonal : {0, 5, 64})
                check(isa, {m, n, k, transA, /*accumulate=*/transA, causal,
                            diagonal});
}

// The vector units with fused multiply-adds compute the same values: each
// element's sum runs in one order, a vector's lane or a column alone.
TEST(AttentionProducts, WideUnitsAgreeBitForBit) {
  std::vector<Isa> sets = runnable();
  if (sets.size() < 3)
    GTEST_SKIP() << "this CPU lacks AVX-512";
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  int64_t m = 61, n = 45, k = 37;
  std::vector<float> a(m * k), b(k * n);
  for (float &x : a)
    x = uniform(rng);
  for (float &x : b)
    x = uniform(rng);
  std::vector<std::vector<float>> results;
  for (size_t s = 1; s < sets.size(); ++s) {
    std::vector<float> c(m * n, 1.0f);
    Product p{m, n, k, a.data(), k, false, b.data(), n, c.data(), n};
    p.alpha = 0.3f;
    p.accumulate = true;
    sets[s].kernel(p);
    results.push_back(c);
  }
  EXPECT_EQ(results[0], results[1]);
}
