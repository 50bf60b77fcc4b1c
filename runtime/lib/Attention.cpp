//===- Attention.cpp - Fused causal attention: the CPU backend ------------===//
//
// loom_rt_attention and loom_rt_attention_grad compute causal attention
// without the [T, T] matrix of every (batch, head) pair: each pair is a
// task of the runtime's threads, which takes its queries 64 at a time, so
// that the scores it keeps are 64 rows of at most T. Its products
// (AttentionProducts.h) read the pair's queries, keys and values where they
// are when f32, and widened into packed f32 matrices when bf16 or f16; the
// keys and values also transposed, where a product takes their transpose.
// The backward pass is the one of FlashAttention: the probabilities come
// back from the scores and the forward pass's log-sum-exp of each query,
// and the softmax's gradient needs only each query's dot product of its
// output with the output's gradient. Under grouped-query attention the query
// heads of a group read its key and value heads where they are; the backward
// pass takes a group at a time, so that its key and value gradients sum over
// the group's query heads in one task without races.
//
//===----------------------------------------------------------------------===//

#include "AttentionProducts.h"
#include "CpuFeatures.h"
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
#include <cstring>
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

using loom::attention::Causal;
using loom::attention::Product;

/// A [seq, head_dim] matrix of f32 with its leading dimension.
struct Matrix {
  float *data;
  int64_t ld;
  float *row(int64_t i) const { return data + i * ld; }
};

/// The f32 scratch of one (batch, head) pair, per thread: the matrices of
/// narrow tensors widened, the keys and values transposed, and the scores
/// of a block of queries.
struct Scratch {
  std::vector<float> q, k, v, o, dout, dq, dk, dv, kt, vt, scores, dscores;
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

/// `m` transposed into `buffer`: [head_dim, seq], rows seq apart; 4 x 4
/// blocks in registers, by shuffles, which any x86-64 (and vector unit) has.
Matrix transpose(const Attention &a, const Matrix &m,
                 std::vector<float> &buffer) {
  typedef float Quad __attribute__((vector_size(16)));
  buffer.resize(a.headDim * a.seq);
  float *to = buffer.data();
  int64_t T = a.seq, D = a.headDim, t = 0;
  for (; t + 4 <= T; t += 4) {
    int64_t d = 0;
    for (; d + 4 <= D; d += 4) {
      Quad r[4], c[4];
      for (int i = 0; i < 4; ++i)
        std::memcpy(&r[i], m.row(t + i) + d, sizeof(Quad));
      Quad lo01 = __builtin_shufflevector(r[0], r[1], 0, 4, 1, 5);
      Quad hi01 = __builtin_shufflevector(r[0], r[1], 2, 6, 3, 7);
      Quad lo23 = __builtin_shufflevector(r[2], r[3], 0, 4, 1, 5);
      Quad hi23 = __builtin_shufflevector(r[2], r[3], 2, 6, 3, 7);
      c[0] = __builtin_shufflevector(lo01, lo23, 0, 1, 4, 5);
      c[1] = __builtin_shufflevector(lo01, lo23, 2, 3, 6, 7);
      c[2] = __builtin_shufflevector(hi01, hi23, 0, 1, 4, 5);
      c[3] = __builtin_shufflevector(hi01, hi23, 2, 3, 6, 7);
      for (int i = 0; i < 4; ++i)
        std::memcpy(to + (d + i) * T + t, &c[i], sizeof(Quad));
    }
    for (; d < D; ++d)
      for (int i = 0; i < 4; ++i)
        to[d * T + t + i] = m.row(t + i)[d];
  }
  for (; t < T; ++t)
    for (int64_t d = 0; d < D; ++d)
      to[d * T + t] = m.row(t)[d];
  return {to, T};
}

/// The distance between rows of a block's scores against `keys` keys:
/// whole vectors, which the loops over them may read and write past the
/// last key.
int64_t blockStride(int64_t keys) {
  return (keys + loom::kMaxLanes - 1) / loom::kMaxLanes * loom::kMaxLanes;
}

/// Room in `buffer` for the scores of a block of queries, or their
/// gradient, at a vector's alignment.
float *scoreBlock(const Attention &a, std::vector<float> &buffer) {
  constexpr size_t kAlign = loom::kMaxLanes * sizeof(float);
  buffer.resize(kQueryBlock * blockStride(a.seq) + loom::kMaxLanes);
  auto address = reinterpret_cast<uintptr_t>(buffer.data());
  return buffer.data() + (kAlign - address % kAlign) % kAlign / sizeof(float);
}

} // namespace

