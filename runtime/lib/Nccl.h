//===- Nccl.h - Collectives of generated code through NCCL ------*- C++ -*-===//

#ifndef LOOM_RUNTIME_NCCL_H
#define LOOM_RUNTIME_NCCL_H

#include <mpi.h>

#include <cstdint>

namespace loom {
/// The collectives NCCL runs for generated code.
enum class NcclOp { Sum, Max, AllGather, ReduceScatter, Reduce };

/// Queues collective `op` of the group whose MPI communicator is `comm`
/// (`size` ranks, this one `rank`, named `name` in errors) on the CUDA
/// backend's stream, through NCCL; loom_rt_all_reduce's and the others'
/// contracts, `count` as theirs. 0 when queued; 1, with the error set,
/// when NCCL failed; -1 when NCCL does not run it (the CUDA backend is off,
/// a group of one, NCCL absent or LOOM_COMM=mpi), for MPI to. `root` is
/// Reduce's.
int ncclCollective(MPI_Comm comm, int size, int rank, const char *name,
                   NcclOp op, int32_t dtype, const void *send, void *recv,
                   int64_t count, int root = 0);

/// ncclCollective for a group of this rank alone, through a communicator of
/// one that NCCL makes without MPI: how a machine with one GPU runs NCCL's
/// side of the backend (LoomCudaTests). The step's groups of one call no
/// collective. The same results as ncclCollective.
int ncclCollectiveAlone(NcclOp op, int32_t dtype, const void *send, void *recv,
                        int64_t count, int root = 0);
} // namespace loom

#endif // LOOM_RUNTIME_NCCL_H
