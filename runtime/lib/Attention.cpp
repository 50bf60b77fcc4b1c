//===- Attention.cpp - Fused causal attention: the CPU backend ------------===//
//
// loom_rt_attention and loom_rt_attention_grad compute causal attention
// without the [T, T] matrix of every (batch, head) pair: each pair is a
// task of the runtime's threads, which takes its queries 64 at a time, so
// that the scores it keeps are 64 rows of at most T. Its products are
// SGEMMs on the pair's queries, keys and values, read where they are when
// f32 and widened into packed f32 matrices when bf16 or f16. The backward pass
// is the one of FlashAttention: the probabilities come back from the scores
// and the forward pass's log-sum-exp of each query, and the softmax's
// gradient needs only each query's dot product of its output with the
// output's gradient. Under grouped-query attention the query heads of a
// group read its key and value heads where they are; the backward pass
// takes a group at a time, so that its key and value gradients sum over
// the group's query heads in one task without races.
//
//===----------------------------------------------------------------------===//

#include "CpuGemm.h"
#include "Device.h"
#include "Float.h"
#include "Parallel.h"
#include "VectorMath.h"
#include "loom/rt.h"
#include "loom/runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {
/// Queries per block: their scores are a block of 64 x T floats.
constexpr int64_t kQueryBlock = 64;

/// One call's tensors, in the layouts of rt.h.
struct Attention {
  int32_t dtype;
  int64_t batch, seq, heads, groups, headDim;
  float scale;
  const void *qkv = nullptr;
  void *out = nullptr;
  float *lse = nullptr; // written by the forward pass, read by the backward
  const void *dout = nullptr;
  void *dqkv = nullptr;
  float *delta = nullptr;

  /// Query heads per key/value head: 1 without groups.
  int64_t queriesPerKey() const { return groups ? heads / groups : 1; }
  /// Key/value heads, each a task of the backward pass.
  int64_t keyHeads() const { return groups ? groups : heads; }
  /// Heads of head_dim channels in a token's row of qkv: [3, heads], or
  /// [groups, queries of a group + 2] with groups.
  int64_t rowHeads() const {
    return groups ? groups * (queriesPerKey() + 2) : 3 * heads;
  }
  /// The offset of the row of token 0 of batch `b` in part `part` (0:
  /// queries, 1: keys, 2: values) read by query head `h`, in qkv (or its
  /// gradient).
  int64_t qkvOffset(int64_t b, int64_t part, int64_t h) const {
    int64_t column = part * heads + h;
    if (groups) {
      int64_t r = queriesPerKey(), group = h / r;
      column = group * (r + 2) + (part == 0 ? h % r : r + part - 1);
    }
    return b * seq * qkvStride() + column * headDim;
  }
  int64_t qkvStride() const { return rowHeads() * headDim; }
  int64_t outOffset(int64_t b, int64_t h) const {
    return b * seq * heads * headDim + h * headDim;
  }
  int64_t outStride() const { return heads * headDim; }
  int64_t rowOffset(int64_t b, int64_t h) const {
    return (b * heads + h) * seq;
  }
};

/// Rows [0, seq) of head_dim elements, `stride` apart from `offset` in
/// `data`, bf16 or f16, widened into `to` [seq, head_dim].
void pack(const Attention &a, const void *data, int64_t offset, int64_t stride,
          float *to) {
  loom::widenBlock(a.dtype, static_cast<const uint16_t *>(data) + offset,
                   stride, a.seq, a.headDim, to);
}

/// The inverse of pack, rounding to the call's dtype.
LOOM_VECTOR_CLONES
void unpack(const Attention &a, const float *from, void *data, int64_t offset,
            int64_t stride) {
  auto *to = static_cast<uint16_t *>(data) + offset;
  for (int64_t t = 0; t < a.seq; ++t) {
    const float *row = from + t * a.headDim;
    uint16_t *out = to + t * stride;
    if (a.dtype == LOOM_DTYPE_BF16)
      for (int64_t d = 0; d < a.headDim; ++d)
        out[d] = loom::narrowBf16(row[d]);
    else
      for (int64_t d = 0; d < a.headDim; ++d)
        out[d] = loom::narrowHalf(row[d]);
  }
}

