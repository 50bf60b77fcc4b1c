//===- loom-check.cpp - End-to-end checks of compiled artifacts -----------===//
//
// Test driver for the lit tests in test/e2e. Each mode loads an artifact
// through the runtime's C API, checks one property and prints what it
// measured; the exit status says whether the property holds.
//
//   loom-check reference  ARTIFACT   loss and gradients against a naive
//                                    double-precision GPT-2 written here
//   loom-check gradcheck  ARTIFACT   gradients against central finite
//                                    differences of the artifact's own loss
//   loom-check overfit    ARTIFACT   100 steps on one batch drive the loss
//                                    near zero
//   loom-check checkpoint ARTIFACT FILE
//                                    save, load into a fresh model, and get
//                                    the identical next-step loss
//   loom-check logits ARTIFACT WEIGHTS TOKENS OUT
//                                    the scores after each of TOKENS (ids
//                                    separated by commas) from the
//                                    safetensors WEIGHTS, written to OUT as
//                                    f32, a row of `vocab` per token
//
//===----------------------------------------------------------------------===//

#include "loom/runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {
int failWith(const char *what) {
  std::fprintf(stderr, "loom-check: error: %s\n", what);
  return 2;
}

struct Batch {
  std::vector<int32_t> tokens, targets;
};

Batch randomBatch(const loom_model_info &info, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, info.vocab - 1);
  Batch b;
  for (int64_t i = 0; i < info.batch * info.sequence; ++i) {
    b.tokens.push_back(token(rng));
    b.targets.push_back(token(rng));
  }
  return b;
}

//===----------------------------------------------------------------------===//
// The naive reference: GPT-2 in double precision, loops only, from the
// llm.c parameter layout. It shares nothing with the compiler.
//===----------------------------------------------------------------------===//

struct Reference {
  int64_t L, C, NH, V, Vp, maxT, B, T;

  double loss(const std::vector<double> &p, const Batch &batch) const {
    const int64_t H = 4 * C;
    // Offsets of llm.c's stacked tensors.
    const double *wte = p.data();
    const double *wpe = wte + Vp * C;
    const double *ln1w = wpe + maxT * C, *ln1b = ln1w + L * C;
    const double *qkvw = ln1b + L * C, *qkvb = qkvw + L * 3 * C * C;
    const double *projw = qkvb + L * 3 * C, *projb = projw + L * C * C;
    const double *ln2w = projb + L * C, *ln2b = ln2w + L * C;
    const double *fcw = ln2b + L * C, *fcb = fcw + L * H * C;
    const double *fcpw = fcb + L * H, *fcpb = fcpw + L * C * H;
    const double *lnfw = fcpb + L * C, *lnfb = lnfw + C;

    auto layerNorm = [&](const std::vector<double> &x, const double *w,
                         const double *bias) {
      std::vector<double> y(x.size());
      for (int64_t r = 0; r < B * T; ++r) {
        double mean = 0, var = 0;
        for (int64_t c = 0; c < C; ++c)
          mean += x[r * C + c];
        mean /= C;
        for (int64_t c = 0; c < C; ++c)
          var += (x[r * C + c] - mean) * (x[r * C + c] - mean);
        var /= C;
        for (int64_t c = 0; c < C; ++c)
          y[r * C + c] =
              (x[r * C + c] - mean) / std::sqrt(var + 1e-5) * w[c] + bias[c];
      }
      return y;
    };
    auto linear = [&](const std::vector<double> &x, int64_t in, int64_t out,
                      const double *w, const double *bias) {
      std::vector<double> y(B * T * out);
      for (int64_t r = 0; r < B * T; ++r)
        for (int64_t o = 0; o < out; ++o) {
          double s = bias ? bias[o] : 0.0;
          for (int64_t i = 0; i < in; ++i)
            s += x[r * in + i] * w[o * in + i];
          y[r * out + o] = s;
        }
      return y;
    };

    std::vector<double> x(B * T * C);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < C; ++c)
          x[(b * T + t) * C + c] =
              wte[batch.tokens[b * T + t] * C + c] + wpe[t * C + c];
    const int64_t hs = C / NH;
    for (int64_t l = 0; l < L; ++l) {
      auto h = layerNorm(x, ln1w + l * C, ln1b + l * C);
      auto qkv = linear(h, C, 3 * C, qkvw + l * 3 * C * C, qkvb + l * 3 * C);
      std::vector<double> att(B * T * C, 0.0);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t hd = 0; hd < NH; ++hd)
          for (int64_t t = 0; t < T; ++t) {
            std::vector<double> w(t + 1);
            double mx = -INFINITY;
            for (int64_t s = 0; s <= t; ++s) {
              double dot = 0;
              for (int64_t d = 0; d < hs; ++d)
                dot += qkv[(b * T + t) * 3 * C + hd * hs + d] *
                       qkv[(b * T + s) * 3 * C + C + hd * hs + d];
              w[s] = dot / std::sqrt(double(hs));
              mx = std::max(mx, w[s]);
            }
            double sum = 0;
            for (int64_t s = 0; s <= t; ++s)
              sum += (w[s] = std::exp(w[s] - mx));
            for (int64_t s = 0; s <= t; ++s)
              for (int64_t d = 0; d < hs; ++d)
                att[(b * T + t) * C + hd * hs + d] +=
                    w[s] / sum * qkv[(b * T + s) * 3 * C + 2 * C + hd * hs + d];
          }
      auto o = linear(att, C, C, projw + l * C * C, projb + l * C);
      for (size_t i = 0; i < x.size(); ++i)
        x[i] += o[i];
      auto h2 = layerNorm(x, ln2w + l * C, ln2b + l * C);
      auto f = linear(h2, C, H, fcw + l * H * C, fcb + l * H);
      for (double &v : f)
        v = 0.5 * v *
            (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      auto o2 = linear(f, H, C, fcpw + l * C * H, fcpb + l * C);
      for (size_t i = 0; i < x.size(); ++i)
        x[i] += o2[i];
    }
    auto xf = layerNorm(x, lnfw, lnfb);
    double total = 0;
    for (int64_t r = 0; r < B * T; ++r) {
      std::vector<double> logits(V);
      double mx = -INFINITY;
      for (int64_t v = 0; v < V; ++v) {
        double s = 0;
        for (int64_t c = 0; c < C; ++c)
          s += xf[r * C + c] * wte[v * C + c];
        logits[v] = s;
        mx = std::max(mx, s);
      }
      double sum = 0;
      for (int64_t v = 0; v < V; ++v)
        sum += std::exp(logits[v] - mx);
      total += std::log(sum) + mx - logits[batch.targets[r]];
    }
    return total / (B * T);
  }
};

