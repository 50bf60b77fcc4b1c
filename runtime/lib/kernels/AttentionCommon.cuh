//===- AttentionCommon.cuh - What the attention kernels share ---*- CUDA
//-*-===//
//
// The pieces of the fused attention's GPU kernels that do not depend on how
// they compute: conversions between the storage types and f32, where one
// (batch, head) pair's rows are, the output's row dot products, and the
// kernels' names and signatures, which the CUDA backend (Cuda.cpp) looks up
// in every module. Attention.cu computes on the CUDA cores (f32 storage),
// AttentionMma.cu on the tensor cores (bf16 and f16).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_KERNELS_ATTENTIONCOMMON_CUH
#define LOOM_RUNTIME_KERNELS_ATTENTIONCOMMON_CUH

// The unit tests compile the kernels for the CPU, with types and built-ins
// of their own (test/unit/EmulatedCuda.h).
#ifndef LOOM_EMULATE_CUDA
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace {
/// Queries per block in every module, and keys per block of the key
/// gradient on the CUDA cores: the backend's grid (the tensor cores' key
/// gradient takes kAttentionMmaKeyRows, KernelModules.h).
constexpr int kRows = 64;

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ float widen(__half x) { return __half2float(x); }

template <typename T> __device__ T narrow(float x);
template <> __device__ __forceinline__ float narrow<float>(float x) {
  return x;
}
template <> __device__ __forceinline__ __nv_bfloat16 narrow(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half narrow(float x) {
  return __float2half_rn(x);
}

/// Where one call's tensors are (rt.h's layouts) for the block's sequence
/// (blockIdx.z) and one of its query heads: [seq, 3, heads, headDim] rows,
/// or under grouped-query attention (`groups` key/value heads, each shared
/// by `perGroup` query heads) [seq, groups, perGroup + 2, headDim] rows,
/// each group's query heads then its key head and its value head. The
/// gradient `dqkv` has qkv's layout, so the same offsets.
struct Pair {
  int seq, heads, groups, headDim, perGroup;
  long long qkvStride, outStride;
  long long qkv[3], out, rows;

  /// The pair of blockIdx.y's query head.
  __device__ Pair(int seq, int heads, int groups, int headDim)
      : seq(seq), heads(heads), groups(groups), headDim(headDim),
        perGroup(groups ? heads / groups : 1) {
    outStride = static_cast<long long>(heads) * headDim;
    qkvStride = groups ? static_cast<long long>(heads + 2 * groups) * headDim
                       : 3 * outStride;
    select(blockIdx.y);
  }

  /// The key/value heads: a kernel that walks the keys takes one a block
  /// (blockIdx.y), and the query heads that read it in turn.
  __device__ int keyHeads() const { return groups ? groups : heads; }
  /// The `member`th query head reading key/value head `keyHead`.
  __device__ int queryHead(int keyHead, int member) const {
    return keyHead * perGroup + member;
  }

  /// Points the offsets at query head `h` and the key and value heads it
  /// reads.
  __device__ void select(int h) {
    long long b = blockIdx.z, start = b * seq * qkvStride;
    if (groups) {
      long long group = start + static_cast<long long>(h / perGroup) *
                                    (perGroup + 2) * headDim;
      qkv[0] = group + static_cast<long long>(h % perGroup) * headDim;
      qkv[1] = group + static_cast<long long>(perGroup) * headDim;
      qkv[2] = qkv[1] + headDim;
    } else {
      for (int part = 0; part < 3; ++part)
        qkv[part] =
            start + part * outStride + static_cast<long long>(h) * headDim;
    }
    out = b * seq * outStride + static_cast<long long>(h) * headDim;
    rows = (b * heads + h) * seq;
  }
};

/// Each query's dot product of its output and the output's gradient, a
/// warp per query: its lanes read neighbouring channels, where a thread
/// walking a query's row alone read one element of each of 32 rows at a
/// time. The block's kRows threads take its kRows queries a warp at a time.
template <typename T>
__device__ void delta(const T *out, const T *dout, float *delta, int seq,
                      int heads, int groups, int headDim) {
  Pair p(seq, heads, groups, headDim);
  int lane = threadIdx.x % 32, warps = kRows / 32;
  int first = blockIdx.x * kRows, end = min(first + kRows, seq);
  for (int i = first + threadIdx.x / 32; i < end; i += warps) {
    float sum = 0.0f;
    for (int d = lane; d < headDim; d += 32) {
      long long at = p.out + i * p.outStride + d;
      sum += widen(out[at]) * widen(dout[at]);
    }
    for (int offset = 16; offset > 0; offset /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0)
      delta[p.rows + i] = sum;
  }
}
} // namespace

/// Shared memory whose size the launch gives (Type's), for more than a
/// block's 48 KB of static shared memory; on the CPU, a static variable.
#ifdef LOOM_EMULATE_CUDA
#define LOOM_DYNAMIC_SHARED(Type, name) static Type name
#else
#define LOOM_DYNAMIC_SHARED(Type, name)                                        \
  extern __shared__ __align__(16) unsigned char loomDynamicShared[];           \
  Type &name = *reinterpret_cast<Type *>(loomDynamicShared)
#endif

/// The four kernels of a module, for storage type T and head bound MAXD,
/// from the file's templates forward<T, MAXD>, gradDelta<T, MAXD>,
/// keyGrad<T, MAXD> and queryGrad<T, MAXD>. The gradient's kernels share
/// `sums`, the f32 scratch past each query's dot product in the call's
/// scratch, which the tensor-core kernels sum the query gradient in and the
/// CUDA cores' leave alone. Each declares its block size with
/// __launch_bounds__, which the backend reads back to launch it: THREADS
/// for forward and query_grad, with at least BLOCKS of them resident on a
/// multiprocessor, GRAD_THREADS and GRAD_BLOCKS for key_grad, and kRows
/// threads for delta.
#define LOOM_ATTENTION_KERNELS(T, NAME, MAXD, THREADS, BLOCKS, GRAD_THREADS,   \
                               GRAD_BLOCKS)                                    \
  extern "C" __global__ void __launch_bounds__(THREADS, BLOCKS)                \
      loom_attention_forward_##NAME##_##MAXD(const T *qkv, T *out, float *lse, \
                                             int seq, int heads, int groups,   \
                                             int headDim, float scale) {       \
    forward<T, MAXD>(qkv, out, lse, seq, heads, groups, headDim, scale);       \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kRows)                          \
      loom_attention_delta_##NAME##_##MAXD(                                    \
          const T *out, const T *dout, float *d, float *sums, int seq,         \
          int heads, int groups, int headDim) {                                \
    gradDelta<T, MAXD>(out, dout, d, sums, seq, heads, groups, headDim);       \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(GRAD_THREADS, GRAD_BLOCKS)      \
      loom_attention_key_grad_##NAME##_##MAXD(                                 \
          const T *qkv, const float *lse, const T *dout, const float *d,       \
          float *sums, T *dqkv, int seq, int heads, int groups, int headDim,   \
          float scale) {                                                       \
    keyGrad<T, MAXD>(qkv, lse, dout, d, sums, dqkv, seq, heads, groups,        \
                     headDim, scale);                                          \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(THREADS, BLOCKS)                \
      loom_attention_query_grad_##NAME##_##MAXD(                               \
          const T *qkv, const float *lse, const T *dout, const float *d,       \
          float *sums, T *dqkv, int seq, int heads, int groups, int headDim,   \
          float scale) {                                                       \
    queryGrad<T, MAXD>(qkv, lse, dout, d, sums, dqkv, seq, heads, groups,      \
                       headDim, scale);                                        \
  }

// One module per storage type and head bound, which the build defines, so
// that the driver compiles only the kernels a step uses.
#if !defined(LOOM_ATTENTION_TYPE) || !defined(LOOM_ATTENTION_NAME) ||          \
    !defined(LOOM_ATTENTION_HEAD)
#error "define LOOM_ATTENTION_TYPE, LOOM_ATTENTION_NAME and LOOM_ATTENTION_HEAD"
#endif
#define LOOM_ATTENTION_MODULE(T, NAME, MAXD, THREADS, BLOCKS, GRAD_THREADS,    \
                              GRAD_BLOCKS)                                     \
  LOOM_ATTENTION_KERNELS(T, NAME, MAXD, THREADS, BLOCKS, GRAD_THREADS,         \
                         GRAD_BLOCKS)

#endif // LOOM_RUNTIME_KERNELS_ATTENTIONCOMMON_CUH
