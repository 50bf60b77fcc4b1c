//===- AttentionProducts.h - The CPU attention's small products -*- C++ -*-===//
//
// The matrix products of one (batch, head) pair's attention on the CPU, a
// block of queries at a time: operands of a few dozen rows, too small for
// a BLAS call to pay its way, several of them triangular under the causal
// mask. Each element of a product sums its terms in the order of the
// inner index, whatever the vector units, with fused multiply-adds where
// they have them (as the BLAS's kernels do): CPUs with FMA compute the
// same values, which differ from those without in the last bits. Terms the
// causal mask makes zero are skipped, which leaves the sums unchanged.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_ATTENTIONPRODUCTS_H
#define LOOM_RUNTIME_ATTENTIONPRODUCTS_H

#include <cstdint>

namespace loom::attention {

/// Which terms of a product the causal mask of a block of queries makes
/// zero, the block's first query being `Product::diagonal`.
enum class Causal {
  /// None: every term counts.
  None,
  /// C's row r (query diagonal + r) needs columns (keys) up to its own
  /// only: the scores and their gradient. Columns past it may be left
  /// unwritten.
  Columns,
  /// A's row r is zero past column diagonal + r: the probabilities and the
  /// scores' gradient, times the values or the keys.
  Depth,
  /// A(j, r) is zero where diagonal + r < j: the transposed probabilities
  /// and scores' gradient, times the queries' rows.
  DepthFrom,
};

/// C[m x n] = alpha A B, or C + alpha A B with `accumulate`, for row-major
/// matrices with leading dimensions: A [m x k], or its transpose stored
/// [k x m] with `transA`; B [k x n].
struct Product {
  int64_t m, n, k;
  const float *a;
  int64_t lda;
  bool transA;
  const float *b;
  int64_t ldb;
  float *c;
  int64_t ldc;
  float alpha = 1.0f;
  bool accumulate = false;
  Causal causal = Causal::None;
  int64_t diagonal = 0;
};

/// Computes `p` with the widest vector units this CPU has.
void multiply(const Product &p);

/// The same for each instruction set the runtime is built for, which
/// multiply picks among: AVX-512, AVX2, and the baseline.
namespace avx512 {
void multiply(const Product &p);
}
namespace avx2 {
void multiply(const Product &p);
}
namespace baseline {
void multiply(const Product &p);
}

} // namespace loom::attention

#endif // LOOM_RUNTIME_ATTENTIONPRODUCTS_H
