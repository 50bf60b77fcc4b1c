//===- loom-bench.cpp - Training-step throughput against plain SGEMM ------===//
//
//   loom-bench [--steps N] [--warmup N] ARTIFACT...
//
// Measures, in one process, the GFLOP/s of a plain SGEMM and, for each
// artifact, the training step's tokens/s, its achieved GFLOP/s (the model's
// FLOPs as MFU counts them: loom_model_info's model_flops, abi.h) and the
// process's peak memory, so the ratio of the two figures is taken under the
// same conditions. The SGEMM it compares with is the fastest this machine
// runs: oneDNN's and each of OpenBLAS's kernel sets that the CPU can run are
// measured first, each in a process of its own (OpenBLAS takes its kernels
// when it loads, the runtime its library when it starts), and the SGEMM
// bursts beside the steps, made by the library the steps use, are scaled by
// the fastest one's ratio to it.
//
//===----------------------------------------------------------------------===//

#include "loom/rt.h"
#include "loom/runtime.h"

#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <strings.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {
double seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

/// GFLOP/s of C = A B^T with the shape of GPT-2 124M's first MLP GEMM at
/// 256 tokens (the benchmark's batch 4 x sequence 64), over `duration`
/// seconds, as generated code calls it: on the runtime's threads and its
/// library (OpenBLAS's threads at this size, one per runtime thread, or
/// oneDNN on each).
double sgemmGflops(double duration) {
  const int m = 256, n = 3072, k = 768;
  static std::vector<float> a(m * k, 0.5f), b(n * k, 0.25f), c(m * n, 0.0f);
  int reps = 0;
  auto start = std::chrono::steady_clock::now();
  do {
    loom_rt_sgemm(0, 1, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(),
                  n);
    ++reps;
  } while (seconds(start) < duration);
  return 2.0 * m * n * k * reps / seconds(start) / 1e9;
}

/// What runs this process's SGEMMs: "oneDNN", or OpenBLAS's kernel set.
std::string sgemmKernels() {
  std::string library = loom_sgemm_library();
  return library == "oneDNN" ? library : openblas_get_corename();
}

/// The GFLOP/s of sgemmGflops(1) with `kernels` (oneDNN, or a kernel set of
/// OpenBLAS's), measured by this program run again with LOOM_CPU_GEMM and
/// OPENBLAS_CORETYPE set; 0 where they were not taken.
double sgemmGflopsWith(const std::string &kernels) {
  int out[2];
  if (pipe(out))
    return 0;
  pid_t child = fork();
  if (child == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    if (kernels == "oneDNN") {
      setenv("LOOM_CPU_GEMM", "onednn", 1);
    } else {
      setenv("LOOM_CPU_GEMM", "openblas", 1);
      setenv("OPENBLAS_CORETYPE", kernels.c_str(), 1);
    }
    char name[] = "loom-bench", flag[] = "--sgemm-only";
    char *argv[] = {name, flag, nullptr};
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buffer[256];
  for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) > 0;)
    text.append(buffer, n);
  close(out[0]);
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) < 0 || !WIFEXITED(status) ||
      WEXITSTATUS(status))
    return 0;
  char taken[64];
  double gflops = 0;
  if (std::sscanf(text.c_str(), "%63s %lf", taken, &gflops) != 2 ||
      strcasecmp(taken, kernels.c_str()))
    return 0;
  return gflops;
}

/// The fastest SGEMM among OpenBLAS's kernel sets this CPU runs, oneDNN's
/// and the loaded one (which a user's OPENBLAS_CORETYPE may have picked
/// outside them), as a factor on the loaded one's figure; prints each.
double referenceFactor() {
  std::string loaded = sgemmKernels();
  std::vector<std::string> sets;
  std::istringstream listed(loom_blas_kernel_sets());
  for (std::string kernels; listed >> kernels;)
    sets.push_back(kernels);
  sets.push_back("oneDNN");
  if (std::none_of(sets.begin(), sets.end(), [&](const std::string &kernels) {
        return !strcasecmp(kernels.c_str(), loaded.c_str());
      }))
    sets.push_back(loaded);
  std::string line, best = loaded;
  double bestRate = 0, loadedRate = 0;
  for (const std::string &kernels : sets) {
    double rate = sgemmGflopsWith(kernels);
    char figure[32] = "(not taken)";
    if (rate > 0)
      std::snprintf(figure, sizeof figure, "%.1f", rate);
    line += std::string(line.empty() ? "" : ", ") +
            (kernels == "oneDNN" ? "" : "OpenBLAS ") + kernels + " " + figure;
    if (rate > bestRate)
      bestRate = rate, best = kernels;
    if (!strcasecmp(kernels.c_str(), loaded.c_str()))
      loadedRate = rate;
  }
  std::printf("SGEMM 256x3072x768 by library and kernel set, GFLOP/s: %s; "
              "the reference is the fastest, %s\n",
              line.c_str(), best.c_str());
  return loadedRate > 0 && bestRate > loadedRate ? bestRate / loadedRate : 1;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

} // namespace

