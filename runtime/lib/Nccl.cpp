//===- Nccl.cpp - Collectives of generated code through NCCL --------------===//
//
// Under the CUDA backend, the collectives generated code calls (all-reduce,
// all-gather, reduce-scatter over a group of ranks) go through NCCL on the
// backend's stream: queued like a kernel, with no wait for the GPU and no
// copy through the host. Each group's NCCL communicator is made the first
// time the group calls one, which every rank of it does at the same point of
// the step: rank 0 of the group makes the unique id, MPI broadcasts it over
// the group's MPI communicator. NCCL is opened with dlopen, like the driver:
// without it, or with LOOM_COMM=mpi, the collectives stay MPI's, after a
// wait for the GPU. Messages (a pipeline's sends and receives) stay MPI's:
// NCCL matches them by order, the step by tag.
//
//===----------------------------------------------------------------------===//

#include "Nccl.h"
#include "Device.h"
#include "Error.h"
#include "loom/runtime.h"

#if LOOM_HAVE_NCCL
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>

namespace {
#define LOOM_NCCL_FUNCTIONS(X)                                                 \
  X(ncclGetUniqueId)                                                           \
  X(ncclCommInitRank)                                                          \
  X(ncclGetErrorString)                                                        \
  X(ncclAllReduce)                                                             \
  X(ncclAllGather)                                                             \
  X(ncclReduceScatter)                                                         \
  X(ncclReduce)

struct Nccl {
#define LOOM_DECLARE(fn) decltype(&::fn) fn = nullptr;
  LOOM_NCCL_FUNCTIONS(LOOM_DECLARE)
#undef LOOM_DECLARE
  bool tried = false, ready = false;
  /// Each group's communicator, by its MPI communicator.
  std::map<MPI_Comm, ncclComm_t> comms;
  /// This rank's communicator of one (ncclCollectiveAlone).
  ncclComm_t alone = nullptr;

  /// Opens NCCL once; false, saying why on stderr once, where it is absent
  /// or LOOM_COMM asks for MPI.
  bool start() {
    if (tried)
      return ready;
    tried = true;
    const char *choice = std::getenv("LOOM_COMM");
    if (choice && std::strcmp(choice, "mpi") == 0)
      return false;
    void *library = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      std::fprintf(stderr, "loom: NCCL (libnccl.so.2) not found; the GPU's "
                           "collectives go through MPI\n");
      return false;
    }
#define LOOM_LOAD(fn)                                                          \
  fn = reinterpret_cast<decltype(fn)>(dlsym(library, #fn));                    \
  if (!fn) {                                                                   \
    std::fprintf(stderr, "loom: libnccl.so.2 has no " #fn                      \
                         "; the GPU's collectives go through MPI\n");          \
    return false;                                                              \
  }
    LOOM_NCCL_FUNCTIONS(LOOM_LOAD)
#undef LOOM_LOAD
    ready = true;
    return true;
  }

  /// The communicator of `comm` (`size` ranks, this one `rank`), made now
  /// if it is the group's first collective; null with the error set.
  ncclComm_t communicator(MPI_Comm comm, int size, int rank, const char *name) {
    auto it = comms.find(comm);
    if (it != comms.end())
      return it->second;
    if (!checkOneRankPerGpu(comm, size, name))
      return nullptr;
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    if (rank == 0)
      if (ncclResult_t r = ncclGetUniqueId(&id)) {
        loom::setError("NCCL: the unique id of group %s: %s", name,
                       ncclGetErrorString(r));
        return nullptr;
      }
    if (MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm) != MPI_SUCCESS) {
      loom::setError("NCCL: broadcasting the unique id of group %s failed",
                     name);
      return nullptr;
    }
    ncclComm_t nccl = nullptr;
    if (ncclResult_t r = ncclCommInitRank(&nccl, size, id, rank)) {
      loom::setError("NCCL: joining group %s (%d ranks, this one %d): %s", name,
                     size, rank, ncclGetErrorString(r));
      return nullptr;
    }
    return comms[comm] = nccl;
  }

  /// The communicator of this rank alone, made now the first time; null
  /// with the error set.
  ncclComm_t communicatorAlone() {
    if (alone)
      return alone;
    ncclUniqueId id;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r == ncclSuccess)
      r = ncclCommInitRank(&alone, 1, id, 0);
    if (r != ncclSuccess) {
      loom::setError("NCCL: a communicator of one rank: %s",
                     ncclGetErrorString(r));
      alone = nullptr;
    }
    return alone;
  }