/// The products run on the widest vector units the CPU has; all compute
/// the same values.
void loom::attention::multiply(const Product &p) {
  using Kernel = void (*)(const Product &);
  static const Kernel kernel = []() -> Kernel {
#ifdef LOOM_X86_PRODUCTS
    int width = loom::vectorWidth(loom::hostCpuFeatures());
    if (width >= loom::kAvx512Width)
      return avx512::multiply;
    if (width >= 2)
      return avx2::multiply;
#endif
    return baseline::multiply;
  }();
  kernel(p);
}

namespace {
/// Each query's log-sum-exp of its causal scores, queries [i0, i0 + rows)
/// of `scores` (rows blockStride apart), into `lse`. The scores past a
/// query are left as the product wrote them, or not, and weigh nothing.
/// The exponentials' sum runs in kMaxLanes running sums, added in order,
/// which vectorize to the same values at any width.
LOOM_VECTOR_CLONES
void logSumExpBlock(int64_t i0, int64_t rows, const float *scores, float *lse) {
  int64_t stride = blockStride(i0 + rows);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t i = i0 + r;
    const float *row = scores + r * stride;
    float max = loom::laneMax(i + 1, row);
    float lanes[loom::kMaxLanes] = {};
    // Whole vectors: those past the query weigh nothing.
    for (int64_t j = 0; j <= i; j += loom::kMaxLanes)
      for (int64_t l = 0; l < loom::kMaxLanes; ++l) {
        float term = loom::vectorExp(row[j + l] - max);
        lanes[l] += j + l <= i ? term : 0.0f;
      }
    float sum = 0.0f;
    for (float lane : lanes)
      sum += lane;
    lse[i] = max + std::log(sum);
  }
}

/// Scores of queries [i0, i0 + rows) to their causal probabilities, in
/// place, from each query's log-sum-exp `lse`: exp(score - lse), zeros
/// past each query. The forward and the backward pass both compute them
/// so, so that the gradient is the one of the probabilities the output
/// was made of, bit for bit. Whole vectors up to each query, selecting, so
/// that the loop has no remainder per row.
LOOM_VECTOR_CLONES
void probabilitiesBlock(int64_t i0, int64_t rows, float *scores,
                        const float *lse) {
  int64_t keys = i0 + rows, stride = blockStride(keys);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t i = i0 + r;
    float *row = scores + r * stride, rowLse = lse[i];
    int64_t j = 0;
    // The scores are at most the log-sum-exp, whose exponential sums theirs.
    for (; j <= i; j += loom::kMaxLanes)
      for (int64_t l = 0; l < loom::kMaxLanes; ++l) {
        float p = loom::vectorExp(row[j + l] - rowLse);
        row[j + l] = j + l <= i ? p : 0.0f;
      }
    if (j < keys)
      std::fill(row + j, row + keys, 0.0f);
  }
}

/// The scaled scores of queries [i0, i0 + rows) against keys [0, i0 +
/// rows), rows blockStride apart, from the keys' transpose `kt`; those
/// past each query may be left unwritten.
void blockScores(const Attention &a, const Matrix &q, const Matrix &kt,
                 int64_t i0, int64_t rows, float *scores) {
  Product p{rows,  i0 + rows, a.headDim, q.row(i0), q.ld,
            false, kt.data,   kt.ld,     scores,    blockStride(i0 + rows)};
  p.alpha = a.scale;
  p.causal = Causal::Columns;
  p.diagonal = i0;
  loom::attention::multiply(p);
}

/// The product of rows [i0, i0 + rows) of `lower` (probabilities or their
/// gradient, zero past each query; rows blockStride apart) and rows [0,
/// keys) of `m`, into rows [i0, ...) of `out`; or with `transposed`, the
/// transpose of `lower` times rows [i0, ...) of `m`, added to rows [0,
/// keys) of `out`.
void causalProduct(const Attention &a, int64_t i0, int64_t rows,
                   const float *lower, bool transposed, const Matrix &m,
                   const Matrix &out) {
  int64_t keys = i0 + rows;
  Product p{transposed ? keys : rows,
            a.headDim,
            transposed ? rows : keys,
            lower,
            blockStride(keys),
            transposed,
            transposed ? m.row(i0) : m.data,
            m.ld,
            transposed ? out.data : out.row(i0),
            out.ld};
  p.accumulate = transposed;
  p.causal = transposed ? Causal::DepthFrom : Causal::Depth;
  p.diagonal = i0;
  loom::attention::multiply(p);
}

