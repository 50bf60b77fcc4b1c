//===- CudaBackend.h - The CUDA backend's state -----------------*- C++ -*-===//
//
// What the CUDA backend's files share (Cuda.cpp: the device, streams and
// the launches generated code asks for; CudaGemm.cpp: cuBLASLt's GEMMs;
// CudaKernels.cpp: the runtime's own kernels): the driver and cuBLASLt
// functions opened with dlopen, and the one Backend of the process. Only
// with LOOM_HAVE_CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDABACKEND_H
#define LOOM_RUNTIME_CUDABACKEND_H

#include "Device.h"
#include "Error.h"
#include "Trace.h"
#include "loom/rt.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include <cublasLt.h>
#include <cuda.h>
#include <dlfcn.h>
#include <sched.h>

#include <array>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace loom::cuda {
#define LOOM_STRINGIFY_(x) #x
#define LOOM_STRINGIFY(x) LOOM_STRINGIFY_(x)
// The driver functions used, with the versioned symbol cuda.h maps each
// name to (cuMemGetInfo is cuMemGetInfo_v2, and so on).
#define LOOM_CUDA_DRIVER_FUNCTIONS(X)                                          \
  X(cuInit)                                                                    \
  X(cuGetErrorString)                                                          \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetName)                                                           \
  X(cuDeviceGetPCIBusId)                                                       \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuCtxSetCurrent)                                                           \
  X(cuStreamCreate)                                                            \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamQuery)                                                             \
  X(cuStreamWaitEvent)                                                         \
  X(cuEventCreate)                                                             \
  X(cuEventRecord)                                                             \
  X(cuEventQuery)                                                              \
  X(cuEventElapsedTime)                                                        \
  X(cuEventDestroy)                                                            \
  X(cuMemGetInfo)                                                              \
  X(cuMemAlloc)                                                                \
  X(cuMemAllocManaged)                                                         \
  X(cuMemPrefetchAsync)                                                        \
  X(cuMemFree)                                                                 \
  X(cuMemHostAlloc)                                                            \
  X(cuMemFreeHost)                                                             \
  X(cuMemcpyAsync)                                                             \
  X(cuLaunchHostFunc)                                                          \
  X(cuModuleLoadDataEx)                                                        \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncGetAttribute)                                                        \
  X(cuFuncSetAttribute)                                                        \
  X(cuModuleUnload)                                                            \
  X(cuLaunchKernel)
#define LOOM_CUBLASLT_FUNCTIONS(X)                                             \
  X(cublasLtCreate)                                                            \
  X(cublasLtGetStatusString)                                                   \
  X(cublasLtMatmulDescCreate)                                                  \
  X(cublasLtMatmulDescSetAttribute)                                            \
  X(cublasLtMatrixLayoutCreate)                                                \
  X(cublasLtMatrixLayoutSetAttribute)                                          \
  X(cublasLtMatmulDescDestroy)                                                 \
  X(cublasLtMatrixLayoutDestroy)                                               \
  X(cublasLtMatmulPreferenceCreate)                                            \
  X(cublasLtMatmulPreferenceSetAttribute)                                      \
  X(cublasLtMatmulPreferenceDestroy)                                           \
  X(cublasLtMatmulAlgoGetHeuristic)                                            \
  X(cublasLtMatmul)

struct Api {
#define LOOM_DECLARE(fn) decltype(&::fn) fn = nullptr;
  LOOM_CUDA_DRIVER_FUNCTIONS(LOOM_DECLARE)
  LOOM_CUBLASLT_FUNCTIONS(LOOM_DECLARE)
#undef LOOM_DECLARE
};

/// One GEMM shape's cuBLASLt descriptors and the algorithm chosen for it,
/// kept for the next call of that shape.
struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  /// loom_rt_gemm_add's C, which the product's D (`c`) does not share.
  cublasLtMatrixLayout_t addend = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