int main(int argc, char **argv) {
  loom_select_blas_kernels(argv);
  if (argc == 2 && !std::strcmp(argv[1], "--sgemm-only")) {
    sgemmGflops(0.2);
    double gflops = sgemmGflops(1.0);
    std::printf("%s %.3f\n", sgemmKernels().c_str(), gflops);
    return 0;
  }
  long steps = 10, warmup = 2;
  std::vector<const char *> artifacts;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--steps") && i + 1 < argc)
      steps = std::atol(argv[++i]);
    else if (!std::strcmp(argv[i], "--warmup") && i + 1 < argc)
      warmup = std::atol(argv[++i]);
    else if (argv[i][0] == '-') {
      std::fprintf(stderr, "usage: loom-bench [--steps N] [--warmup N] "
                           "ARTIFACT...\n");
      return 1;
    } else
      artifacts.push_back(argv[i]);
  }
  if (artifacts.empty() || steps < 1 || warmup < 0) {
    std::fprintf(stderr, "usage: loom-bench [--steps N] [--warmup N] "
                         "ARTIFACT...\n");
    return 1;
  }

  // The machines this runs on are shared: each step is timed next to an
  // SGEMM burst of about the same length, and the medians are reported, so
  // that a busy neighbour slows both figures of a pair alike.
  std::printf("GEMMs: %s\n", loom_blas_kernels());
  double factor = referenceFactor();
  sgemmGflops(0.5);
  std::vector<double> sgemmAll;
  for (const char *path : artifacts) {
    loom_model *model = loom_model_open(path);
    if (!model) {
      std::fprintf(stderr, "loom-bench: error: %s\n", loom_last_error());
      return 1;
    }
    const loom_model_info &info = *loom_model_get_info(model);
    loom_model_init(model, 1);
    int64_t tokensPerStep = info.batch * info.sequence;
    std::vector<int32_t> tokens(tokensPerStep), targets(tokensPerStep);
    std::mt19937 rng(1);
    for (int64_t i = 0; i < tokensPerStep; ++i) {
      tokens[i] = rng() % info.vocab;
      targets[i] = rng() % info.vocab;
    }
    float loss;
    for (long s = 0; s < warmup; ++s)
      loom_model_train_step(model, tokens.data(), targets.data(), 1e-4f, &loss,
                            nullptr);
    double flops = info.model_flops;
    std::vector<double> stepTimes, sgemmRates, ratios;
    auto trainStep = [&] {
      if (!loom_model_train_step(model, tokens.data(), targets.data(), 1e-4f,
                                 &loss, nullptr))
        return true;
      std::fprintf(stderr, "loom-bench: error: %s\n", loom_last_error());
      return false;
    };
    for (long s = 0; s < steps; ++s) {
      // After the pause below, a step first wakes the runtime's threads and
      // refills the caches: gpt2-tiny's took 51.6 ms where back-to-back
      // steps take 24.5 on a 2-core Xeon. One untimed step first, so that
      // the timed one runs as a training run's steps do.
      if (!trainStep())
        return 1;
      auto start = std::chrono::steady_clock::now();
      if (!trainStep())
        return 1;
      double step = seconds(start);
      double sgemm = factor * sgemmGflops(std::min(std::max(step, 0.05), 0.5));
      // OpenBLAS's threads spin for about 0.1 s after a GEMM before they
      // sleep: let them, so that the burst does not slow the next step.
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      stepTimes.push_back(step);
      sgemmRates.push_back(sgemm);
      sgemmAll.push_back(sgemm);
      ratios.push_back(flops / step / 1e9 / sgemm);
    }
    double perStep = median(stepTimes);
    std::printf(
        "%s (batch %lld, sequence %lld, %lld parameters): %.1f ms/step, "
        "%.0f tokens/s, %.1f GFLOP/s = %.0f%% of SGEMM (%.1f GFLOP/s), peak "
        "memory %.0f MiB\n",
        info.name, static_cast<long long>(info.batch),
        static_cast<long long>(info.sequence),
        static_cast<long long>(info.num_params), perStep * 1e3,
        tokensPerStep / perStep, flops / perStep / 1e9, 100.0 * median(ratios),
        median(sgemmRates), loom_peak_memory_mib());
    loom_model_close(model);
  }
  std::printf("SGEMM 256x3072x768, the fastest: %.1f GFLOP/s (median of %zu "
              "runs next to the steps)\n",
              median(sgemmAll), sgemmAll.size());
  return 0;
}
