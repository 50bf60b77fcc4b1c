//===- Cuda.cpp - The CUDA backend: driver API, kernels, cuBLASLt ---------===//
//
// The driver and cuBLASLt are opened with dlopen when an artifact asks for
// the GPU, not linked: the same runtime then runs CPU artifacts on machines
// without a driver, and a CUDA artifact on such a machine gets an error
// saying so instead of a loader failure.
//
// Generated code launches kernels through the C functions upstream MLIR's
// gpu-to-llvm lowering calls (mgpuModuleLoadJIT, mgpuLaunchKernel, ...);
// MLIR's own implementation of them is a library Debian does not ship, and
// this one keeps one stream for the whole step and turns failures into the
// runtime's errors. Their signatures are upstream's.
//
// Launches and GEMMs are queued on that stream without waiting: upstream's
// lowering synchronizes after every launch, which this mgpuStreamSynchronize
// leaves to loom_rt_device_wait, called by generated code where the host is
// about to touch the step's memory, and to the runtime before collectives
// and at the end of the step.
//
//===----------------------------------------------------------------------===//

#include "Device.h"
#include "Error.h"
#include "KernelModules.h"
#include "ScatterRowsPlan.h"
#include "Trace.h"
#include "loom/abi.h"
#include "loom/rt.h"
#include "loom/runtime.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#if LOOM_HAVE_CUDA
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

namespace {
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
  X(cuEventCreate)                                                             \
  X(cuEventRecord)                                                             \
  X(cuEventElapsedTime)                                                        \
  X(cuEventDestroy)                                                            \
  X(cuMemGetInfo)                                                              \
  X(cuMemAlloc)                                                                \
  X(cuMemAllocManaged)                                                         \
  X(cuMemFree)                                                                 \
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
uint32_t alignmentOf(uintptr_t address) {
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment)
    alignment /= 2;
  return alignment;
}
uint32_t alignmentOf(const void *pointer) {
  return alignmentOf(reinterpret_cast<uintptr_t>(pointer));
}

/// A loom_dtype's name in messages and kernel names.
const char *dtypeName(int32_t dtype) {
  return dtype == LOOM_DTYPE_BF16  ? "bf16"
         : dtype == LOOM_DTYPE_F16 ? "f16"
                                   : "f32";
}

