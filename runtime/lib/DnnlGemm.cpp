//===- DnnlGemm.cpp - oneDNN's GEMMs on the CPU ---------------------------===//
//
// OpenBLAS as Debian builds it has no bf16 GEMM: the runtime widens blocks
// of bf16 operands to f32 for SGEMM. Where the CPU multiplies bf16 itself
// (AMX tiles, or AVX512-BF16's dot products) and oneDNN is installed, its
// matmul takes the bf16 operands as they are, accumulating in f32: on AMX
// several times SGEMM's rate. Its SGEMM may run the f32 GEMMs too
// (CpuGemm.h), one call per thread of the runtime's.
//
// oneDNN's primitives are built for one shape and layout, at a cost of a
// millisecond: each distinct GEMM's is built once and kept. Its threads are
// OpenMP's, one per physical core: the matrix units are a core's, and two
// hyperthreads sharing one contend for it.
//
//===----------------------------------------------------------------------===//

#include "DnnlGemm.h"

#ifdef LOOM_HAVE_DNNL
#include "CpuFeatures.h"
#include "Parallel.h"
#include "loom/runtime.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <pthread.h>
#include <sched.h>

#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#endif

namespace loom {

#ifdef LOOM_HAVE_DNNL
namespace {

/// The physical cores among the CPUs this process may run on (sysfs's
/// topology), at least 1.
int physicalCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0)
    return 1;
  std::set<std::pair<std::string, std::string>> cores;
  int cpus = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set))
      continue;
    ++cpus;
    std::string dir =
        "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream core(dir + "core_id"), package(dir + "physical_package_id");
    std::string coreId, packageId;
    if (!(core >> coreId) || !(package >> packageId))
      return cpus > 0 ? cpus : 1;
    cores.insert({packageId, coreId});
  }
  return cores.empty() ? 1 : static_cast<int>(cores.size());
}

/// A GEMM's shape, layout and scaling: what a primitive is built for.
using GemmKey = std::tuple<int32_t, int32_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, float, float>;

/// A GEMM's primitive and the layouts of its operands and result.
struct Gemm {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c;
};

struct Dnnl {
  dnnl::engine engine;
  std::string kernels;
  int threads = 1;
  std::mutex mutex;
  std::map<GemmKey, Gemm> gemms;
};

/// "oneDNN 2.6.3": the library and the version loaded.
std::string libraryName() {
  const dnnl_version_t *version = dnnl_version();
  return "oneDNN " + std::to_string(version->major) + "." +
         std::to_string(version->minor) + "." + std::to_string(version->patch);
}

/// The CPU multiplies bf16 itself and oneDNN is wanted: the engine, else
/// null. LOOM_CPU_BF16_GEMM=widen keeps OpenBLAS's widened SGEMM.
Dnnl *dnnl() {
  static Dnnl *instance = []() -> Dnnl * {
    const char *wanted = std::getenv("LOOM_CPU_BF16_GEMM");
    if (wanted && std::strcmp(wanted, "widen") == 0)
      return nullptr;
    const CpuFeatures &cpu = hostCpuFeatures();
    // DNNL_MAX_CPU_ISA (ONEDNN_MAX_CPU_ISA) may keep oneDNN below the units
    // the CPU has; its bf16 matmul would then not run on them.
    dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    bool amx = cpu.has("amx-bf16") && cpu.has("amx-tile") &&
               isa == dnnl::cpu_isa::avx512_core_amx;
    bool dots =
        cpu.has("avx512bf16") && (isa == dnnl::cpu_isa::avx512_core_bf16 ||
                                  isa == dnnl::cpu_isa::avx512_core_amx);
    if (!amx && !dots)
      return nullptr;
    try {
      auto *d =
          new Dnnl{dnnl::engine(dnnl::engine::kind::cpu, 0), "", 1, {}, {}};
      d->threads = physicalCores();
      d->kernels = libraryName() + (amx ? " on AMX" : " on AVX512-BF16");
      return d;
    } catch (const dnnl::error &) {
      return nullptr;
    }
  }();
  return instance;
}

/// `rows` x `cols` bf16 or f32 in row-major storage with leading dimension
/// `ld`, read transposed when `trans`.
dnnl::memory::desc matrix(int64_t rows, int64_t cols, int64_t ld, bool trans,
                          dnnl::memory::data_type type) {
  return dnnl::memory::desc({rows, cols}, type,
                            trans ? dnnl::memory::dims{1, ld}
                                  : dnnl::memory::dims{ld, 1});
}

