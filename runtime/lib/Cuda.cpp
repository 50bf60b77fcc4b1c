//===- Cuda.cpp - The CUDA backend: the device, generated code's launches -===//
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
// The GEMMs are CudaGemm.cpp's, the runtime's own kernels CudaKernels.cpp's;
// the state they share is CudaBackend.h's.
//
//===----------------------------------------------------------------------===//

#include "Device.h"
#include "Error.h"
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
#include <memory>
#include <string>

#if LOOM_HAVE_CUDA
#include "CudaBackend.h"

using namespace loom::cuda;

Backend &loom::cuda::backend() {
  // Leaked on purpose: artifacts unload their modules from static
  // destructors, which may run after this one's.
  static Backend *instance = new Backend();
  return *instance;
}

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

void *loom::cudaHostAllocate(size_t size) {
  Backend &be = backend();
  void *ptr = nullptr;
  // The host function's loops may allocate on the runtime's threads, for
  // which the context is not current yet.
  be.api.cuCtxSetCurrent(be.context);
  // Portable: pinned for every context, as NCCL's and cuBLASLt's are the
  // primary context anyway.
  if (CUresult r = be.api.cuMemHostAlloc(&ptr, size ? size : 1,
                                         CU_MEMHOSTALLOC_PORTABLE)) {
    setError("pinning %zu MiB of host memory for the offloaded step: %s "
             "(the system's limit on locked memory, `ulimit -l`, may be "
             "lower)",
             size >> 20, be.describe(r).c_str());
    return nullptr;
  }
  return ptr;
}

void loom::cudaHostFree(void *ptr) {
  if (ptr)
    backend().api.cuMemFreeHost(ptr);
}

namespace {
/// The host's sum of one piece that crossed into a stream's staging
/// memory, which the driver runs in the stream's order, on the runtime's
/// threads: the stream waits for it, and a piece's 64 MiB take a core
/// several milliseconds.
struct HostSum {
  void *dst;
  const void *src;
  size_t bytes;
  bool into;
};

void CUDA_CB sumOnHost(void *data) {
  std::unique_ptr<HostSum> sum(static_cast<HostSum *>(data));
  loom::sumFloatsOnThreads(sum->dst, sum->src, sum->bytes, sum->into);
}

/// A sum's pieces: a stream's next copy into its staging memory waits for
/// the host's sum of the last, so the memory is bounded whatever the
/// transfer's size.
constexpr size_t kStagingBytes = size_t(64) << 20;

/// Queues on `stream` the copy of `bytes` from `src` to `dst`, or, for a
/// sum, each piece's copy into `staging` and the host's sum of it.
bool queueLanding(Backend &be, CUstream stream, void *&staging, void *dst,
                  const void *src, size_t bytes, loom::Landing landing) {
  auto copy = [&](void *to, const void *from, size_t n) {
    return be.check(be.api.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(to),
                                         reinterpret_cast<CUdeviceptr>(from), n,
                                         stream),
                    "cuMemcpyAsync");
  };
  if (landing == loom::Landing::copy)
    return copy(dst, src, bytes);
  if (!staging) {
    be.api.cuCtxSetCurrent(be.context);
    if (!be.check(be.api.cuMemHostAlloc(&staging, kStagingBytes,
                                        CU_MEMHOSTALLOC_PORTABLE),
                  "cuMemHostAlloc (the pinned memory of gradient sums)"))
      return false;
  }
  for (size_t done = 0; done < bytes; done += kStagingBytes) {
    size_t piece = std::min(kStagingBytes, bytes - done);
    if (!copy(staging, static_cast<const char *>(src) + done, piece))
      return false;
    auto *sum = new HostSum{static_cast<char *>(dst) + done, staging, piece,
                            landing == loom::Landing::sumInto};
    if (!be.check(be.api.cuLaunchHostFunc(stream, sumOnHost, sum),
                  "cuLaunchHostFunc")) {
      delete sum;
      return false;
    }
  }
  return true;
}
} // namespace

void loom::cudaTransfer(void *dst, const void *src, size_t bytes, bool toHost,
                        bool wait, Landing landing) {
  Backend &be = backend();
  if (!be.failure.empty() || !bytes)
    return;
  CUevent timing = be.beginTimed();
  queueLanding(be, be.stream, be.stepStaging, dst, src, bytes, landing);
  if (timing)
    be.endTimed(timing, toHost ? "transfer to host" : "transfer to device");
  be.queued();
  if (wait)
    be.drain();
}