/// cuBLASLt's type of A and B for a loom_dtype; C and the accumulation
/// are f32 whatever it is.
cudaDataType_t operandType(int32_t dtype) {
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
  /// alignments of.
  GemmPlan *plan(const GemmKey &key, const void *biasPointer,
                 void *auxPointer) {
    auto it = plans.find(key);
    if (it != plans.end())
      return &it->second;
    auto [dtype, transA, transB, m, n, k, lda, ldb, ldc, alignA, alignB, alignC,
          count, strideA, strideB, strideC, cDtype, bias, gelu, ldaux, alignAux,
          ldaddend, alignAddend] = key;
    cudaDataType_t operands = operandType(dtype), product = operandType(cDtype);
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B's
    // buffer is cuBLASLt's first operand, A's the second. A row-major
    // buffer read column-major is its transpose.
    GemmPlan p;
    cublasLtMatmulPreference_t preference = nullptr;
    bool kept = false;
    // The preference serves the heuristic only; the descriptors outlive
    // this call only in a plan that is kept.
    AtExit release([&] {
      if (preference)
        api.cublasLtMatmulPreferenceDestroy(preference);
      if (kept)
        return;
      if (p.desc)
        api.cublasLtMatmulDescDestroy(p.desc);
      for (cublasLtMatrixLayout_t layout : {p.a, p.b, p.c, p.addend})
        if (layout)
          api.cublasLtMatrixLayoutDestroy(layout);
    });
    cublasOperation_t opFirst = transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                      opSecond = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (!check(api.cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F,
                                            CUDA_R_32F),
               "cublasLtMatmulDescCreate") ||
        !check(api.cublasLtMatmulDescSetAttribute(p.desc,
                                                  CUBLASLT_MATMUL_DESC_TRANSA,
                                                  &opFirst, sizeof(opFirst)),
               "cublasLtMatmulDescSetAttribute") ||
        !check(api.cublasLtMatmulDescSetAttribute(p.desc,
                                                  CUBLASLT_MATMUL_DESC_TRANSB,
                                                  &opSecond, sizeof(opSecond)),
               "cublasLtMatmulDescSetAttribute") ||
        !check(api.cublasLtMatrixLayoutCreate(&p.a, operands, transB ? k : n,
                                              transB ? n : k, ldb),
               "cublasLtMatrixLayoutCreate") ||
        !check(api.cublasLtMatrixLayoutCreate(&p.b, operands, transA ? m : k,
                                              transA ? k : m, lda),
               "cublasLtMatrixLayoutCreate") ||
        !check(api.cublasLtMatrixLayoutCreate(&p.c, product, n, m, ldc),
               "cublasLtMatrixLayoutCreate"))
      return nullptr;
    // loom_rt_gemm_add's C: D's type, its own leading dimension.
    if (alignAddend && !check(api.cublasLtMatrixLayoutCreate(&p.addend, product,
                                                             n, m, ldaddend),
                              "cublasLtMatrixLayoutCreate"))
      return nullptr;
    // The bias of C's rows is, column-major, a bias of C^T's columns: the
    // epilogue's vector, one element per row of C^T (n of them), of the
    // operands' type.
    if (bias && (!check(api.cublasLtMatmulDescSetAttribute(
                            p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                            &operands, sizeof(operands)),
                        "cublasLtMatmulDescSetAttribute") ||
                 !check(api.cublasLtMatmulDescSetAttribute(
                            p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                            &biasPointer, sizeof(biasPointer)),
                        "cublasLtMatmulDescSetAttribute")))
      return nullptr;
    // The GELU's input, AUX, is a matrix like D, of D's type: written by
    // the forward epilogue, read by the backward one. Column-major it is
    // AUX^T, as D is D^T.
    cublasLtEpilogue_t epilogue =
        gelu == LOOM_GELU_FORWARD    ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                             : CUBLASLT_EPILOGUE_GELU_AUX)
        : gelu == LOOM_GELU_BACKWARD ? CUBLASLT_EPILOGUE_DGELU
        : bias                       ? CUBLASLT_EPILOGUE_BIAS
                                     : CUBLASLT_EPILOGUE_DEFAULT;
    if (!check(api.cublasLtMatmulDescSetAttribute(p.desc,
                                                  CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                  &epilogue, sizeof(epilogue)),
               "cublasLtMatmulDescSetAttribute"))
      return nullptr;
    if (gelu != kNoGelu &&
        (!check(api.cublasLtMatmulDescSetAttribute(
                    p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ldaux,
                    sizeof(ldaux)),
                "cublasLtMatmulDescSetAttribute") ||
         !check(api.cublasLtMatmulDescSetAttribute(
                    p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                    &auxPointer, sizeof(auxPointer)),
                "cublasLtMatmulDescSetAttribute")))
      return nullptr;
    if (count > 1) {
      auto batch = static_cast<int32_t>(count);
      std::pair<cublasLtMatrixLayout_t, int64_t> layouts[] = {
          {p.a, strideB}, {p.b, strideA}, {p.c, strideC}};
      for (auto &[layout, stride] : layouts)
        if (!check(api.cublasLtMatrixLayoutSetAttribute(
                       layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                       sizeof(batch)),
                   "cublasLtMatrixLayoutSetAttribute") ||
            !check(api.cublasLtMatrixLayoutSetAttribute(
                       layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                       &stride, sizeof(stride)),
                   "cublasLtMatrixLayoutSetAttribute"))
          return nullptr;
    }
    size_t workspaceBytes = kWorkspaceBytes;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (!check(api.cublasLtMatmulPreferenceCreate(&preference),
               "cublasLtMatmulPreferenceCreate") ||
        !check(api.cublasLtMatmulPreferenceSetAttribute(
                   preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                   &workspaceBytes, sizeof(workspaceBytes)),
               "cublasLtMatmulPreferenceSetAttribute"))
      return nullptr;
    // cuBLASLt's first operand is B's buffer, its second A's.
    std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignB},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignA},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
         alignAddend ? alignAddend : alignC},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignC}};
    // A split-K sum's parts add up in f32, in the workspace: the in-place
    // and output-type schemes would round each part to D's type (bf16),
    // and a rounded GEMM rounds once.
    uint32_t reductions =
        CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    if (!check(api.cublasLtMatmulPreferenceSetAttribute(
                   preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                   &reductions, sizeof(reductions)),
               "cublasLtMatmulPreferenceSetAttribute"))
      return nullptr;
    for (auto &[attribute, bytes] : alignments)
      if (!check(api.cublasLtMatmulPreferenceSetAttribute(
                     preference, attribute, &bytes, sizeof(bytes)),
                 "cublasLtMatmulPreferenceSetAttribute"))
        return nullptr;
    if (!check(api.cublasLtMatmulAlgoGetHeuristic(
                   blas, p.desc, p.a, p.b, p.addend ? p.addend : p.c, p.c,
                   preference, 1, &result, &found),
               "cublasLtMatmulAlgoGetHeuristic"))
      return nullptr;
    if (found == 0) {
      fail("cuBLASLt has no algorithm for a " + std::to_string(m) + "x" +
           std::to_string(n) + "x" + std::to_string(k) + " GEMM of " +
           dtypeName(dtype) + " matrices into " + dtypeName(cDtype) +
           (bias ? " with a bias" : "") +
           (gelu == LOOM_GELU_FORWARD    ? " and a GELU"
            : gelu == LOOM_GELU_BACKWARD ? " through a GELU's derivative"
                                         : "") +
           (alignAddend ? " and a matrix to add" : "") +
           (gelu != kNoGelu ? " (compile with --gelu=loops to keep the GELU "
                              "out of the GEMM)"
            : alignAddend   ? " (compile with --residual-add=loops to keep "
                              "the add out of the GEMM)"
                            : ""));
      return nullptr;
    }
    p.algo = result.algo;
    kept = true;
    return &(plans[key] = p);
  }
};

