//===- Device.h - The device backend the runtime runs on --------*- C++ -*-===//
//
// The CPU backend is always there. The CUDA backend is switched on by an
// artifact compiled with --target=cuda; from then on every buffer of the
// step (the heap of generated code, the model's parameters, gradients and
// optimizer state) is memory the GPU reads and writes, GEMMs go to
// cuBLASLt and generated code launches its kernels through the mgpu*
// functions.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DEVICE_H
#define LOOM_RUNTIME_DEVICE_H

#include "loom/runtime.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loom {
/// The bytes of one element of a loom_dtype: f32, or bf16 and f16.
inline int64_t elementSize(int32_t dtype) {
  return dtype == LOOM_DTYPE_F32 ? 4 : 2;
}

/// The heap of generated code (Memory.cpp): blocks of the step, managed
/// memory under the CUDA backend, kept per size when freed. Null, with the
/// error set where the backend says why, when none can be had.
void *heapAllocate(size_t alignment, size_t size);
void heapFree(void *ptr);
/// Whether the host runs an offload plan's host function (between
/// loom_rt_host_begin and loom_rt_host_end).
bool inHostCall();
/// Waits for every started transfer (loom_rt_transfer_start): before the
/// host reads what was sent to it, and at the end of an entry point's call.
void transfersWaitAll();
/// Brackets one call of an entry point, whose own allocations
/// loom_heap_step_peak_bytes counts.
void heapBeginCall();
void heapEndCall();
/// While one is alive (and enabled), the heap's blocks are host memory,
/// counted apart (loom_heap_host_peak_bytes): the master weights and
/// optimizer state an offload plan keeps on the host.
class HostMemoryScope {
public:
  explicit HostMemoryScope(bool enabled);
  ~HostMemoryScope();
  HostMemoryScope(const HostMemoryScope &) = delete;
  HostMemoryScope &operator=(const HostMemoryScope &) = delete;

private:
  bool enabled;
};

/// Switches the runtime to its CUDA backend for kernels compiled for `arch`
/// (sm_XX): loads the driver and cuBLASLt, picks this process's GPU
/// (LOCAL_RANK, or MPI's local rank, modulo the GPUs it sees) and checks
/// that it can run them. False, with the error set, when it cannot.
bool useCuda(const std::string &arch);
/// Whether the CUDA backend is on.
bool cudaActive();
/// Whether the host goes on while the GPU runs what was queued: where the
/// host may not touch managed memory meanwhile, each piece of work is
/// waited for as it is queued.
bool cudaRunsAhead();
/// Memory both the host and the GPU address (CUDA managed memory), or null
/// with the error set. Only while the CUDA backend is on.
void *cudaAllocate(size_t size);
void cudaFree(void *ptr);
/// Pinned host memory (page-locked, which the GPU's copy engines read and
/// write at the host link's full speed), or null with the error set:
/// an offload plan's host memory. Only while the CUDA backend is on.
void *cudaHostAllocate(size_t size);
void cudaHostFree(void *ptr);
/// What a transfer leaves in its destination: the source's elements, or
/// their sum with zero or with what the destination held (f32,
/// loom_rt_transfer_add).
enum class Landing { copy, sumFromZero, sumInto };
/// The host's part of a sum: `dst` = `src` + (`into` ? `dst` : 0), f32 by
/// f32, in the order a device's loom.add of an accumulator would.
void sumFloats(void *dst, const void *src, size_t bytes, bool into);
/// sumFloats split among the runtime's threads where it is large: the same
/// elements. For a thread that runs while the step's own work does not use
/// the threads (a GPU's host function); on the CPU the step computes on
/// them, and its GEMMs set OpenBLAS's threads around each loop.
void sumFloatsOnThreads(void *dst, const void *src, size_t bytes, bool into);
/// loom_rt_transfer under the CUDA backend: `bytes` from `src` to `dst`
/// (either in host or GPU memory), queued on the step's stream after the
/// work that makes `src` and before the work that follows. With `wait`
/// the host waits for it before going on. A sum crosses into pinned
/// memory of the backend's, piece by piece, and the host adds each piece
/// in the stream's order.
void cudaTransfer(void *dst, const void *src, size_t bytes, bool toHost,
                  bool wait, Landing landing = Landing::copy);