void loom::cudaTransferStart(void *dst, const void *src, size_t bytes,
                             bool toHost, Landing landing) {
  Backend &be = backend();
  if (!be.failure.empty() || !bytes)
    return;
  // Where the host may not touch managed memory while kernels run, every
  // piece of work is waited for anyway: the copy goes on the step's stream.
  if (!be.concurrentManagedAccess ||
      (!be.copyStream &&
       !be.check(be.api.cuStreamCreate(&be.copyStream, CU_STREAM_NON_BLOCKING),
                 "cuStreamCreate"))) {
    cudaTransfer(dst, src, bytes, toHost, /*wait=*/false, landing);
    return;
  }
  // After the step's work so far, which makes the source and last read the
  // destination.
  CUevent ready = be.event(), begin = be.event(), done = be.event();
  if (!ready || !begin || !done ||
      !be.check(be.api.cuEventRecord(ready, be.stream), "cuEventRecord") ||
      !be.check(be.api.cuStreamWaitEvent(be.copyStream, ready, 0),
                "cuStreamWaitEvent") ||
      !be.check(be.api.cuEventRecord(begin, be.copyStream), "cuEventRecord") ||
      !queueLanding(be, be.copyStream, be.copyStaging, dst, src, bytes,
                    landing) ||
      !be.check(be.api.cuEventRecord(done, be.copyStream), "cuEventRecord"))
    return;
  be.spareEvents.push_back(ready);
  be.started.push_back({dst, bytes, done});
  be.started.push_back({src, bytes, done});
  // Its time, from when the copy stream reaches it (`begin`) to an end of
  // its own: `done` is reused once the host has waited for the copy
  // stream, which may come before the time is read.
  CUevent end = be.event();
  if (end &&
      be.check(be.api.cuEventRecord(end, be.copyStream), "cuEventRecord"))
    be.spans.push_back({begin, end, &be.copySeconds});
  else
    be.spareEvents.push_back(begin);
}

void loom::cudaTransferWait(const void *ptr) {
  Backend &be = backend();
  auto at = reinterpret_cast<uintptr_t>(ptr);
  // The last copy from or into the buffer; the copy stream runs them in
  // order, so the ones before it are done too.
  for (auto it = be.started.rbegin(); it != be.started.rend(); ++it) {
    auto from = reinterpret_cast<uintptr_t>(it->begin);
    if (at < from || at >= from + it->bytes)
      continue;
    // The step's stream stands from when its work so far is done until the
    // copy is.
    CUevent before = be.event(), after = be.event();
    bool timed =
        before && after &&
        be.check(be.api.cuEventRecord(before, be.stream), "cuEventRecord");
    be.check(be.api.cuStreamWaitEvent(be.stream, it->done, 0),
             "cuStreamWaitEvent");
    if (timed &&
        be.check(be.api.cuEventRecord(after, be.stream), "cuEventRecord")) {
      be.spans.push_back({before, after, &be.copyWaitSeconds});
    } else {
      if (before)
        be.spareEvents.push_back(before);
      if (after)
        be.spareEvents.push_back(after);
    }
    be.queued();
    return;
  }
}

void loom::cudaTransfersWaitAll() {
  Backend &be = backend();
  if (!be.copyStream || be.started.empty())
    return;
  be.check(be.api.cuStreamSynchronize(be.copyStream),
           "the transfers on the GPU's copy stream");
  // Each copy is listed twice, its source and its destination.
  for (size_t i = 0; i < be.started.size(); i += 2)
    be.spareEvents.push_back(be.started[i].done);
  be.started.clear();
  be.sumSpans();
}

double loom::cudaStartedTransferSeconds() {
  Backend &be = backend();
  be.sumSpans();
  return be.copySeconds;
}

double loom::cudaTransferWaitSeconds() {
  Backend &be = backend();
  be.sumSpans();
  return be.copyWaitSeconds;
}

void loom::cudaPrefetch(const void *ptr, size_t bytes) {
  Backend &be = backend();
  // Where the host may not touch managed memory while the GPU runs, the
  // driver takes no prefetch either.
  if (!be.active || !be.concurrentManagedAccess || !ptr || !bytes ||
      !be.failure.empty())
    return;
  CUmemLocation gpu{};
  gpu.type = CU_MEM_LOCATION_TYPE_DEVICE;
  gpu.id = be.device;
  // A hint: where the driver refuses it, kernels fault the pages in as
  // they touch them, which is slower but as correct.
  if (be.api.cuMemPrefetchAsync(reinterpret_cast<CUdeviceptr>(ptr), bytes, gpu,
                                0, be.stream) == CUDA_SUCCESS)
    be.queued();
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
void *loom::cudaHostAllocate(size_t) {
  setError("this Loom runtime was built without CUDA");
  return nullptr;
}
void loom::cudaTransferStart(void *, const void *, size_t, bool, Landing) {}
void loom::cudaTransferWait(const void *) {}
void loom::cudaTransfersWaitAll() {}
double loom::cudaStartedTransferSeconds() { return 0; }
double loom::cudaTransferWaitSeconds() { return 0; }
void loom::cudaHostFree(void *) {}
void loom::cudaTransfer(void *, const void *, size_t, bool, bool, Landing) {}
void loom::cudaPrefetch(const void *, size_t) {}
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
void loom::cudaAttention(int32_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                         const void *, void *, float *) {}
void loom::cudaAttentionGrad(int32_t, int64_t, int64_t, int64_t, int64_t,
                             int64_t, const void *, const void *, const void *,
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