Backend &backend() {
  // Leaked on purpose: artifacts unload their modules from static
  // destructors, which may run after this one's.
  static Backend *instance = new Backend();
  return *instance;
}
} // namespace

bool loom::useCuda(const std::string &arch) {
  Backend &be = backend();
  if (!be.start())
    return setError("this artifact runs on a CUDA GPU, and %s",
                    be.startError.c_str());
  int wanted = 0;
  if (arch.size() < 4 || arch.compare(0, 3, "sm_") != 0 ||
      (wanted = std::atoi(arch.c_str() + 3)) <= 0)
    return setError("bad CUDA architecture '%s' in the manifest", arch.c_str());
  // PTX for sm_XX runs on that architecture and every later one.
  if (be.computeCapability < wanted)
    return setError("this artifact's kernels are compiled for %s, and this "
                    "GPU (%s) is sm_%d: recompile with --cuda-arch=sm_%d",
                    arch.c_str(), be.name, be.computeCapability,
                    be.computeCapability);
  if (!be.failure.empty())
    return setError("loading the artifact's kernels on %s failed: %s", be.name,
                    be.failure.c_str());
  be.active = true;
  return true;
}

bool loom::cudaActive() { return backend().active; }

bool loom::cudaRunsAhead() {
  Backend &be = backend();
  return be.active && be.concurrentManagedAccess;
}

void *loom::cudaAllocate(size_t size) {
  Backend &be = backend();
  size_t free = 0, total = 0;
  if (!cudaMemoryInfo(free, total))
    return nullptr;
  // Managed memory past what the GPU has free would be paged in and out on
  // every touch, if the driver does not refuse it first.
  if (size > free) {
    setError("out of GPU memory on %s: a buffer of %zu MiB does not fit in "
             "the %zu MiB free (of %zu MiB)",
             be.name, size >> 20, free >> 20, total >> 20);
    return nullptr;
  }
  CUdeviceptr ptr = 0;
  if (CUresult r = be.api.cuMemAllocManaged(&ptr, size ? size : 1,
                                            CU_MEM_ATTACH_GLOBAL)) {
    setError("allocating %zu bytes on %s: %s", size, be.name,
             be.describe(r).c_str());
    return nullptr;
  }
  return reinterpret_cast<void *>(ptr);
}

void loom::cudaFree(void *ptr) {
  if (ptr)
    backend().api.cuMemFree(reinterpret_cast<CUdeviceptr>(ptr));
}

bool loom::cudaMemoryInfo(size_t &free, size_t &total) {
  Backend &be = backend();
  if (!be.ready)
    return setError("the CUDA backend is not started");
  if (CUresult r = be.api.cuMemGetInfo(&free, &total))
    return setError("cuMemGetInfo: %s", be.describe(r).c_str());
  return true;
}

std::string loom::cudaBusId() {
  Backend &be = backend();
  char id[32] = {};
  if (!be.ready || be.api.cuDeviceGetPCIBusId(id, sizeof(id) - 1, be.device))
    return "";
  return id;
}

bool loom::cudaSynchronize() {
  Backend &be = backend();
  be.drain();
  if (!be.failure.empty())
    return setError("%s: %s", be.name, be.failure.c_str());
  return true;
}

void *loom::cudaStream() { return backend().stream; }

void loom::cudaQueued() { backend().queued(); }

void loom::cudaWait() {
  Backend &be = backend();
  if (be.active && be.pending)
    be.drain();
}

void loom::cudaSetWaitProgress(bool (*progress)()) {
  backend().waitProgress = progress;
}