  /// Whether the group's ranks each have a GPU of their own, as NCCL needs;
  /// false, with the error set on every rank, where two share one (NCCL
  /// itself would answer "invalid usage").
  static bool checkOneRankPerGpu(MPI_Comm comm, int size, const char *name) {
    // A host of up to kNcclHostBytes - 1 bytes, " GPU " and a bus id.
    constexpr int kIdBytes = loom::kNcclHostBytes + 32;
    char mine[kIdBytes] = {};
    char host[MPI_MAX_PROCESSOR_NAME] = {};
    int hostLength = 0;
    if (MPI_Get_processor_name(host, &hostLength) != MPI_SUCCESS)
      hostLength = 0;
    std::string id =
        loom::rankGpuId(std::string(host, hostLength), loom::cudaBusId());
    std::strncpy(mine, id.c_str(), kIdBytes - 1);
    std::vector<char> all(static_cast<size_t>(size) * kIdBytes);
    if (MPI_Allgather(mine, kIdBytes, MPI_CHAR, all.data(), kIdBytes, MPI_CHAR,
                      comm) != MPI_SUCCESS)
      return loom::setError("NCCL: gathering the GPUs of group %s failed",
                            name);
    std::vector<std::string> ids;
    for (int r = 0; r < size; ++r)
      ids.emplace_back(&all[static_cast<size_t>(r) * kIdBytes]);
    if (std::optional<std::pair<int, int>> shared = loom::ranksSharingGpu(ids))
      return loom::setError(
          "NCCL: ranks %d and %d of group %s share %s, and NCCL "
          "takes one rank per GPU: give each rank a GPU of its own "
          "(LOCAL_RANK, CUDA_VISIBLE_DEVICES), or set LOOM_COMM=mpi for "
          "MPI's collectives",
          shared->first, shared->second, name, ids[shared->first].c_str());
    return true;
  }
};

Nccl &nccl() {
  // Leaked on purpose, like the CUDA backend: communicators outlive static
  // destructors' order.
  static Nccl *instance = new Nccl();
  return *instance;
}

std::optional<ncclDataType_t> ncclType(int32_t dtype) {
  switch (dtype) {
  case LOOM_DTYPE_F32:
    return ncclFloat32;
  case LOOM_DTYPE_BF16:
    return ncclBfloat16;
  case LOOM_DTYPE_F16:
    return ncclFloat16;
  default:
    return std::nullopt;
  }
}

/// NCCL's type of `dtype` where NCCL runs collectives of it: the CUDA
/// backend is on, NCCL opened and not declined.
std::optional<ncclDataType_t> runnable(int32_t dtype) {
  if (!loom::cudaActive())
    return std::nullopt;
  std::optional<ncclDataType_t> type = ncclType(dtype);
  if (!type || !nccl().start())
    return std::nullopt;
  return type;
}

/// Queues `op` on communicator `c` (of group `name`) on the backend's
/// stream.
int queue(ncclComm_t c, const char *name, loom::NcclOp op, ncclDataType_t type,
          const void *send, void *recv, int64_t count, int root) {
  using loom::NcclOp;
  Nccl &n = nccl();
  auto stream = static_cast<cudaStream_t>(loom::cudaStream());
  auto elements = static_cast<size_t>(count);
  ncclResult_t r = ncclSuccess;
  switch (op) {
  case NcclOp::Sum:
  case NcclOp::Max:
    r = n.ncclAllReduce(send, recv, elements, type,
                        op == NcclOp::Sum ? ncclSum : ncclMax, c, stream);
    break;
  case NcclOp::AllGather:
    r = n.ncclAllGather(send, recv, elements, type, c, stream);
    break;
  case NcclOp::ReduceScatter:
    r = n.ncclReduceScatter(send, recv, elements, type, ncclSum, c, stream);
    break;
  case NcclOp::Reduce:
    r = n.ncclReduce(send, recv, elements, type, ncclSum, root, c, stream);
    break;
  }
  if (r != ncclSuccess) {
    loom::setError("NCCL: a collective of %lld elements on group %s: %s",
                   static_cast<long long>(count), name,
                   n.ncclGetErrorString(r));
    return 1;
  }
  loom::cudaQueued();
  return 0;
}
} // namespace

int loom::ncclCollective(MPI_Comm comm, int size, int rank, const char *name,
                         NcclOp op, int32_t dtype, const void *send, void *recv,
                         int64_t count, int root) {
  if (size <= 1 || comm == MPI_COMM_NULL)
    return -1;
  std::optional<ncclDataType_t> type = runnable(dtype);
  if (!type)
    return -1;
  ncclComm_t c = nccl().communicator(comm, size, rank, name);
  if (!c)
    return 1;
  return queue(c, name, op, *type, send, recv, count, root);
}

int loom::ncclCollectiveAlone(NcclOp op, int32_t dtype, const void *send,
                              void *recv, int64_t count, int root) {
  std::optional<ncclDataType_t> type = runnable(dtype);
  if (!type)
    return -1;
  ncclComm_t c = nccl().communicatorAlone();
  if (!c)
    return 1;
  return queue(c, "of one", op, *type, send, recv, count, root);
}

#else // !LOOM_HAVE_NCCL

int loom::ncclCollective(MPI_Comm, int, int, const char *, NcclOp, int32_t,
                         const void *, void *, int64_t, int) {
  return -1;
}

int loom::ncclCollectiveAlone(NcclOp, int32_t, const void *, void *, int64_t,
                              int) {
  return -1;
}

#endif // LOOM_HAVE_NCCL