/// Row-major C = alpha op(A) op(B) + beta C, packed operands.
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
          float beta, float *c, int64_t ldc) {
  loom::sgemmCall(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/// A [seq, head_dim] matrix of f32 with its leading dimension.
struct Matrix {
  float *data;
  int64_t ld;
  float *row(int64_t i) const { return data + i * ld; }
};

/// The f32 scratch of one (batch, head) pair, per thread: the matrices of
/// narrow tensors widened, and the scores of a block of queries.
struct Scratch {
  std::vector<float> q, k, v, o, dout, dq, dk, dv, scores, dscores, terms;
};

Scratch &scratch() {
  thread_local Scratch s;
  return s;
}

/// The pair's matrix of `data` (rows `stride` apart from `offset`): f32
/// tensors are read where they are, others widened into `buffer`.
Matrix input(const Attention &a, const void *data, int64_t offset,
             int64_t stride, std::vector<float> &buffer) {
  if (a.dtype == LOOM_DTYPE_F32)
    return {const_cast<float *>(static_cast<const float *>(data)) + offset,
            stride};
  buffer.resize(a.seq * a.headDim);
  pack(a, data, offset, stride, buffer.data());
  return {buffer.data(), a.headDim};
}

/// Where the pair's matrix of an output goes: into the f32 tensor itself,
/// else into `buffer`, which `finish` then rounds into the tensor. Zeros
/// with `zero`.
Matrix output(const Attention &a, void *data, int64_t offset, int64_t stride,
              std::vector<float> &buffer, bool zero) {
  Matrix m;
  if (a.dtype == LOOM_DTYPE_F32) {
    m = {static_cast<float *>(data) + offset, stride};
  } else {
    buffer.resize(a.seq * a.headDim);
    m = {buffer.data(), a.headDim};
  }
  if (zero)
    for (int64_t t = 0; t < a.seq; ++t)
      std::fill(m.row(t), m.row(t) + a.headDim, 0.0f);
  return m;
}
void finish(const Attention &a, const Matrix &m, void *data, int64_t offset,
            int64_t stride) {
  if (a.dtype != LOOM_DTYPE_F32)
    unpack(a, m.data, data, offset, stride);
}

/// Each query's log-sum-exp of its causal scores, queries [i0, i0 + rows)
/// of `scores` (row by row `keys` apart), into `lse`; `terms` holds a row.
LOOM_VECTOR_CLONES
void logSumExpBlock(int64_t i0, int64_t rows, const float *scores, float *lse,
                    float *terms) {
  int64_t keys = i0 + rows;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t i = i0 + r;
    const float *row = scores + r * keys;
    float max = loom::laneMax(i + 1, row);
    // The exponentials in a loop that vectorizes, their sum in order.
    for (int64_t j = 0; j <= i; ++j)
      terms[j] = loom::vectorExp(row[j] - max);
    float sum = 0.0f;
    for (int64_t j = 0; j <= i; ++j)
      sum += terms[j];
    lse[i] = max + std::log(sum);
  }
}

/// Scores of queries [i0, i0 + rows) to their causal probabilities, in
/// place, from each query's log-sum-exp `lse`: exp(score - lse), zeros
/// past each query. The forward and the backward pass both compute them
/// so, so that the gradient is the one of the probabilities the output
/// was made of, bit for bit.
LOOM_VECTOR_CLONES
void probabilitiesBlock(int64_t i0, int64_t rows, float *scores,
                        const float *lse) {
  int64_t keys = i0 + rows;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t i = i0 + r;
    float *row = scores + r * keys;
    // The scores are at most the log-sum-exp, whose exponential sums theirs.
    for (int64_t j = 0; j <= i; ++j)
      row[j] = loom::vectorExp(row[j] - lse[i]);
    std::fill(row + i + 1, row + keys, 0.0f);
  }
}

/// The scaled scores of queries [i0, i0 + rows) against keys [0, i0 +
/// rows), row by row `keys` apart.
void blockScores(const Attention &a, const Matrix &q, const Matrix &k,
                 int64_t i0, int64_t rows, float *scores) {
  gemm(false, true, rows, i0 + rows, a.headDim, a.scale, q.row(i0), q.ld,
       k.data, k.ld, 0.0f, scores, i0 + rows);
}