namespace {
/// A GEMM's operands beyond loom_rt_gemm_batched's: C's element type, the
/// bias of its rows (null for none), loom_rt_gemm_gelu's epilogue, and
/// loom_rt_gemm_add's C (the GEMM's C then being its D).
struct GemmOutput {
  int32_t dtype;
  const void *bias;
  int32_t gelu = kNoGelu;
  void *aux = nullptr;
  int64_t ldaux = 0;
  const void *addend = nullptr;
  int64_t ldaddend = 0;
};

void runGemm(int32_t dtype, int32_t transA, int32_t transB, int64_t m,
             int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
             const void *b, int64_t ldb, float beta, void *c, int64_t ldc,
             int64_t count0, const int64_t strides0[3], int64_t count1,
             const int64_t strides1[3], GemmOutput output) {
  Backend &be = backend();
  if (!be.failure.empty() || count0 <= 0 || count1 <= 0)
    return;
  size_t bytes = loom::elementSize(dtype),
         cBytes = loom::elementSize(output.dtype);
  auto at = [](const void *base, int64_t elements, size_t size) {
    return static_cast<const char *>(base) + elements * size;
  };
  // The alignment every matrix of a batch has: the first's, and that of
  // the steps between them.
  auto alignment = [&](const void *first, int64_t stride0, int64_t stride1,
                       size_t size) {
    return std::min({alignmentOf(first),
                     alignmentOf(static_cast<uintptr_t>(stride0) * size),
                     alignmentOf(static_cast<uintptr_t>(stride1) * size)});
  };
  GemmPlan *p = be.plan(GemmKey{dtype,
                                transA,
                                transB,
                                m,
                                n,
                                k,
                                lda,
                                ldb,
                                ldc,
                                alignment(a, strides0[0], strides1[0], bytes),
                                alignment(b, strides0[1], strides1[1], bytes),
                                alignment(c, strides0[2], strides1[2], cBytes),
                                count1,
                                count1 > 1 ? strides1[0] : 0,
                                count1 > 1 ? strides1[1] : 0,
                                count1 > 1 ? strides1[2] : 0,
                                output.dtype,
                                output.bias ? alignmentOf(output.bias) : 0,
                                output.gelu,
                                output.ldaux,
                                output.aux ? alignmentOf(output.aux) : 0,
                                output.ldaddend,
                                output.addend ? alignmentOf(output.addend) : 0},
                        output.bias, output.aux);
  if (!p)
    return;
  // The plan is kept per shape; the bias and AUX move from call to call (a
  // layer's slice of the stacked biases and activations).
  if (output.bias && !be.check(be.api.cublasLtMatmulDescSetAttribute(
                                   p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                   &output.bias, sizeof(output.bias)),
                               "cublasLtMatmulDescSetAttribute"))
    return;
  if (output.aux &&
      !be.check(be.api.cublasLtMatmulDescSetAttribute(
                    p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                    &output.aux, sizeof(output.aux)),
                "cublasLtMatmulDescSetAttribute"))
    return;
  // One strided-batched matmul of the inner GEMMs per outer one.
  CUevent timing = be.beginTimed();
  for (int64_t i = 0; i < count0 && be.failure.empty(); ++i) {
    const void *ai = at(a, i * strides0[0], bytes),
               *bi = at(b, i * strides0[1], bytes);
    void *ci = const_cast<char *>(at(c, i * strides0[2], cBytes));
    // loom_rt_gemm_add reads its own C; other GEMMs update theirs in place.
    const void *in = output.addend ? output.addend : ci;
    be.check(be.api.cublasLtMatmul(be.blas, p->desc, &alpha, bi, p->a, ai, p->b,
                                   &beta, in, p->addend ? p->addend : p->c, ci,
                                   p->c, &p->algo,
                                   reinterpret_cast<void *>(be.workspace),
                                   kWorkspaceBytes, be.stream),
             "cublasLtMatmul");
  }
  if (timing)
    be.endTimed(timing, "GEMM " + std::to_string(count0 * count1) + "x " +
                            std::to_string(m) + "x" + std::to_string(n) + "x" +
                            std::to_string(k) +
                            (output.dtype != LOOM_DTYPE_F32 ? " rounded" : "") +
                            (output.gelu == LOOM_GELU_FORWARD    ? " gelu"
                             : output.gelu == LOOM_GELU_BACKWARD ? " dgelu"
                                                                 : "") +
                            (output.addend ? " add" : ""));
  be.queued();
}

const int64_t kNoStrides[3] = {0, 0, 0};
} // namespace

void loom::cudaGemm(int32_t dtype, int32_t transA, int32_t transB, int64_t m,
                    int64_t n, int64_t k, float alpha, const void *a,
                    int64_t lda, const void *b, int64_t ldb, float beta,
                    float *c, int64_t ldc) {
  runGemm(dtype, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
          1, kNoStrides, 1, kNoStrides, GemmOutput{LOOM_DTYPE_F32, nullptr});
}

void loom::cudaGemmBatched(int32_t dtype, int32_t transA, int32_t transB,
                           int64_t m, int64_t n, int64_t k, float alpha,
                           const void *a, int64_t lda, const void *b,
                           int64_t ldb, float beta, float *c, int64_t ldc,
                           int64_t count0, const int64_t strides0[3],
                           int64_t count1, const int64_t strides1[3]) {
  runGemm(dtype, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
          count0, strides0, count1, strides1,
          GemmOutput{LOOM_DTYPE_F32, nullptr});
}

void loom::cudaGemmRounded(int32_t dtype, int32_t transA, int32_t transB,
                           int64_t m, int64_t n, int64_t k, float alpha,
                           const void *a, int64_t lda, const void *b,
                           int64_t ldb, const void *bias, void *d,
                           int64_t ldd) {
  runGemm(dtype, transA, transB, m, n, k, alpha, a, lda, b, ldb, 0.0f, d, ldd,
          1, kNoStrides, 1, kNoStrides, GemmOutput{dtype, bias});
}