/// Runs a function when the scope ends, however it ends.
template <typename F> class AtExit {
public:
  explicit AtExit(F f) : f(std::move(f)) {}
  ~AtExit() { f(); }
  AtExit(const AtExit &) = delete;
  AtExit &operator=(const AtExit &) = delete;

private:
  F f;
};
/// What a plan depends on: the operands' element type (loom_dtype), the
/// transpositions, the shape, the leading dimensions, the alignments of
/// A, B and C in bytes, for a strided batch the number of GEMMs and the
/// elements between consecutive A, B and C (1 and zeros otherwise), C's
/// element type, the alignment of the bias added to C's rows (0 for
/// none), the GELU of loom_rt_gemm_gelu (a loom_gelu_mode, or kNoGelu)
/// with its auxiliary matrix's leading dimension and alignment, and
/// loom_rt_gemm_add's C's leading dimension and alignment (0 for none).
/// The heuristic assumes 256-byte aligned matrices unless told otherwise
/// (the bias's and the auxiliary matrix's it reads off their pointers),
/// and an algorithm it picks for those fails on a view at a smaller
/// alignment.
using GemmKey =
    std::tuple<int32_t, int32_t, int32_t, int64_t, int64_t, int64_t, int64_t,
               int64_t, int64_t, uint32_t, uint32_t, uint32_t, int64_t, int64_t,
               int64_t, int64_t, int32_t, uint32_t, int32_t, int64_t, uint32_t,
               int64_t, uint32_t>;

/// A GEMM without loom_rt_gemm_gelu's epilogue.
constexpr int32_t kNoGelu = -1;

/// The largest power of two up to 256 that divides `address`.
inline uint32_t alignmentOf(uintptr_t address) {
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment)
    alignment /= 2;
  return alignment;
}
inline uint32_t alignmentOf(const void *pointer) {
  return alignmentOf(reinterpret_cast<uintptr_t>(pointer));
}

/// A loom_dtype's name in messages and kernel names.
inline const char *dtypeName(int32_t dtype) {
  return dtype == LOOM_DTYPE_BF16  ? "bf16"
         : dtype == LOOM_DTYPE_F16 ? "f16"
                                   : "f32";
}

/// cuBLASLt's type of A and B for a loom_dtype; C and the accumulation
/// are f32 whatever it is.
inline cudaDataType_t operandType(int32_t dtype) {
  switch (dtype) {
  case LOOM_DTYPE_BF16:
    return CUDA_R_16BF;
  case LOOM_DTYPE_F16:
    return CUDA_R_16F;
  default:
    return CUDA_R_32F;
  }
}

/// cuBLASLt's scratch space; 32 MiB is what its heuristics assume on Hopper.
constexpr size_t kWorkspaceBytes = 32u << 20;

struct Backend {
  std::mutex mutex;
  bool tried = false, ready = false;
  /// Why the backend could not start, or the first failure of the step.
  std::string startError, failure;
  Api api;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  /// The started transfers' stream (loom_rt_transfer_start), made at the
  /// first; and each started copy's bytes on either side with the event
  /// after it, until the host next waits for that stream.
  CUstream copyStream = nullptr;
  struct StartedCopy {
    const void *begin;
    size_t bytes;
    CUevent done;
  };
  std::vector<StartedCopy> started;
  /// Two events around a stretch of a stream's work whose time is summed
  /// once both are complete: a started copy on the copy stream (from when
  /// the stream reaches it), or the step's stream waiting for one.
  struct Span {
    CUevent begin, end;
    double *total;
  };
  std::vector<Span> spans;
  double copySeconds = 0, copyWaitSeconds = 0;
  /// Pinned memory a sum's pieces cross into before the host adds them
  /// (loom_rt_transfer_add), one for each stream, made at the first.
  void *stepStaging = nullptr, *copyStaging = nullptr;
  int computeCapability = 0;
  char name[256] = {};
  cublasLtHandle_t blas = nullptr;
  CUdeviceptr workspace = 0;
  std::map<GemmKey, GemmPlan> plans;
  bool active = false;
  /// Whether work was queued on the stream since the last wait.
  bool pending = false;
  /// Whether the host may touch managed memory while kernels run (Linux
  /// on Pascal and later). Where it may not, each piece of work is waited
  /// for as it is queued: the runtime's heap writes its blocks' headers
  /// from the host.
  bool concurrentManagedAccess = false;
  /// Called while waiting, until it returns false (cudaSetWaitProgress).
  bool (*waitProgress)() = nullptr;