/// Largest |a - b| relative to the largest |b|.
double relativeError(const std::vector<double> &a,
                     const std::vector<double> &b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

int reference(loom_model *model) {
  const loom_model_info &info = *loom_model_get_info(model);
  if (!info.tied || info.hidden != 4 * info.width)
    return failWith("the reference implements GPT-2: tied head, hidden = 4C");
  loom_model_init(model, 7);
  Batch batch = randomBatch(info, 11);
  int64_t n = info.num_params;
  float loss = 0;
  std::vector<float> grads(n);
  if (loom_model_loss_and_grad(model, batch.tokens.data(), batch.targets.data(),
                               &loss, grads.data()))
    return failWith(loom_last_error());
  const float *params = loom_model_params(model);
  std::vector<double> p(params, params + n);
  Reference ref{info.layers,       info.width,     info.heads, info.vocab,
                info.padded_vocab, info.positions, info.batch, info.sequence};
  double refLoss = ref.loss(p, batch);
  std::vector<double> refGrads(n), got(grads.begin(), grads.end());
  const double h = 1e-6;
  for (int64_t i = 0; i < n; ++i) {
    double saved = p[i];
    p[i] = saved + h;
    double up = ref.loss(p, batch);
    p[i] = saved - h;
    double down = ref.loss(p, batch);
    p[i] = saved;
    refGrads[i] = (up - down) / (2 * h);
  }
  double lossError = std::fabs(loss - refLoss) / std::fabs(refLoss);
  double gradError = relativeError(got, refGrads);
  std::printf("reference: %lld parameters, loss %.9f vs %.9f (relative "
              "difference %.3g), gradients: max difference / max gradient "
              "%.3g\n",
              static_cast<long long>(n), loss, refLoss, lossError, gradError);
  bool ok = lossError < 1e-5 && gradError < 1e-4;
  std::printf("reference: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int gradcheck(loom_model *model) {
  const loom_model_info &info = *loom_model_get_info(model);
  int64_t n = info.num_params;
  // It perturbs each parameter of the whole model in this rank's buffer.
  if (info.local_params != n)
    return failWith(("gradcheck takes single-rank artifacts: this rank "
                     "holds " +
                     std::to_string(info.local_params) + " of " +
                     std::to_string(n) + " parameters")
                        .c_str());
  // Unit-scale random values everywhere, so that no parameter (a zero bias
  // or a unit layer-norm weight) hides a wrong derivative.
  float *params = loom_model_params(model);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  for (int64_t i = 0; i < n; ++i)
    params[i] = normal(rng);
  Batch batch = randomBatch(info, 5);
  float loss = 0;
  std::vector<float> grads(n);
  if (loom_model_loss_and_grad(model, batch.tokens.data(), batch.targets.data(),
                               &loss, grads.data()))
    return failWith(loom_last_error());
  // In f32, h = 1e-2 balances truncation against rounding.
  const float h = 1e-2f;
  std::vector<double> fd(n), got(grads.begin(), grads.end());
  for (int64_t i = 0; i < n; ++i) {
    float saved = params[i], up = 0, down = 0;
    params[i] = saved + h;
    loom_model_eval(model, batch.tokens.data(), batch.targets.data(), &up);
    params[i] = saved - h;
    loom_model_eval(model, batch.tokens.data(), batch.targets.data(), &down);
    params[i] = saved;
    fd[i] = (double(up) - double(down)) / (2.0 * h);
  }
  double error = relativeError(got, fd);
  bool ok = error < 2e-2;
  std::printf("gradcheck: %lld parameters, max |VJP - finite difference| / "
              "max |gradient| = %.3g: %s\n",
              static_cast<long long>(n), error, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int overfit(loom_model *model) {
  const loom_model_info &info = *loom_model_get_info(model);
  loom_model_init(model, 1);
  Batch batch = randomBatch(info, 9);
  float first = 0, loss = 0;
  for (int step = 1; step <= 150; ++step) {
    if (loom_model_train_step(model, batch.tokens.data(), batch.targets.data(),
                              1e-2f, &loss, nullptr))
      return failWith(loom_last_error());
    if (step == 1)
      first = loss;
  }
  bool ok = loss < 0.05;
  std::printf("overfit: loss %.4f after 1 step, %.4f after 150 steps on one "
              "batch: %s\n",
              first, loss, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int checkpoint(loom_model *model, const char *artifact, const char *path) {
  const loom_model_info &info = *loom_model_get_info(model);
  loom_model_init(model, 2);
  float loss = 0;
  for (unsigned step = 0; step < 3; ++step) {
    Batch b = randomBatch(info, step);
    if (loom_model_train_step(model, b.tokens.data(), b.targets.data(), 1e-3f,
                              &loss, nullptr))
      return failWith(loom_last_error());
  }
  if (loom_model_save_checkpoint(model, path))
    return failWith(loom_last_error());
  Batch next = randomBatch(info, 100);
  float expected = 0, got = 0;
  loom_model_eval(model, next.tokens.data(), next.targets.data(), &expected);
  loom_model *fresh = loom_model_open(artifact);
  if (!fresh)
    return failWith(loom_last_error());
  loom_model_init(fresh, 99);
  if (loom_model_load_checkpoint(fresh, path))
    return failWith(loom_last_error());
  if (loom_model_train_step(fresh, next.tokens.data(), next.targets.data(),
                            1e-3f, &got, nullptr))
    return failWith(loom_last_error());
  bool ok = std::memcmp(&expected, &got, sizeof(float)) == 0;
  std::printf("checkpoint: next-step loss %.9g before saving, %.9g after "
              "loading: %s\n",
              expected, got, ok ? "PASS (bitwise identical)" : "FAIL");
  loom_model_close(fresh);
  return ok ? 0 : 1;
}

/// The first sequence's scores after each of `tokens`, the other rows and
/// positions filled with token 0, which causal attention keeps out of them.
int logits(loom_model *model, const char *weights, const char *list,
           const char *out) {
  const loom_model_info &info = *loom_model_get_info(model);
  if (loom_model_load_safetensors(model, weights))
    return failWith(loom_last_error());
  std::vector<int32_t> tokens(info.logits_rows * info.sequence, 0);
  int64_t count = 0;
  for (const char *at = list; *at && count < info.sequence; ++count) {
    char *end;
    tokens[count] = static_cast<int32_t>(std::strtol(at, &end, 10));
    if (end == at || tokens[count] < 0 || tokens[count] >= info.vocab)
      return failWith("TOKENS: expected token ids separated by commas");
    at = *end == ',' ? end + 1 : end;
  }
  std::vector<float> scores(info.logits_rows * info.sequence *
                            info.padded_vocab);
  if (loom_model_logits(model, tokens.data(), scores.data()))
    return failWith(loom_last_error());
  std::FILE *file = std::fopen(out, "wb");
  if (!file)
    return failWith("cannot open OUT");
  for (int64_t t = 0; t < count; ++t)
    std::fwrite(&scores[t * info.padded_vocab], sizeof(float), info.vocab,
                file);
  std::fclose(file);
  std::printf("logits: %lld tokens x %lld scores\n",
              static_cast<long long>(count),
              static_cast<long long>(info.vocab));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3)
    return failWith("usage: loom-check reference|gradcheck|overfit|"
                    "checkpoint|logits ARTIFACT [FILE...]");
  std::string mode = argv[1];
  loom_model *model = loom_model_open(argv[2]);
  if (!model)
    return failWith(loom_last_error());
  int rc;
  if (mode == "reference")
    rc = reference(model);
  else if (mode == "gradcheck")
    rc = gradcheck(model);
  else if (mode == "overfit")
    rc = overfit(model);
  else if (mode == "checkpoint" && argc == 4)
    rc = checkpoint(model, argv[2], argv[3]);
  else if (mode == "logits" && argc == 6)
    rc = logits(model, argv[3], argv[4], argv[5]);
  else
    rc = failWith("unknown mode or missing argument");
  loom_model_close(model);
  return rc;
}