/// loom_rt_transfer_start and loom_rt_transfer_wait under the CUDA backend:
/// the copy queued on the copy stream after the step's work so far, and
/// the step's stream made to wait for the last one from or into `ptr`.
void cudaTransferStart(void *dst, const void *src, size_t bytes, bool toHost,
                       Landing landing = Landing::copy);
void cudaTransferWait(const void *ptr);
/// The host waits for the copy stream.
void cudaTransfersWaitAll();
/// Seconds the copy stream spent on the started transfers, and seconds the
/// step's stream stood waiting for them (loom_started_transfer_seconds,
/// loom_transfer_wait_seconds), over those complete so far.
double cudaStartedTransferSeconds();
double cudaTransferWaitSeconds();
/// Moves `bytes` of managed memory from `ptr` to the GPU, queued on the
/// step's stream, so that kernels find it there rather than fault each
/// page in on first touch (GPT-2 1.5B's first step took 5.7 s where the
/// next took 0.37 on an H200). Nothing where the driver cannot prefetch
/// (or refuses to: a hint, not a failure), or without the CUDA backend.
void cudaPrefetch(const void *ptr, size_t bytes);
/// Bytes of device memory free and in all.
bool cudaMemoryInfo(size_t &free, size_t &total);
/// The PCI bus id of this process's GPU ("0000:1A:00.0"), which tells
/// the processes of one machine on one GPU apart from those on two; empty
/// without the CUDA backend.
std::string cudaBusId();
/// The bytes of a host's name NCCL compares, its terminating null
/// included.
constexpr int kNcclHostBytes = 1024;
/// The id of a rank's GPU that ranksSharingGpu compares: its host's name
/// and its GPU's PCI bus id (empty where the bus id is). The host is the
/// one NCCL sees: NCCL_HOSTID where the environment sets it, even empty
/// (machines NCCL should take for one, or ranks it should take for
/// several), its first kNcclHostBytes - 1 bytes as NCCL reads it;
/// `processorName` otherwise.
std::string rankGpuId(const std::string &processorName,
                      const std::string &busId);
/// The first two ranks, in rank order, whose GPUs have the same id in
/// `gpuIds` (one per rank of a group, its host's name and its GPU's bus
/// id; an empty id matches none). NCCL takes one rank per GPU and refuses
/// such a group.
std::optional<std::pair<int, int>>
ranksSharingGpu(const std::vector<std::string> &gpuIds);
/// Waits for the GPU's work; false, with the error set, when any launch,
/// GEMM or kernel of the step failed since the backend started.
bool cudaSynchronize();
/// The stream (a CUstream) the step's work is queued on, for NCCL.
void *cudaStream();
/// Notes work queued on that stream by others than the backend (NCCL), for
/// the next wait.
void cudaQueued();
/// Waits for the GPU's work if any was queued since the last wait, before
/// the host touches memory the GPU may be using; a failure is recorded
/// for the step to return. Nothing while the CUDA backend is off.
void cudaWait();
/// Has every wait for the GPU call `progress` over and over, for as long
/// as it returns true, instead of blocking: MPI moves a message sent
/// before the wait on only inside its calls, and the rank receiving it
/// may be what the queued work (an NCCL collective with that rank) waits
/// for. Null to block again.
void cudaSetWaitProgress(bool (*progress)());
/// loom_rt_scatter_add_rows on the GPU: kernels queued on the step's
/// stream (kernels/ScatterRows.cu).
void cudaScatterAddRows(int32_t dtype, int64_t n, int64_t rows, int64_t columns,
                        int64_t rowStart, const int32_t *indices,
                        const void *updates, float *out, int32_t *scratch);
/// Row-major GEMM on the GPU (loom_rt_gemm's contract): A and B of
/// `dtype` (a loom_dtype), C and the accumulation f32.
void cudaGemm(int32_t dtype, int32_t transA, int32_t transB, int64_t m,
              int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
              const void *b, int64_t ldb, float beta, float *c, int64_t ldc);