void loom::cudaGemmAdd(int32_t dtype, int32_t transA, int32_t transB, int64_t m,
                       int64_t n, int64_t k, float alpha, const void *a,
                       int64_t lda, const void *b, int64_t ldb,
                       const void *bias, const void *c, int64_t ldc, void *d,
                       int64_t ldd) {
  Backend &be = backend();
  // The compiler emits nothing else.
  if (!gemmAddTakes(dtype, m, n, c, ldc, d, ldd)) {
    if (be.failure.empty())
      be.fail("loom_rt_gemm_add: dtype " + std::to_string(dtype) +
              ", leading dimension " + std::to_string(ldc) + " of " +
              std::to_string(n) + " columns" +
              (c && matricesOverlap(m, n, c, ldc, d, ldd) ? ", C overlapping D"
                                                          : "") +
              ": the add takes bf16 or f16 and a matrix C of D's shape that "
              "shares no memory with D");
    return;
  }
  GemmOutput output{dtype, bias};
  output.addend = c;
  output.ldaddend = ldc;
  runGemm(dtype, transA, transB, m, n, k, alpha, a, lda, b, ldb, 1.0f, d, ldd,
          1, kNoStrides, 1, kNoStrides, output);
}

void loom::cudaGemmGelu(int32_t dtype, int32_t mode, int32_t transA,
                        int32_t transB, int64_t m, int64_t n, int64_t k,
                        float alpha, const void *a, int64_t lda, const void *b,
                        int64_t ldb, const void *bias, void *aux, int64_t ldaux,
                        void *d, int64_t ldd) {
  Backend &be = backend();
  // What cuBLASLt's epilogues take; the compiler emits nothing else.
  if ((dtype != LOOM_DTYPE_BF16 && dtype != LOOM_DTYPE_F16) ||
      (mode != LOOM_GELU_FORWARD && mode != LOOM_GELU_BACKWARD) ||
      (mode == LOOM_GELU_BACKWARD && bias) || ldaux % 8 != 0 || ldaux < n) {
    if (be.failure.empty())
      be.fail("loom_rt_gemm_gelu: dtype " + std::to_string(dtype) + ", mode " +
              std::to_string(mode) + ", leading dimension " +
              std::to_string(ldaux) + " of " + std::to_string(n) +
              " columns: cuBLASLt's GELU epilogues take bf16 or f16, the "
              "forward or backward mode, a bias forward only and a leading "
              "dimension that is a multiple of 8");
    return;
  }
  runGemm(dtype, transA, transB, m, n, k, alpha, a, lda, b, ldb, 0.0f, d, ldd,
          1, kNoStrides, 1, kNoStrides,
          GemmOutput{dtype, bias, mode, aux, ldaux});
}

namespace {
/// The kernel `name` of `module`, whose block size is the one its
/// __launch_bounds__ declares, which the driver reports as its most.
Backend::Kernel kernelOf(Backend &be, CUmodule module,
                         const std::string &name) {
  Backend::Kernel kernel;
  kernel.function = be.function(module, name.c_str());
  int threads = 0;
  if (kernel.function &&
      be.check(be.api.cuFuncGetAttribute(
                   &threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                   kernel.function),
               "cuFuncGetAttribute"))
    kernel.threads = static_cast<unsigned>(threads);
  return kernel;
}

/// The kernels for heads of `headDim` stored as `dtype`: those of the
/// smallest bound that holds the head, built for the newest architecture
/// the GPU runs. Null, with the failure recorded, when none does.
const Backend::AttentionKernels *attentionKernels(Backend &be, int32_t dtype,
                                                  int64_t headDim) {
  const loom::KernelModule *best = nullptr;
  for (int i = 0; i < loom::kAttentionModuleCount; ++i) {
    const loom::KernelModule &m = loom::kAttentionModules[i];
    if (m.dtype != dtype || m.headBound < headDim ||
        m.arch > be.computeCapability)
      continue;
    if (!best || m.headBound < best->headBound ||
        (m.headBound == best->headBound && m.arch > best->arch))
      best = &m;
  }
  if (!best) {
    be.fail("fused attention on the GPU takes heads of at most " +
            std::to_string(LOOM_CUDA_ATTENTION_MAX_HEAD_DIM) +
            " channels (this step's have " + std::to_string(headDim) +
            "); compile with --attention=materialized");
    return nullptr;
  }
  auto key = std::make_pair(dtype, best->headBound);
  auto found = be.attention.find(key);
  if (found != be.attention.end())
    return &found->second;
  std::string suffix = std::string("_") + dtypeName(dtype) + "_" +
                       std::to_string(best->headBound);
  CUmodule module =
      be.load(best->ptx, 4, "the attention kernels (" + suffix.substr(1) + ")");
  if (!module)
    return nullptr;
  Backend::AttentionKernels kernels;
  auto get = [&](const char *kind) {
    return kernelOf(be, module, std::string("loom_attention_") + kind + suffix);
  };
  kernels.forward = get("forward");
  kernels.delta = get("delta");
  kernels.keyGrad = get("key_grad");
  kernels.queryGrad = get("query_grad");
  kernels.querySums = dtype != LOOM_DTYPE_F32;
  // The tensor cores' key gradient takes more shared memory than a launch
  // gets unless the kernel asks for it.
  if (kernels.querySums && kernels.keyGrad.function) {
    kernels.keyGrad.sharedBytes =
        static_cast<unsigned>(loom::attentionGradSharedBytes(best->headBound));
    be.check(be.api.cuFuncSetAttribute(
                 kernels.keyGrad.function,
                 CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                 static_cast<int>(kernels.keyGrad.sharedBytes)),
             "cuFuncSetAttribute (the key gradient's shared memory)");
  }
  if (!be.failure.empty())
    return nullptr;
  return &(be.attention[key] = kernels);
}

/// One call of the attention kernels: which, their grid (a block for 64
/// rows of one (batch, head) pair) and their scalar arguments.
struct AttentionLaunch {
  const Backend::AttentionKernels *kernels;
  unsigned grid[3];
  int seq, heads, headDim;
  float scale;