Gemm build(Dnnl &d, const GemmKey &key) {
  auto [transA, transB, m, n, k, lda, ldb, ldc, alpha, beta] = key;
  using type = dnnl::memory::data_type;
  dnnl::primitive_attr attr;
  if (alpha != 1.0f)
    attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
  Gemm gemm;
  gemm.a = matrix(m, k, lda, transA, type::bf16);
  gemm.b = matrix(k, n, ldb, transB, type::bf16);
  gemm.c = matrix(m, n, ldc, false, type::f32);
  gemm.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(
      dnnl::matmul::desc(gemm.a, gemm.b, gemm.c), attr, d.engine));
  return gemm;
}

} // namespace

bool dnnlGemmBf16(int32_t transA, int32_t transB, int64_t m, int64_t n,
                  int64_t k, float alpha, const void *a, int64_t lda,
                  const void *b, int64_t ldb, float beta, float *c,
                  int64_t ldc) {
  Dnnl *d = dnnl();
  if (!d || m <= 0 || n <= 0 || k <= 0)
    return false;
  GemmKey key{transA != 0, transB != 0, m, n, k, lda, ldb, ldc, alpha, beta};
  try {
    Gemm gemm;
    {
      std::lock_guard<std::mutex> lock(d->mutex);
      auto it = d->gemms.find(key);
      if (it == d->gemms.end())
        it = d->gemms.emplace(key, build(*d, key)).first;
      gemm = it->second;
    }
    // Inside the runtime's parallel loops each GEMM keeps to its thread.
    int threads =
        isInParallelLoop()
            ? 1
            : static_cast<int>(std::min<int64_t>(
                  d->threads, std::max<int64_t>(1, loom_get_num_threads())));
    omp_set_num_threads(threads);
    dnnl::memory am(gemm.a, d->engine, const_cast<void *>(a));
    dnnl::memory bm(gemm.b, d->engine, const_cast<void *>(b));
    dnnl::memory cm(gemm.c, d->engine, c);
    dnnl::stream stream(d->engine);
    gemm.primitive.execute(
        stream,
        {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream.wait();
    return true;
  } catch (const dnnl::error &) {
    return false;
  }
}

bool dnnlGemmAvailable() { return dnnl() != nullptr; }

std::string dnnlKernels() {
  Dnnl *d = dnnl();
  return d ? d->kernels : std::string();
}

bool dnnlSgemmAvailable() { return true; }

void dnnlSgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
               float alpha, const float *a, int64_t lda, const float *b,
               int64_t ldb, float beta, float *c, int64_t ldc) {
  // oneDNN's SGEMM runs on as many threads as OpenMP gives the caller: one,
  // as the runtime splits the work over its own threads.
  omp_set_num_threads(1);
  // Its kernels point the stack pointer into a heap buffer while they run
  // (oneDNN before 3.12, https://github.com/uxlfoundation/oneDNN/issues/4845),
  // so a signal handled meanwhile (loom-run's SIGINT, a scheduler's SIGTERM)
  // would write its frame over the heap: they wait until the call returns,
  // or go to a thread outside one.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  // Generated code passes shapes its buffers hold: a failure is the
  // runtime's bug, and the step cannot go on without the product.
  dnnl_status_t status = dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m,
                                    n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (status != dnnl_success) {
    std::fprintf(stderr,
                 "loom: error: oneDNN's SGEMM failed (status %d) on a "
                 "%lldx%lldx%lld product\n",
                 static_cast<int>(status), static_cast<long long>(m),
                 static_cast<long long>(n), static_cast<long long>(k));
    std::exit(1);
  }
}

std::string dnnlSgemmKernels() {
  const char *units = "SSE4.1";
  switch (dnnl::get_effective_cpu_isa()) {
  case dnnl::cpu_isa::avx:
    units = "AVX";
    break;
  case dnnl::cpu_isa::avx2:
  case dnnl::cpu_isa::avx2_vnni:
    units = "AVX2";
    break;
  case dnnl::cpu_isa::avx512_core:
  case dnnl::cpu_isa::avx512_core_vnni:
  case dnnl::cpu_isa::avx512_core_bf16:
  case dnnl::cpu_isa::avx512_core_amx:
    units = "AVX-512";
    break;
  default:
    break;
  }
  return libraryName() + ", " + units + " kernels";
}

#else

bool dnnlGemmAvailable() { return false; }

bool dnnlGemmBf16(int32_t, int32_t, int64_t, int64_t, int64_t, float,
                  const void *, int64_t, const void *, int64_t, float, float *,
                  int64_t) {
  return false;
}

std::string dnnlKernels() { return std::string(); }

bool dnnlSgemmAvailable() { return false; }

void dnnlSgemm(bool, bool, int64_t, int64_t, int64_t, float, const float *,
               int64_t, const float *, int64_t, float, float *, int64_t) {}

std::string dnnlSgemmKernels() { return std::string(); }

#endif

} // namespace loom