/// `count0` x `count1` GEMMs of cudaGemm's form (loom_rt_gemm_batched's
/// contract; strides in elements, of A, B and C): one cuBLASLt
/// strided-batched matmul of `count1` per outer index.
void cudaGemmBatched(int32_t dtype, int32_t transA, int32_t transB, int64_t m,
                     int64_t n, int64_t k, float alpha, const void *a,
                     int64_t lda, const void *b, int64_t ldb, float beta,
                     float *c, int64_t ldc, int64_t count0,
                     const int64_t strides0[3], int64_t count1,
                     const int64_t strides1[3]);
/// cudaGemm's product with `bias` (n elements of `dtype`, or null) added to
/// its rows, rounded to `dtype` into D (loom_rt_gemm_rounded's contract):
/// cuBLASLt's bias epilogue.
void cudaGemmRounded(int32_t dtype, int32_t transA, int32_t transB, int64_t m,
                     int64_t n, int64_t k, float alpha, const void *a,
                     int64_t lda, const void *b, int64_t ldb, const void *bias,
                     void *d, int64_t ldd);
/// Whether two [m, n] matrices of 2-byte elements, at `a` and `b` with
/// leading dimensions `lda` and `ldb`, share a byte (from the first
/// element of each to its last).
inline bool matricesOverlap(int64_t m, int64_t n, const void *a, int64_t lda,
                            const void *b, int64_t ldb) {
  if (m <= 0 || n <= 0)
    return false;
  auto begin = [](const void *p) { return reinterpret_cast<uintptr_t>(p); };
  auto end = [&](const void *p, int64_t ld) {
    return begin(p) + static_cast<uintptr_t>(((m - 1) * ld + n) * 2);
  };
  return end(a, lda) > begin(b) && end(b, ldb) > begin(a);
}
/// Whether loom_rt_gemm_add takes these arguments on either backend: bf16
/// or f16 elements, and a C of D's shape sharing no byte with D. cuBLASLt
/// on an H100 adds a product rounded to bf16 to C when C is D, which
/// rounds twice.
inline bool gemmAddTakes(int32_t dtype, int64_t m, int64_t n, const void *c,
                         int64_t ldc, const void *d, int64_t ldd) {
  return (dtype == LOOM_DTYPE_BF16 || dtype == LOOM_DTYPE_F16) && c &&
         ldc >= n && !matricesOverlap(m, n, c, ldc, d, ldd);
}
/// loom_rt_gemm_add's product on the GPU: cuBLASLt's beta = 1 with C.
void cudaGemmAdd(int32_t dtype, int32_t transA, int32_t transB, int64_t m,
                 int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
                 const void *b, int64_t ldb, const void *bias, const void *c,
                 int64_t ldc, void *d, int64_t ldd);
/// loom_rt_gemm_gelu's product on the GPU: cuBLASLt's GELU_AUX(_BIAS) and
/// DGELU epilogues.
void cudaGemmGelu(int32_t dtype, int32_t mode, int32_t transA, int32_t transB,
                  int64_t m, int64_t n, int64_t k, float alpha, const void *a,
                  int64_t lda, const void *b, int64_t ldb, const void *bias,
                  void *aux, int64_t ldaux, void *d, int64_t ldd);
/// loom_rt_softmax_stats on the GPU (kernels/SoftmaxStats.cu).
void cudaSoftmaxStats(int32_t dtype, int64_t rows, int64_t columns,
                      int64_t classes, const void *logits, float *max,
                      float *sumExp);
/// Attention's score scale, 1 / sqrt(head_dim), rounded once to f32 as
/// the compiler's loops round it.
inline float attentionScale(int64_t headDim) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(headDim)));
}
/// loom_rt_attention and loom_rt_attention_grad on the GPU (their
/// contracts): kernels queued on the step's stream.
void cudaAttention(int32_t dtype, int64_t batch, int64_t seq, int64_t heads,
                   int64_t groups, int64_t headDim, const void *qkv, void *out,
                   float *lse);
void cudaAttentionGrad(int32_t dtype, int64_t batch, int64_t seq, int64_t heads,
                       int64_t groups, int64_t headDim, const void *qkv,
                       const void *out, const void *dout, const float *lse,
                       void *dqkv, float *delta);
} // namespace loom

#endif // LOOM_RUNTIME_DEVICE_H