  void launch(Backend &be, const Backend::Kernel &kernel, void **params) const {
    be.launch(kernel.function, grid[0], grid[1], grid[2], kernel.threads, 1, 1,
              kernel.sharedBytes, params);
  }
};

/// The launch of a call with these sizes; none when the call has nothing
/// to do or cannot run (the failure recorded).
std::optional<AttentionLaunch> attentionLaunch(Backend &be, int32_t dtype,
                                               int64_t batch, int64_t seq,
                                               int64_t heads, int64_t headDim) {
  constexpr int64_t kRows = 64, kMaxGridYZ = 65535;
  if (!be.failure.empty() || batch <= 0 || seq <= 0 || heads <= 0)
    return std::nullopt;
  if (batch > kMaxGridYZ || heads > kMaxGridYZ || seq > INT32_MAX ||
      headDim > INT32_MAX) {
    be.fail("fused attention of " + std::to_string(batch) + " sequences of " +
            std::to_string(seq) + " tokens and " + std::to_string(heads) +
            " heads exceeds the GPU's grid");
    return std::nullopt;
  }
  const Backend::AttentionKernels *kernels =
      attentionKernels(be, dtype, headDim);
  if (!kernels)
    return std::nullopt;
  return AttentionLaunch{kernels,
                         {static_cast<unsigned>((seq + kRows - 1) / kRows),
                          static_cast<unsigned>(heads),
                          static_cast<unsigned>(batch)},
                         static_cast<int>(seq),
                         static_cast<int>(heads),
                         static_cast<int>(headDim),
                         loom::attentionScale(headDim)};
}
} // namespace

void loom::cudaAttention(int32_t dtype, int64_t batch, int64_t seq,
                         int64_t heads, int64_t headDim, const void *qkv,
                         void *out, float *lse) {
  Backend &be = backend();
  std::optional<AttentionLaunch> l =
      attentionLaunch(be, dtype, batch, seq, heads, headDim);
  if (!l)
    return;
  void *params[] = {&qkv,      &out,        &lse,     &l->seq,
                    &l->heads, &l->headDim, &l->scale};
  l->launch(be, l->kernels->forward, params);
}

void loom::cudaAttentionGrad(int32_t dtype, int64_t batch, int64_t seq,
                             int64_t heads, int64_t headDim, const void *qkv,
                             const void *out, const void *dout,
                             const float *lse, void *dqkv, float *delta) {
  Backend &be = backend();
  std::optional<AttentionLaunch> l =
      attentionLaunch(be, dtype, batch, seq, heads, headDim);
  if (!l)
    return;
  // The scratch's query gradient sums, where the kernels take them
  // (loom_attention_grad_scratch).
  float *sums =
      l->kernels->querySums
          ? delta + loom_attention_query_sums_offset(batch * heads * seq)
          : nullptr;
  void *deltaParams[] = {&out,    &dout,     &delta,     &sums,
                         &l->seq, &l->heads, &l->headDim};
  l->launch(be, l->kernels->delta, deltaParams);
  void *gradParams[] = {&qkv,  &lse,    &dout,     &delta,      &sums,
                        &dqkv, &l->seq, &l->heads, &l->headDim, &l->scale};
  l->launch(be, l->kernels->keyGrad, gradParams);
  l->launch(be, l->kernels->queryGrad, gradParams);
}