  /// Notes work just queued on the stream.
  void queued() {
    pending = true;
    if (!concurrentManagedAccess)
      drain();
  }
  /// Waits for all the queued work, after a failure too (work queued
  /// before it may still be running); only the first failure is kept.
  /// While tracing, the timed work becomes spans.
  void drain() {
    pending = false;
    CUresult waited = CUDA_ERROR_NOT_READY;
    // A pipeline's send may wait a whole step for its receiver: past the
    // first polls, sleep between them, leaving the cores to ranks and
    // NCCL's threads that share them.
    constexpr int kEagerPolls = 1000;
    if (waitProgress)
      for (int polls = 0;
           (waited = api.cuStreamQuery(stream)) == CUDA_ERROR_NOT_READY &&
           waitProgress();
           ++polls) {
        if (polls < kEagerPolls)
          sched_yield();
        else
          std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    if (waited == CUDA_ERROR_NOT_READY)
      waited = api.cuStreamSynchronize(stream);
    if (check(waited, "the step on the GPU") && failure.empty()) {
      flushTimed();
      sumSpans();
      return;
    }
    for (Timed &t : timed) {
      spareEvents.push_back(t.start);
      spareEvents.push_back(t.end);
    }
    timed.clear();
  }

  /// While tracing: the work queued since the last wait, each between two
  /// events, named by its kernel or GEMM; events for reuse; each kernel's
  /// name.
  struct Timed {
    std::string name;
    CUevent start, end;
  };
  std::vector<Timed> timed;
  std::vector<CUevent> spareEvents;
  std::map<CUfunction, std::string> kernelNames;
  /// A kernel of the runtime's own and the threads of its blocks.
  struct Kernel {
    CUfunction function = nullptr;
    unsigned threads = 0;
    /// Dynamic shared memory a launch gives each block.
    unsigned sharedBytes = 0;
  };
  /// The attention kernels of a storage type (loom_dtype) and head
  /// bound, loaded at their first call.
  struct AttentionKernels {
    Kernel forward, delta, keyGrad, queryGrad;
    /// Whether the gradient's kernels sum the query gradient in f32 scratch
    /// (the tensor cores' kernels: loom_attention_grad_scratch's
    /// query_sums).
    bool querySums = false;
  };
  std::map<std::pair<int32_t, int32_t>, AttentionKernels> attention;
  /// The rows' scatter-add kernels (kernels/ScatterRows.cu), loaded at
  /// their first call.
  struct ScatterKernels {
    Kernel rank, offsets, scan, place;
    /// The sums, for updates of each loom_dtype.
    Kernel add[3];
  };
  std::optional<ScatterKernels> scatter;
  /// The softmax statistics' kernels, for logits of each loom_dtype.
  std::optional<std::array<Kernel, 3>> softmaxStats;

  CUevent event() {
    if (!spareEvents.empty()) {
      CUevent e = spareEvents.back();
      spareEvents.pop_back();
      return e;
    }
    CUevent e = nullptr;
    if (!check(api.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate"))
      return nullptr;
    return e;
  }
  /// Adds the time of each span whose events are complete to its total;
  /// the others wait for a later call.
  void sumSpans() {
    size_t kept = 0;
    for (Span &span : spans) {
      float ms = 0;
      if (api.cuEventQuery(span.end) != CUDA_SUCCESS ||
          api.cuEventElapsedTime(&ms, span.begin, span.end) != CUDA_SUCCESS) {
        spans[kept++] = span;
        continue;
      }
      *span.total += ms * 1e-3;
      spareEvents.push_back(span.begin);
      spareEvents.push_back(span.end);
    }
    spans.resize(kept);
  }
  /// The event before a piece of work while tracing, else null.
  CUevent beginTimed() {
    if (!loom::traceActive() || !failure.empty())
      return nullptr;
    CUevent start = event();
    if (start && !check(api.cuEventRecord(start, stream), "cuEventRecord"))
      return nullptr;
    return start;
  }
  void endTimed(CUevent start, std::string name) {
    if (!start)
      return;
    CUevent end = event();
    if (end && check(api.cuEventRecord(end, stream), "cuEventRecord"))
      timed.push_back({std::move(name), start, end});
  }
  /// After the stream is done: the timed work as spans of the trace's GPU
  /// track. The GPU's times are placed on the host's clock from an event
  /// recorded now, which completes as soon as it is queued.
  void flushTimed() {
    if (timed.empty())
      return;
    CUevent now = event();
    loom::TraceClock::time_point hostNow;
    bool ok = now && check(api.cuEventRecord(now, stream), "cuEventRecord") &&
              check(api.cuStreamSynchronize(stream), "cuStreamSynchronize");
    hostNow = loom::TraceClock::now();
    for (Timed &t : timed) {
      float sinceStart = 0, duration = 0;
      if (ok && failure.empty() &&
          check(api.cuEventElapsedTime(&sinceStart, t.start, now),
                "cuEventElapsedTime") &&
          check(api.cuEventElapsedTime(&duration, t.start, t.end),
                "cuEventElapsedTime"))
        loom::traceDeviceSpan(
            t.name,
            hostNow -
                std::chrono::duration_cast<loom::TraceClock::duration>(
                    std::chrono::duration<double, std::milli>(sinceStart)),
            duration * 1e3);
      spareEvents.push_back(t.start);
      spareEvents.push_back(t.end);
    }
    timed.clear();
    if (now)
      spareEvents.push_back(now);
  }

  /// Compiles `ptx` for this GPU, or null with the failure recorded.
  CUmodule load(const void *ptx, int optLevel, const std::string &what) {
    char log[4096] = {};
    CUjit_option options[] = {CU_JIT_OPTIMIZATION_LEVEL,
                              CU_JIT_ERROR_LOG_BUFFER,
                              CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {reinterpret_cast<void *>(static_cast<intptr_t>(optLevel)),
                      log, reinterpret_cast<void *>(sizeof(log) - 1)};
    CUmodule module = nullptr;
    if (CUresult r = api.cuModuleLoadDataEx(&module, ptx, 3, options, values)) {
      fail("compiling " + what + ": " + describe(r) +
           (log[0] ? std::string(": ") + log : std::string()));
      return nullptr;
    }
    return module;
  }
  /// The kernel `name` of `module`, or null with the failure recorded.
  CUfunction function(CUmodule module, const char *name) {
    CUfunction function = nullptr;
    if (module && check(api.cuModuleGetFunction(&function, module, name),
                        "cuModuleGetFunction"))
      kernelNames[function] = name;
    return function;
  }
  /// Queues a kernel on the step's stream, timed while tracing.
  void launch(CUfunction function, unsigned gridX, unsigned gridY,
              unsigned gridZ, unsigned blockX, unsigned blockY, unsigned blockZ,
              unsigned sharedBytes, void **params, void **extra = nullptr) {
    if (!failure.empty())
      return;
    if (!function) {
      fail("launching a kernel that was not loaded");
      return;
    }
    CUevent timing = beginTimed();
    check(api.cuLaunchKernel(function, gridX, gridY, gridZ, blockX, blockY,
                             blockZ, sharedBytes, stream, params, extra),
          "cuLaunchKernel");
    if (timing)
      endTimed(timing, kernelNames[function]);
    queued();
  }

  /// Records the first failure; later calls of the step are skipped, and
  /// the runtime reports it when the step returns.
  void fail(const std::string &what) {
    if (failure.empty())
      failure = what;
  }
  std::string describe(CUresult result) {
    const char *text = nullptr;
    if (api.cuGetErrorString)
      api.cuGetErrorString(result, &text);
    return text ? text : "CUDA error " + std::to_string(result);
  }
  bool check(CUresult result, const char *what) {
    if (result == CUDA_SUCCESS)
      return true;
    fail(std::string(what) + ": " + describe(result));
    return false;
  }
  bool check(cublasStatus_t status, const char *what) {
    if (status == CUBLAS_STATUS_SUCCESS)
      return true;
    fail(std::string(what) + ": " + api.cublasLtGetStatusString(status));
    return false;
  }

  /// Loads the libraries and makes this process's GPU current: once, on the
  /// first use from the artifact's module loads or its manifest.
  bool start() {
    std::lock_guard<std::mutex> lock(mutex);
    if (tried)
      return ready;
    tried = true;
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!driver) {
      startError = "no NVIDIA driver (libcuda.so.1 cannot be loaded: " +
                   std::string(dlerror()) + ")";
      return false;
    }
    const char *blasPath = std::getenv("LOOM_CUBLASLT");
    void *blasLib = dlopen(blasPath ? blasPath : "libcublasLt.so.13",
                           RTLD_NOW | RTLD_LOCAL);
    if (!blasLib) {
      startError = "cuBLASLt cannot be loaded (" + std::string(dlerror()) +
                   "); put CUDA 13's libcublasLt.so.13 on LD_LIBRARY_PATH "
                   "or name it in LOOM_CUBLASLT";
      return false;
    }
#define LOOM_LOAD(lib, fn)                                                     \
  api.fn = reinterpret_cast<decltype(api.fn)>(dlsym(lib, LOOM_STRINGIFY(fn))); \
  if (!api.fn) {                                                               \
    startError = std::string("the CUDA libraries lack ") +                     \
                 LOOM_STRINGIFY(fn) + " (driver or cuBLASLt too old?)";        \
    return false;                                                              \
  }
#define LOOM_LOAD_DRIVER(fn) LOOM_LOAD(driver, fn)
#define LOOM_LOAD_BLAS(fn) LOOM_LOAD(blasLib, fn)
    LOOM_CUDA_DRIVER_FUNCTIONS(LOOM_LOAD_DRIVER)
    LOOM_CUBLASLT_FUNCTIONS(LOOM_LOAD_BLAS)
#undef LOOM_LOAD_BLAS
#undef LOOM_LOAD_DRIVER
#undef LOOM_LOAD
    auto startFailed = [&](CUresult result, const char *what) {
      startError = std::string(what) + ": " + describe(result);
      return false;
    };
    if (CUresult r = api.cuInit(0))
      return startFailed(r, "cuInit (no usable GPU?)");
    int count = 0;
    if (CUresult r = api.cuDeviceGetCount(&count))
      return startFailed(r, "cuDeviceGetCount");
    if (count == 0) {
      startError = "no CUDA GPU is visible to this process";
      return false;
    }
    // One GPU per process of a node, as torchrun and mpirun number them.
    int local = 0;
    for (const char *var : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"})
      if (const char *v = std::getenv(var)) {
        local = std::atoi(v);
        break;
      }
    if (CUresult r = api.cuDeviceGet(&device, local % count))
      return startFailed(r, "cuDeviceGet");
    api.cuDeviceGetName(name, sizeof(name) - 1, device);
    int major = 0, minor = 0;
    api.cuDeviceGetAttribute(
        &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    api.cuDeviceGetAttribute(
        &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    computeCapability = major * 10 + minor;
    int concurrent = 0;
    api.cuDeviceGetAttribute(
        &concurrent, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, device);
    concurrentManagedAccess = concurrent != 0;
    if (CUresult r = api.cuDevicePrimaryCtxRetain(&context, device))
      return startFailed(r, "cuDevicePrimaryCtxRetain");
    if (CUresult r = api.cuCtxSetCurrent(context))
      return startFailed(r, "cuCtxSetCurrent");
    if (CUresult r = api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING))
      return startFailed(r, "cuStreamCreate");
    if (cublasStatus_t s = api.cublasLtCreate(&blas)) {
      startError =
          std::string("cublasLtCreate: ") + api.cublasLtGetStatusString(s);
      return false;
    }
    if (CUresult r = api.cuMemAlloc(&workspace, kWorkspaceBytes))
      return startFailed(r, "allocating cuBLASLt's workspace");
    ready = true;
    return true;
  }

  /// The plan of `key`, made on its first call, whose bias and auxiliary
  /// matrix (loom_rt_gemm_gelu's), or nulls, the heuristic reads the
  /// alignments of (CudaGemm.cpp).
  GemmPlan *plan(const GemmKey &key, const void *biasPointer, void *auxPointer);

private:
  /// Describes `key`'s GEMM into `p`: the operation, its epilogue and the
  /// layouts of its matrices.
  bool describeGemm(GemmPlan &p, const GemmKey &key, const void *biasPointer,
                    void *auxPointer);
  /// Sets `p`'s algorithm: the heuristic's best for `key`'s alignments.
  bool pickAlgorithm(GemmPlan &p, const GemmKey &key);
};

/// The process's backend, started by the first artifact that asks for it.
Backend &backend();
} // namespace loom::cuda

#endif // LOOM_RUNTIME_CUDABACKEND_H