void forwardPair(const Attention &a, int64_t b, int64_t h) {
  Scratch &s = scratch();
  Matrix q = input(a, a.qkv, a.qkvOffset(b, 0, h), a.qkvStride(), s.q);
  Matrix k = input(a, a.qkv, a.qkvOffset(b, 1, h), a.qkvStride(), s.k);
  Matrix v = input(a, a.qkv, a.qkvOffset(b, 2, h), a.qkvStride(), s.v);
  Matrix o = output(a, a.out, a.outOffset(b, h), a.outStride(), s.o,
                    /*zero=*/false);
  s.scores.resize(kQueryBlock * a.seq);
  s.terms.resize(a.seq);
  float *lse = a.lse + a.rowOffset(b, h);
  for (int64_t i0 = 0; i0 < a.seq; i0 += kQueryBlock) {
    int64_t rows = std::min(kQueryBlock, a.seq - i0), keys = i0 + rows;
    float *scores = s.scores.data();
    blockScores(a, q, k, i0, rows, scores);
    logSumExpBlock(i0, rows, scores, lse, s.terms.data());
    probabilitiesBlock(i0, rows, scores, lse);
    gemm(false, false, rows, a.headDim, keys, 1.0f, scores, keys, v.data, v.ld,
         0.0f, o.row(i0), o.ld);
  }
  finish(a, o, a.out, a.outOffset(b, h), a.outStride());
}

/// Each query's dot product of its output row with the output's gradient,
/// rows [0, seq): the term the softmax's gradient subtracts.
void outputDots(int64_t seq, int64_t headDim, const Matrix &o,
                const Matrix &dout, float *delta) {
  for (int64_t i = 0; i < seq; ++i) {
    const float *x = o.row(i), *dx = dout.row(i);
    float dot = 0.0f;
    for (int64_t d = 0; d < headDim; ++d)
      dot += x[d] * dx[d];
    delta[i] = dot;
  }
}

/// The scores' gradient dS = P (dP - delta), with the scores' scale, over
/// the probabilities' gradient `dprobs` of queries [i0, i0 + rows).
LOOM_VECTOR_CLONES
void scoreGradients(int64_t i0, int64_t rows, const float *probs, float *dprobs,
                    const float *delta, float scale) {
  int64_t keys = i0 + rows;
  for (int64_t r = 0; r < rows; ++r) {
    const float *p = probs + r * keys;
    float *dp = dprobs + r * keys;
    float rowDelta = delta[i0 + r];
    for (int64_t j = 0; j < keys; ++j)
      dp[j] = p[j] * (dp[j] - rowDelta) * scale;
  }
}

/// Adds query head `h`'s contributions to the key and value gradients `dk`
/// and `dv` of its key/value head, and writes its query gradient.
void backwardHead(const Attention &a, int64_t b, int64_t h, const Matrix &k,
                  const Matrix &v, const Matrix &dk, const Matrix &dv) {
  Scratch &s = scratch();
  int64_t D = a.headDim, T = a.seq;
  Matrix q = input(a, a.qkv, a.qkvOffset(b, 0, h), a.qkvStride(), s.q);
  Matrix o = input(a, a.out, a.outOffset(b, h), a.outStride(), s.o);
  Matrix dout = input(a, a.dout, a.outOffset(b, h), a.outStride(), s.dout);
  Matrix dq = output(a, a.dqkv, a.qkvOffset(b, 0, h), a.qkvStride(), s.dq,
                     /*zero=*/false);
  s.scores.resize(kQueryBlock * T);
  s.dscores.resize(kQueryBlock * T);
  float *lse = a.lse + a.rowOffset(b, h);
  float *delta = a.delta + a.rowOffset(b, h);
  outputDots(T, D, o, dout, delta);
  for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
    int64_t rows = std::min(kQueryBlock, T - i0), keys = i0 + rows;
    float *probs = s.scores.data(), *dprobs = s.dscores.data();
    blockScores(a, q, k, i0, rows, probs);
    probabilitiesBlock(i0, rows, probs, lse);
    // dV[0, keys) += P^T dO; dP = dO V^T.
    gemm(true, false, keys, D, rows, 1.0f, probs, keys, dout.row(i0), dout.ld,
         1.0f, dv.data, dv.ld);
    gemm(false, true, rows, keys, D, 1.0f, dout.row(i0), dout.ld, v.data, v.ld,
         0.0f, dprobs, keys);
    scoreGradients(i0, rows, probs, dprobs, delta, a.scale);
    // dQ = dS K; dK[0, keys) += dS^T Q.
    gemm(false, false, rows, D, keys, 1.0f, dprobs, keys, k.data, k.ld, 0.0f,
         dq.row(i0), dq.ld);
    gemm(true, false, keys, D, rows, 1.0f, dprobs, keys, q.row(i0), q.ld, 1.0f,
         dk.data, dk.ld);
  }
  finish(a, dq, a.dqkv, a.qkvOffset(b, 0, h), a.qkvStride());
}