void loom::cudaScatterAddRows(int32_t dtype, int64_t n, int64_t rows,
                              int64_t columns, int64_t rowStart,
                              const int32_t *indices, const void *updates,
                              float *out, int32_t *scratch) {
  Backend &be = backend();
  if (!be.failure.empty() || n <= 0 || rows <= 0 || columns <= 0)
    return;
  if (dtype < LOOM_DTYPE_F32 || dtype > LOOM_DTYPE_F16) {
    be.fail("the rows' scatter-add takes f32, bf16 or f16 updates, not "
            "dtype " +
            std::to_string(dtype));
    return;
  }
  constexpr int64_t kMaxGridY = 65535;
  if (!loom_scatter_add_rows_fits(n, rows) || columns > INT32_MAX ||
      (columns + loom::kScatterThreads - 1) / loom::kScatterThreads >
          kMaxGridY) {
    be.fail("the rows' scatter-add of " + std::to_string(n) + " indices into " +
            std::to_string(rows) + " x " + std::to_string(columns) +
            " exceeds its kernels' int32 indices and grid");
    return;
  }
  if (!be.scatter) {
    CUmodule module =
        be.load(loom::kScatterRowsPtx, 4, "the rows' scatter-add kernels");
    if (!module)
      return;
    Backend::ScatterKernels k;
    k.rank = kernelOf(be, module, "loom_scatter_rank");
    k.offsets = kernelOf(be, module, "loom_scatter_offsets");
    k.scan = kernelOf(be, module, "loom_scatter_scan");
    k.place = kernelOf(be, module, "loom_scatter_place");
    for (int32_t type : {LOOM_DTYPE_F32, LOOM_DTYPE_BF16, LOOM_DTYPE_F16})
      k.add[type] = kernelOf(
          be, module, std::string("loom_scatter_add_") + dtypeName(type));
    if (!be.failure.empty())
      return;
    be.scatter = k;
  }
  const Backend::ScatterKernels &k = *be.scatter;
  loom::ScatterRowsPlan p =
      loom::planScatterRows(n, rows, columns, rowStart, scratch);
  // Each kernel's block is the size its index arithmetic assumes.
  auto launch = [&](const Backend::Kernel &kernel, unsigned blocksX,
                    unsigned blocksY, int threads, void **params) {
    if (kernel.threads != static_cast<unsigned>(threads))
      return be.fail("the rows' scatter-add kernels take blocks of " +
                     std::to_string(threads) + " threads, the driver " +
                     std::to_string(kernel.threads));
    be.launch(kernel.function, blocksX, blocksY, 1, threads, 1, 1, 0, params);
  };
  void *rankParams[] = {&indices, &p.n,      &p.rowStart,
                        &p.rows,  &p.counts, &p.rank};
  launch(k.rank, p.rankBlocks, 1, loom::kScatterThreads, rankParams);
  void *offsetParams[] = {&p.counts, &p.chunks, &p.rows, &p.begin};
  launch(k.offsets, p.offsetBlocks, 1, loom::kScatterThreads, offsetParams);
  void *scanParams[] = {&p.rows, &p.begin};
  launch(k.scan, 1, 1, loom::kScatterScanThreads, scanParams);
  void *placeParams[] = {&indices,  &p.n,    &p.rowStart, &p.rows,
                         &p.counts, &p.rank, &p.begin,    &p.order};
  launch(k.place, p.placeBlocks, 1, loom::kScatterThreads, placeParams);
  void *addParams[] = {&updates, &p.columns, &p.begin, &p.order, &out};
  launch(k.add[dtype], p.addBlocksX, p.addBlocksY, loom::kScatterThreads,
         addParams);
}

void loom::cudaSoftmaxStats(int32_t dtype, int64_t rows, int64_t columns,
                            int64_t classes, const void *logits, float *max,
                            float *sumExp) {
  Backend &be = backend();
  if (!be.failure.empty() || rows <= 0)
    return;
  if (dtype < LOOM_DTYPE_F32 || dtype > LOOM_DTYPE_F16 || classes < 1 ||
      classes > columns || rows > INT32_MAX) {
    be.fail("the softmax statistics of " + std::to_string(rows) + " rows of " +
            std::to_string(classes) + " of " + std::to_string(columns) +
            " columns, dtype " + std::to_string(dtype) +
            ": the kernels take f32, bf16 or f16 logits, at least one class "
            "and at most 2^31 - 1 rows");
    return;
  }
  if (!be.softmaxStats) {
    CUmodule module =
        be.load(loom::kSoftmaxStatsPtx, 4, "the softmax statistics' kernels");
    if (!module)
      return;
    std::array<Backend::Kernel, 3> kernels;
    for (int32_t type : {LOOM_DTYPE_F32, LOOM_DTYPE_BF16, LOOM_DTYPE_F16})
      kernels[type] = kernelOf(
          be, module, std::string("loom_softmax_stats_") + dtypeName(type));
    if (!be.failure.empty())
      return;
    be.softmaxStats = kernels;
  }
  const Backend::Kernel &kernel = (*be.softmaxStats)[dtype];
  // The block's shared arrays and its merge assume their size.
  if (kernel.threads != static_cast<unsigned>(loom::kSoftmaxStatsThreads))
    return be.fail("the softmax statistics' kernels take blocks of " +
                   std::to_string(loom::kSoftmaxStatsThreads) +
                   " threads, the driver " + std::to_string(kernel.threads));
  // 16-byte loads where every row starts on 16 bytes.
  size_t size = loom::elementSize(dtype);
  int32_t vectorized =
      alignmentOf(logits) >= 16 && (columns * size) % 16 == 0 ? 1 : 0;
  long long cols = columns, used = classes;
  void *params[] = {&logits, &cols, &used, &vectorized, &max, &sumExp};
  be.launch(kernel.function, static_cast<unsigned>(rows), 1, 1,
            loom::kSoftmaxStatsThreads, 1, 1, 0, params);
}