void forwardPair(const Attention &a, int64_t b, int64_t h) {
  Scratch &s = scratch();
  Matrix q = input(a, a.qkv, a.qkvOffset(b, 0, h), a.qkvStride(), s.q);
  Matrix k = input(a, a.qkv, a.qkvOffset(b, 1, h), a.qkvStride(), s.k);
  Matrix v = input(a, a.qkv, a.qkvOffset(b, 2, h), a.qkvStride(), s.v);
  Matrix o = output(a, a.out, a.outOffset(b, h), a.outStride(), s.o,
                    /*zero=*/false);
  Matrix kt = transpose(a, k, s.kt);
  float *scores = scoreBlock(a, s.scores);
  float *lse = a.lse + a.rowOffset(b, h);
  for (int64_t i0 = 0; i0 < a.seq; i0 += kQueryBlock) {
    int64_t rows = std::min(kQueryBlock, a.seq - i0);
    blockScores(a, q, kt, i0, rows, scores);
    logSumExpBlock(i0, rows, scores, lse);
    probabilitiesBlock(i0, rows, scores, lse);
    causalProduct(a, i0, rows, scores, /*transposed=*/false, v, o);
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
/// the probabilities' gradient `dprobs` of queries [i0, i0 + rows), whose
/// entries past each query may be unwritten: zeros there.
LOOM_VECTOR_CLONES
void scoreGradients(int64_t i0, int64_t rows, const float *probs, float *dprobs,
                    const float *delta, float scale) {
  int64_t keys = i0 + rows, stride = blockStride(keys);
  for (int64_t r = 0; r < rows; ++r) {
    const float *p = probs + r * stride;
    float *dp = dprobs + r * stride;
    float rowDelta = delta[i0 + r];
    for (int64_t j = 0; j < keys; ++j) {
      float ds = p[j] * (dp[j] - rowDelta) * scale;
      dp[j] = j <= i0 + r ? ds : 0.0f;
    }
  }
}

/// The keys, the values and the transposes of both of one key/value head.
struct KeysValues {
  Matrix k, v, kt, vt;
};

/// Adds query head `h`'s contributions to the key and value gradients `dk`
/// and `dv` of its key/value head, and writes its query gradient.
void backwardHead(const Attention &a, int64_t b, int64_t h,
                  const KeysValues &kv, const Matrix &dk, const Matrix &dv) {
  Scratch &s = scratch();
  int64_t D = a.headDim, T = a.seq;
  Matrix q = input(a, a.qkv, a.qkvOffset(b, 0, h), a.qkvStride(), s.q);
  Matrix o = input(a, a.out, a.outOffset(b, h), a.outStride(), s.o);
  Matrix dout = input(a, a.dout, a.outOffset(b, h), a.outStride(), s.dout);
  Matrix dq = output(a, a.dqkv, a.qkvOffset(b, 0, h), a.qkvStride(), s.dq,
                     /*zero=*/false);
  float *probs = scoreBlock(a, s.scores), *dprobs = scoreBlock(a, s.dscores);
  float *lse = a.lse + a.rowOffset(b, h);
  float *delta = a.delta + a.rowOffset(b, h);
  outputDots(T, D, o, dout, delta);
  for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
    int64_t rows = std::min(kQueryBlock, T - i0), keys = i0 + rows;
    blockScores(a, q, kv.kt, i0, rows, probs);
    probabilitiesBlock(i0, rows, probs, lse);
    // dV[0, keys) += P^T dO; dP = dO V^T, as the scores are Q K^T.
    causalProduct(a, i0, rows, probs, /*transposed=*/true, dout, dv);
    Product dp{rows,  keys,       D,        dout.row(i0), dout.ld,
               false, kv.vt.data, kv.vt.ld, dprobs,       blockStride(keys)};
    dp.causal = Causal::Columns;
    dp.diagonal = i0;
    loom::attention::multiply(dp);
    scoreGradients(i0, rows, probs, dprobs, delta, a.scale);
    // dQ = dS K; dK[0, keys) += dS^T Q.
    causalProduct(a, i0, rows, dprobs, /*transposed=*/false, kv.k, dq);
    causalProduct(a, i0, rows, dprobs, /*transposed=*/true, q, dk);
  }
  finish(a, dq, a.dqkv, a.qkvOffset(b, 0, h), a.qkvStride());
}

/// The gradients of key/value head `g` of batch `b` and of its query heads.
void backwardGroup(const Attention &a, int64_t b, int64_t g) {
  Scratch &s = scratch();
  int64_t first = g * a.queriesPerKey();
  KeysValues kv;
  kv.k = input(a, a.qkv, a.qkvOffset(b, 1, first), a.qkvStride(), s.k);
  kv.v = input(a, a.qkv, a.qkvOffset(b, 2, first), a.qkvStride(), s.v);
  kv.kt = transpose(a, kv.k, s.kt);
  kv.vt = transpose(a, kv.v, s.vt);
  Matrix dk = output(a, a.dqkv, a.qkvOffset(b, 1, first), a.qkvStride(), s.dk,
                     /*zero=*/true);
  Matrix dv = output(a, a.dqkv, a.qkvOffset(b, 2, first), a.qkvStride(), s.dv,
                     /*zero=*/true);
  for (int64_t h = first; h < first + a.queriesPerKey(); ++h)
    backwardHead(a, b, h, kv, dk, dv);
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