/// The gradients of key/value head `g` of batch `b` and of its query heads.
void backwardGroup(const Attention &a, int64_t b, int64_t g) {
  Scratch &s = scratch();
  int64_t first = g * a.queriesPerKey();
  Matrix k = input(a, a.qkv, a.qkvOffset(b, 1, first), a.qkvStride(), s.k);
  Matrix v = input(a, a.qkv, a.qkvOffset(b, 2, first), a.qkvStride(), s.v);
  Matrix dk = output(a, a.dqkv, a.qkvOffset(b, 1, first), a.qkvStride(), s.dk,
                     /*zero=*/true);
  Matrix dv = output(a, a.dqkv, a.qkvOffset(b, 2, first), a.qkvStride(), s.dv,
                     /*zero=*/true);
  for (int64_t h = first; h < first + a.queriesPerKey(); ++h)
    backwardHead(a, b, h, k, v, dk, dv);
  finish(a, dk, a.dqkv, a.qkvOffset(b, 1, first), a.qkvStride());
  finish(a, dv, a.dqkv, a.qkvOffset(b, 2, first), a.qkvStride());
}

/// Runs `task(a, b, i)` for every batch b and each of its `perBatch`
/// indices i, spread over the runtime's threads.
template <void (*Task)(const Attention &, int64_t, int64_t)>
void forEachTask(const Attention &a, int64_t perBatch) {
  struct Context {
    const Attention *a;
    int64_t perBatch;
  } context{&a, perBatch};
  auto range = [](void *raw, int64_t from, int64_t to) {
    const Context &c = *static_cast<const Context *>(raw);
    for (int64_t index = from; index < to; ++index)
      Task(*c.a, index / c.perBatch, index % c.perBatch);
  };
  int64_t tasks = a.batch * perBatch;
  if (tasks <= 0 || a.seq <= 0 || a.headDim <= 0)
    return;
  if (loom_get_num_threads() > 1 && !loom::isInParallelLoop() && tasks > 1)
    loom_rt_parallel_for(range, &context, 0, tasks);
  else
    range(&context, 0, tasks);
}

/// A call's sizes, its tensors still to set.
Attention sized(int32_t dtype, int64_t batch, int64_t seq, int64_t heads,
                int64_t groups, int64_t headDim) {
  return {
      dtype, batch, seq, heads, groups, headDim, loom::attentionScale(headDim)};
}

} // namespace

extern "C" {

void loom_rt_attention(int32_t dtype, int64_t batch, int64_t seq, int64_t heads,
                       int64_t groups, int64_t head_dim, const void *qkv,
                       void *out, float *lse) {
  if (loom::cudaActive()) {
    return loom::cudaAttention(dtype, batch, seq, heads, groups, head_dim, qkv,
                               out, lse);
  }
  Attention a = sized(dtype, batch, seq, heads, groups, head_dim);
  a.qkv = qkv;
  a.out = out;
  a.lse = lse;
  forEachTask<forwardPair>(a, heads);
}

void loom_rt_attention_grad(int32_t dtype, int64_t batch, int64_t seq,
                            int64_t heads, int64_t groups, int64_t head_dim,
                            const void *qkv, const void *out, const void *dout,
                            const float *lse, void *dqkv, float *delta) {
  if (loom::cudaActive()) {
    return loom::cudaAttentionGrad(dtype, batch, seq, heads, groups, head_dim,
                                   qkv, out, dout, lse, dqkv, delta);
  }
  Attention a = sized(dtype, batch, seq, heads, groups, head_dim);
  a.qkv = qkv;
  a.out = const_cast<void *>(out);
  a.lse = const_cast<float *>(lse);
  a.dout = dout;
  a.dqkv = dqkv;
  a.delta = delta;
  forEachTask<backwardGroup>(a, a.keyHeads());
}

} // extern "C"