extern "C" {

CUmodule mgpuModuleLoadJIT(void *data, int optLevel) {
  Backend &be = backend();
  if (!be.start()) {
    be.fail(be.startError);
    return nullptr;
  }
  return be.load(data, optLevel, "a kernel's PTX");
}

void mgpuModuleUnload(CUmodule module) {
  if (module)
    backend().api.cuModuleUnload(module);
}

CUfunction mgpuModuleGetFunction(CUmodule module, const char *name) {
  return backend().function(module, name);
}

CUstream mgpuStreamCreate() { return backend().stream; }

void mgpuStreamDestroy(CUstream) {}

// Upstream's lowering calls this after every launch; the host waits only
// where it touches memory (loom_rt_device_wait).
void mgpuStreamSynchronize(CUstream) {}

void loom_rt_device_wait(void) { loom::cudaWait(); }

void mgpuLaunchKernel(CUfunction function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, CUstream, void **params,
                      void **extra, size_t /*paramsCount*/) {
  backend().launch(function, gridX, gridY, gridZ, blockX, blockY, blockZ, smem,
                   params, extra);
}

} // extern "C"

#else  // !LOOM_HAVE_CUDA

bool loom::useCuda(const std::string &) {
  return setError("this artifact runs on a CUDA GPU, and this Loom runtime "
                  "was built without CUDA (no CUDA toolkit at configure "
                  "time)");
}
bool loom::cudaActive() { return false; }
bool loom::cudaRunsAhead() { return false; }
void *loom::cudaAllocate(size_t) {
  setError("this Loom runtime was built without CUDA");
  return nullptr;
}
void loom::cudaFree(void *) {}
bool loom::cudaMemoryInfo(size_t &, size_t &) {
  return setError("this Loom runtime was built without CUDA");
}
std::string loom::cudaBusId() { return ""; }
bool loom::cudaSynchronize() { return true; }
void loom::cudaWait() {}
void loom::cudaSetWaitProgress(bool (*)()) {}
void *loom::cudaStream() { return nullptr; }
void loom::cudaQueued() {}
void loom::cudaGemm(int32_t, int32_t, int32_t, int64_t, int64_t, int64_t, float,
                    const void *, int64_t, const void *, int64_t, float,
                    float *, int64_t) {}
void loom::cudaGemmBatched(int32_t, int32_t, int32_t, int64_t, int64_t, int64_t,
                           float, const void *, int64_t, const void *, int64_t,
                           float, float *, int64_t, int64_t, const int64_t[3],
                           int64_t, const int64_t[3]) {}
void loom::cudaGemmRounded(int32_t, int32_t, int32_t, int64_t, int64_t, int64_t,
                           float, const void *, int64_t, const void *, int64_t,
                           const void *, void *, int64_t) {}
void loom::cudaGemmAdd(int32_t, int32_t, int32_t, int64_t, int64_t, int64_t,
                       float, const void *, int64_t, const void *, int64_t,
                       const void *, const void *, int64_t, void *, int64_t) {}
void loom::cudaGemmGelu(int32_t, int32_t, int32_t, int32_t, int64_t, int64_t,
                        int64_t, float, const void *, int64_t, const void *,
                        int64_t, const void *, void *, int64_t, void *,
                        int64_t) {}
void loom::cudaAttention(int32_t, int64_t, int64_t, int64_t, int64_t,
                         const void *, void *, float *) {}
void loom::cudaAttentionGrad(int32_t, int64_t, int64_t, int64_t, int64_t,
                             const void *, const void *, const void *,
                             const float *, void *, float *) {}
void loom::cudaSoftmaxStats(int32_t, int64_t, int64_t, int64_t, const void *,
                            float *, float *) {}
void loom::cudaScatterAddRows(int32_t, int64_t, int64_t, int64_t, int64_t,
                              const int32_t *, const void *, float *,
                              int32_t *) {}

// An artifact compiled for the GPU still loads, so that its manifest can
// say why it does not run; its module constructors find no GPU.
extern "C" {
void *mgpuModuleLoadJIT(void *, int) { return nullptr; }
void mgpuModuleUnload(void *) {}
void *mgpuModuleGetFunction(void *, const char *) { return nullptr; }
void *mgpuStreamCreate() { return nullptr; }
void mgpuStreamDestroy(void *) {}
void mgpuStreamSynchronize(void *) {}
void loom_rt_device_wait(void) {}
void mgpuLaunchKernel(void *, intptr_t, intptr_t, intptr_t, intptr_t, intptr_t,
                      intptr_t, int32_t, void *, void **, void **, size_t) {}
}
#endif // LOOM_HAVE_CUDA

std::string loom::rankGpuId(const std::string &processorName,
                            const std::string &busId) {
  if (busId.empty())
    return "";
  // A bus id names a GPU of one machine, and identical machines number
  // theirs alike: the host goes with it, named as NCCL names it.
  const char *hostId = std::getenv("NCCL_HOSTID");
  std::string host = hostId ? std::string(hostId).substr(0, kNcclHostBytes - 1)
                            : processorName;
  return host + " GPU " + busId;
}

std::optional<std::pair<int, int>>
loom::ranksSharingGpu(const std::vector<std::string> &gpuIds) {
  std::map<std::string, int> first;
  for (int rank = 0; rank < static_cast<int>(gpuIds.size()); ++rank) {
    if (gpuIds[rank].empty())
      continue;
    auto [at, inserted] = first.emplace(gpuIds[rank], rank);
    if (!inserted)
      return std::make_pair(at->second, rank);
  }
  return std::nullopt;
}
