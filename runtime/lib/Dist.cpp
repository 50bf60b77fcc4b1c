//===- Dist.cpp - The distributed context and its MPI backend -------------===//
//
// A process joins the job it was launched in (mpirun sets the environment
// MPI reads) or, started alone, a job of one rank that needs no MPI at all.
// Its ranks are laid on the grid pp x dp x tp, tp fastest (neighbouring
// ranks share a tensor-parallel group, as in Megatron-LM), and one
// communicator per group is made once, here. Collectives on a group of one
// rank are copies, so single-rank runs take the same code path.
//
//===----------------------------------------------------------------------===//

#include "Dist.h"
#include "Device.h"
#include "Error.h"
#include "Nccl.h"
#include "Trace.h"
#include "loom/rt.h"
#include "loom/runtime.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <mpi.h>
#include <sched.h>
#include <string>
#include <vector>

using loom::setError;

struct loom_comm {
  MPI_Comm comm = MPI_COMM_NULL;
  int64_t size = 1, rank = 0;
  const char *name = "";
};

namespace {
/// A message on its way: its copy of the sender's buffer lives until MPI
/// is done with it.
struct PendingSend {
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<char> data;
  /// The group it was sent in, which a failure names.
  const loom_comm *comm = nullptr;
};

struct Context {
  loom_dist_info info{};
  /// The compiled steps' messages not known to be delivered yet, oldest
  /// first.
  std::deque<PendingSend> sends;
  /// A failure of those messages met while waiting for the GPU, which has
  /// no error path: the next send or receive reports it.
  std::string sendFailure;
  bool initialized = false;
  /// MPI_Init ran: the job was launched by an MPI launcher.
  bool mpi = false;
  /// Time in the compiled steps' collectives.
  double commSeconds = 0;
  loom_comm groups[LOOM_GROUP_COUNT];
};

Context &context() {
  static Context c;
  return c;
}

/// Whether an MPI launcher started this process: OpenMPI's mpirun and the
/// PMI(x) process managers others use set one of these.
bool launchedByMpi() {
  for (const char *name :
       {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(name))
      return true;
  return false;
}

bool mpiFailed(int code, const char *what, const loom_comm *comm) {
  if (code == MPI_SUCCESS)
    return false;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  setError("%s over the %s group (%lld ranks) failed: %s", what, comm->name,
           static_cast<long long>(comm->size), text);
  return true;
}

/// The MPI type that moves `dtype`; bf16 and f16 move as 16-bit words.
MPI_Datatype moveType(loom_dtype dtype) {
  return dtype == LOOM_DTYPE_F32 ? MPI_FLOAT : MPI_UINT16_T;
}

/// Checks what every collective needs; `sum` for those that add.
bool checkCall(const char *what, const loom_comm *comm, loom_dtype dtype,
               int64_t count, bool sum) {
  if (!comm)
    return setError("%s: no communicator (call loom_dist_init first)", what);
  if (dtype != LOOM_DTYPE_F32 && dtype != LOOM_DTYPE_BF16 &&
      dtype != LOOM_DTYPE_F16)
    return setError("%s: unknown element type %d", what,
                    static_cast<int>(dtype));
  if (sum && dtype != LOOM_DTYPE_F32)
    return setError("%s: sums are computed in f32 only; convert %s buffers "
                    "first",
                    what, dtype == LOOM_DTYPE_BF16 ? "bf16" : "f16");
  // MPI counts a rank's elements in an int.
  if (count < 0 || count > INT_MAX)
    return setError("%s: %lld elements per rank is more than one call moves; "
                    "split it into buckets",
                    what, static_cast<long long>(count));
  return true;
}

/// Starts a collective that turns `send` into `recv`: checks the call and,
/// on a group of one rank, where it is a copy, does it. 1 on failure, 0 when
/// that was all, -1 when the ranks must communicate.
int begin(const char *what, const loom_comm *comm, loom_dtype dtype,
          const void *send, void *recv, int64_t count, bool sum) {
  if (!checkCall(what, comm, dtype, count, sum))
    return 1;
  if (comm->size > 1)
    return -1;
  if (recv != send)
    std::memmove(recv, send, count * loom::elementSize(dtype));
  return 0;
}

/// A broadcast's or a reduce's `root` is a rank of `comm`.
bool checkRoot(const char *what, const loom_comm *comm, int64_t root) {
  if (root < 0 || root >= comm->size)
    return setError("%s: root %lld is not a rank of the %s group (%lld "
                    "ranks)",
                    what, static_cast<long long>(root), comm->name,
                    static_cast<long long>(comm->size));
  return true;
}

/// The ranks on this machine whose affinity is this rank's: they compete
/// for the same cores, unless the launcher bound each to its own.
int64_t countCoreSharers(int rank) {
  MPI_Comm local;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                          MPI_INFO_NULL, &local) != MPI_SUCCESS)
    return 1;
  int size = 1;
  MPI_Comm_size(local, &size);
  cpu_set_t mine;
  CPU_ZERO(&mine);
  sched_getaffinity(0, sizeof(mine), &mine);
  std::vector<cpu_set_t> all(size);
  int64_t sharers = 1;
  if (MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all.data(), sizeof(mine),
                    MPI_BYTE, local) == MPI_SUCCESS) {
    sharers = 0;
    for (const cpu_set_t &other : all)
      sharers += CPU_EQUAL(&other, &mine) ? 1 : 0;
  }
  MPI_Comm_free(&local);
  return std::max<int64_t>(1, sharers);
}

bool makeGroup(loom_comm &group, const char *name, int color, int key) {
  group.name = name;
  Context &c = context();
  if (!c.mpi) {
    group = loom_comm{MPI_COMM_NULL, 1, 0, name};
    return true;
  }
  if (mpiFailed(MPI_Comm_split(MPI_COMM_WORLD, color, key, &group.comm),
                "creating the communicator", &group))
    return false;
  MPI_Comm_set_errhandler(group.comm, MPI_ERRORS_RETURN);
  int size = 1, rank = 0;
  MPI_Comm_size(group.comm, &size);
  MPI_Comm_rank(group.comm, &rank);
  group.size = size;
  group.rank = rank;
  return true;
}

/// Frees the copies of the messages MPI has delivered, oldest first.
bool reapSends() {
  Context &c = context();
  if (!c.sendFailure.empty())
    return setError("%s", c.sendFailure.c_str());
  std::deque<PendingSend> &sends = c.sends;
  while (!sends.empty()) {
    int done = 0;
    if (mpiFailed(MPI_Test(&sends.front().request, &done, MPI_STATUS_IGNORE),
                  "send", sends.front().comm))
      return false;
    if (!done)
      break;
    sends.pop_front();
  }
  return true;
}

/// Moves the messages in flight on, freeing those delivered; whether any
/// is still in flight (false on a failure, kept for the next send or
/// receive to report).
bool progressSends() {
  Context &c = context();
  if (!reapSends()) {
    c.sendFailure = loom_last_error();
    return false;
  }
  return !c.sends.empty();
}
} // namespace

namespace {
/// The communicator of `group` for generated code, which has no error path:
/// without one, the job ends (the step would compute another rank's share).
loom_comm *stepGroup(int32_t group);

/// Ends the job after a failure in generated code, with the error set.
[[noreturn]] void endStep();

/// What a collective of generated code moves, for the timeline: the
/// elements per rank and, for a message, the peer and the tag.
struct Traffic {
  int64_t count, peer = -1, tag = -1;
};

/// Runs one collective of generated code on `group` (`what`: "all-reduce",
/// "send"...), timing it and, when tracing, recording its span. A failure
/// ends the whole job: the step cannot go on with a partial result.
template <typename Collective>
void groupCollective(int32_t group, const char *what, Traffic traffic,
                     Collective &&collective) {
  auto start = loom::TraceClock::now();
  loom_comm *comm = stepGroup(group);
  if (collective(comm))
    endStep();
  context().commSeconds +=
      std::chrono::duration<double>(loom::TraceClock::now() - start).count();
  if (!loom::traceActive())
    return;
  // "all-reduce (tp)"; a message by its peer, "send to 1".
  bool message = traffic.peer >= 0;
  std::string name = message
                         ? std::string(what) +
                               (std::strcmp(what, "send") ? " from " : " to ") +
                               std::to_string(traffic.peer)
                         : std::string(what) + " (" + comm->name + ")";
  std::string args = "\"group\":\"" + std::string(comm->name) +
                     "\",\"elements\":" + std::to_string(traffic.count);
  if (message)
    args += ",\"peer\":" + std::to_string(traffic.peer) +
            ",\"tag\":" + std::to_string(traffic.tag);
  loom::traceSpan(name, "communication", start, args);
}

/// A collective of generated code: queued through NCCL on the GPU's stream
/// where it runs it (loom::ncclCollective), else `host`, MPI's on the
/// host, once the GPU is done with the buffers.
template <typename Host>
int onGpuOrHost(loom_comm *comm, loom::NcclOp op, int32_t dtype,
                const void *send, void *recv, int64_t count, Host &&host,
                int root = 0) {
  int rc = loom::ncclCollective(comm->comm, static_cast<int>(comm->size),
                                static_cast<int>(comm->rank), comm->name, op,
                                dtype, send, recv, count, root);
  if (rc >= 0)
    return rc;
  loom::cudaWait();
  return host();
}

loom_comm *stepGroup(int32_t group) {
  if (loom_comm *comm = loom_dist_group(static_cast<loom_group>(group)))
    return comm;
  setError("the step communicates, and this process has not joined a job "
           "laid on the plan's grid (loom_dist_init)");
  endStep();
}

void endStep() {
  const loom_dist_info *info = loom_dist_get_info();
  std::fprintf(stderr, "loom: error: rank %lld: %s\n",
               static_cast<long long>(info ? info->rank : 0),
               loom_last_error());
  std::fflush(stderr);
  loom_dist_abort(1);
  std::exit(1); // loom_dist_abort does not return; its C declaration says not
}
} // namespace

extern "C" {

int loom_dist_init(int64_t pp, int64_t dp, int64_t tp) {
  Context &c = context();
  if (pp < 1 || dp < 1 || tp < 1)
    return !setError("the grid pp x dp x tp = %lld x %lld x %lld has an "
                     "empty side",
                     static_cast<long long>(pp), static_cast<long long>(dp),
                     static_cast<long long>(tp));
  if (c.initialized) {
    if (c.info.pp == pp && c.info.dp == dp && c.info.tp == tp)
      return 0;
    return !setError("the job is already laid on the grid pp x dp x tp = "
                     "%lld x %lld x %lld",
                     static_cast<long long>(c.info.pp),
                     static_cast<long long>(c.info.dp),
                     static_cast<long long>(c.info.tp));
  }
  int rank = 0, world = 1;
  if (launchedByMpi()) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) !=
        MPI_SUCCESS)
      return !setError("cannot join the MPI job this process was launched "
                       "in");
    c.mpi = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    // A rank waiting for its GPU's NCCL collective must still deliver the
    // messages it sent before: their receiver may be the rank that
    // collective waits for.
    loom::cudaSetWaitProgress(progressSends);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
  }
  c.initialized = true;
  c.info.rank = rank;
  c.info.world_size = world;
  c.info.launched = c.mpi ? 1 : 0;
  c.info.core_sharers = 1;
  if (c.mpi)
    c.info.core_sharers = countCoreSharers(rank);
  int64_t needed = pp * dp * tp;
  if (world != needed) {
    c.info.pp = c.info.dp = c.info.tp = 0;
    const char *plural = needed == 1 ? "" : "s";
    if (!c.mpi)
      return !setError("the plan runs on %lld rank%s (pp x dp x tp = %lld x "
                       "%lld x %lld); launch them with mpirun -np %lld",
                       static_cast<long long>(needed), plural,
                       static_cast<long long>(pp), static_cast<long long>(dp),
                       static_cast<long long>(tp),
                       static_cast<long long>(needed));
    return !setError("the plan runs on %lld rank%s (pp x dp x tp = %lld x "
                     "%lld x %lld), and the job has %d",
                     static_cast<long long>(needed), plural,
                     static_cast<long long>(pp), static_cast<long long>(dp),
                     static_cast<long long>(tp), world);
  }
  c.info.pp = pp;
  c.info.dp = dp;
  c.info.tp = tp;
  c.info.tp_rank = rank % tp;
  c.info.dp_rank = rank / tp % dp;
  c.info.pp_rank = rank / (tp * dp);
  int p = static_cast<int>(c.info.pp_rank),
      d = static_cast<int>(c.info.dp_rank),
      t = static_cast<int>(c.info.tp_rank);
  int D = static_cast<int>(dp), T = static_cast<int>(tp);
  // Ranks of one group share the other two coordinates (the color) and are
  // ordered by their own (the key).
  if (!makeGroup(c.groups[LOOM_GROUP_WORLD], "world", 0, rank) ||
      !makeGroup(c.groups[LOOM_GROUP_DP], "dp", p * T + t, d) ||
      !makeGroup(c.groups[LOOM_GROUP_TP], "tp", p * D + d, t) ||
      !makeGroup(c.groups[LOOM_GROUP_PP], "pp", d * T + t, p))
    return 1;
  return 0;
}

const loom_dist_info *loom_dist_get_info(void) {
  Context &c = context();
  return c.initialized ? &c.info : nullptr;
}

loom_comm *loom_dist_group(loom_group group) {
  Context &c = context();
  if (!c.initialized || c.info.pp == 0 || group < 0 ||
      group >= LOOM_GROUP_COUNT)
    return nullptr;
  return &c.groups[group];
}

int64_t loom_comm_size(const loom_comm *comm) { return comm->size; }
int64_t loom_comm_rank(const loom_comm *comm) { return comm->rank; }

void loom_dist_finalize(void) {
  Context &c = context();
  if (!c.mpi)
    return;
  // Messages still on their way are owed to ranks that receive them.
  for (PendingSend &send : c.sends)
    MPI_Wait(&send.request, MPI_STATUS_IGNORE);
  c.sends.clear();
  for (loom_comm &group : c.groups)
    if (group.comm != MPI_COMM_NULL)
      MPI_Comm_free(&group.comm);
  loom::cudaSetWaitProgress(nullptr);
  MPI_Finalize();
  c.mpi = false;
}

void loom_dist_abort(int code) {
  if (context().mpi)
    MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

namespace {
/// An all-reduce by `op` (MPI_SUM, MPI_MAX) of f32 elements.
int allReduce(const char *what, MPI_Op op, loom_comm *comm, loom_dtype dtype,
              const void *send, void *recv, int64_t count) {
  if (int rc = begin(what, comm, dtype, send, recv, count, /*sum=*/true);
      rc >= 0)
    return rc;
  return mpiFailed(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv,
                                 static_cast<int>(count), MPI_FLOAT, op,
                                 comm->comm),
                   what, comm);
}
} // namespace

int loom_rt_all_reduce(loom_comm *comm, loom_dtype dtype, const void *send,
                       void *recv, int64_t count) {
  return allReduce("all-reduce", MPI_SUM, comm, dtype, send, recv, count);
}

int loom_rt_all_reduce_max(loom_comm *comm, loom_dtype dtype, const void *send,
                           void *recv, int64_t count) {
  return allReduce("all-reduce (max)", MPI_MAX, comm, dtype, send, recv, count);
}

int loom_rt_reduce_scatter(loom_comm *comm, loom_dtype dtype, const void *send,
                           void *recv, int64_t count) {
  if (int rc = begin("reduce-scatter", comm, dtype, send, recv, count,
                     /*sum=*/true);
      rc >= 0)
    return rc;
  return mpiFailed(MPI_Reduce_scatter_block(send, recv, static_cast<int>(count),
                                            MPI_FLOAT, MPI_SUM, comm->comm),
                   "reduce-scatter", comm);
}

int loom_rt_reduce(loom_comm *comm, loom_dtype dtype, const void *send,
                   void *recv, int64_t count, int64_t root) {
  if (!checkCall("reduce", comm, dtype, count, /*sum=*/true) ||
      !checkRoot("reduce", comm, root))
    return 1;
  if (int rc = begin("reduce", comm, dtype, send, recv, count, /*sum=*/true);
      rc >= 0)
    return rc;
  // The root sums into recv; MPI_IN_PLACE is the root's alone to pass.
  bool inPlace = send == recv && root == comm->rank;
  return mpiFailed(MPI_Reduce(inPlace ? MPI_IN_PLACE : send, recv,
                              static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                              static_cast<int>(root), comm->comm),
                   "reduce", comm);
}

int loom_rt_all_gather(loom_comm *comm, loom_dtype dtype, const void *send,
                       void *recv, int64_t count) {
  if (int rc = begin("all-gather", comm, dtype, send, recv, count,
                     /*sum=*/false);
      rc >= 0)
    return rc;
  MPI_Datatype type = moveType(dtype);
  return mpiFailed(MPI_Allgather(send, static_cast<int>(count), type, recv,
                                 static_cast<int>(count), type, comm->comm),
                   "all-gather", comm);
}

int loom_rt_broadcast(loom_comm *comm, loom_dtype dtype, void *buffer,
                      int64_t count, int64_t root) {
  if (!checkCall("broadcast", comm, dtype, count, /*sum=*/false) ||
      !checkRoot("broadcast", comm, root))
    return 1;
  if (comm->size == 1)
    return 0;
  return mpiFailed(MPI_Bcast(buffer, static_cast<int>(count), moveType(dtype),
                             static_cast<int>(root), comm->comm),
                   "broadcast", comm);
}

/// Point to point: `peer` is a rank of `comm`, never this one.
static bool checkPeer(const char *what, const loom_comm *comm, int64_t peer) {
  if (peer < 0 || peer >= comm->size || peer == comm->rank)
    return setError("%s: rank %lld of the %s group (%lld ranks) is not "
                    "another rank",
                    what, static_cast<long long>(peer), comm->name,
                    static_cast<long long>(comm->size));
  return true;
}

int loom_rt_send(loom_comm *comm, loom_dtype dtype, const void *buffer,
                 int64_t count, int64_t peer) {
  if (!checkCall("send", comm, dtype, count, /*sum=*/false) ||
      !checkPeer("send", comm, peer))
    return 1;
  return mpiFailed(MPI_Send(buffer, static_cast<int>(count), moveType(dtype),
                            static_cast<int>(peer), 0, comm->comm),
                   "send", comm);
}

int loom_rt_recv(loom_comm *comm, loom_dtype dtype, void *buffer, int64_t count,
                 int64_t peer) {
  if (!checkCall("receive", comm, dtype, count, /*sum=*/false) ||
      !checkPeer("receive", comm, peer))
    return 1;
  return mpiFailed(MPI_Recv(buffer, static_cast<int>(count), moveType(dtype),
                            static_cast<int>(peer), 0, comm->comm,
                            MPI_STATUS_IGNORE),
                   "receive", comm);
}

double loom_dist_comm_seconds(void) { return context().commSeconds; }

namespace {
/// A copy of `buffer` sent to `peer` with `tag`; returns without waiting
/// for the receiver, so that two ranks sending to each other go on.
int sendCopy(loom_comm *comm, loom_dtype dtype, const void *buffer,
             int64_t count, int64_t peer, int64_t tag) {
  if (!checkCall("send", comm, dtype, count, /*sum=*/false) ||
      !checkPeer("send", comm, peer) || !reapSends())
    return 1;
  if (tag < 0 || tag > 32767) // the tags MPI guarantees
    return !setError("send: tag %lld is not in [0, 32767]",
                     static_cast<long long>(tag));
  PendingSend send;
  send.comm = comm;
  const char *bytes = static_cast<const char *>(buffer);
  send.data.assign(bytes, bytes + count * loom::elementSize(dtype));
  if (mpiFailed(MPI_Isend(send.data.data(), static_cast<int>(count),
                          moveType(dtype), static_cast<int>(peer),
                          static_cast<int>(tag), comm->comm, &send.request),
                "send", comm))
    return 1;
  context().sends.push_back(std::move(send));
  return 0;
}

int recvTagged(loom_comm *comm, loom_dtype dtype, void *buffer, int64_t count,
               int64_t peer, int64_t tag) {
  if (!checkCall("receive", comm, dtype, count, /*sum=*/false) ||
      !checkPeer("receive", comm, peer))
    return 1;
  MPI_Status status;
  if (mpiFailed(MPI_Recv(buffer, static_cast<int>(count), moveType(dtype),
                         static_cast<int>(peer), static_cast<int>(tag),
                         comm->comm, &status),
                "receive", comm))
    return 1;
  int received = 0;
  MPI_Get_count(&status, moveType(dtype), &received);
  if (received != count)
    return !setError("receive: rank %lld of the %s group sent %d elements "
                     "with tag %lld, and this rank expected %lld",
                     static_cast<long long>(peer), comm->name, received,
                     static_cast<long long>(tag),
                     static_cast<long long>(count));
  return reapSends() ? 0 : 1;
}
} // namespace

void loom_rt_group_all_reduce(int32_t group, int32_t dtype, void *buffer,
                              int64_t count) {
  groupCollective(group, "all-reduce", {count}, [&](loom_comm *comm) {
    return onGpuOrHost(
        comm, loom::NcclOp::Sum, dtype, buffer, buffer, count, [&] {
          return loom_rt_all_reduce(comm, static_cast<loom_dtype>(dtype),
                                    buffer, buffer, count);
        });
  });
}

void loom_rt_group_all_reduce_max(int32_t group, int32_t dtype, void *buffer,
                                  int64_t count) {
  groupCollective(group, "all-reduce (max)", {count}, [&](loom_comm *comm) {
    return onGpuOrHost(
        comm, loom::NcclOp::Max, dtype, buffer, buffer, count, [&] {
          return loom_rt_all_reduce_max(comm, static_cast<loom_dtype>(dtype),
                                        buffer, buffer, count);
        });
  });
}

void loom_rt_group_all_gather(int32_t group, int32_t dtype, const void *send,
                              void *recv, int64_t count) {
  groupCollective(group, "all-gather", {count}, [&](loom_comm *comm) {
    return onGpuOrHost(
        comm, loom::NcclOp::AllGather, dtype, send, recv, count, [&] {
          return loom_rt_all_gather(comm, static_cast<loom_dtype>(dtype), send,
                                    recv, count);
        });
  });
}

void loom_rt_group_reduce_scatter(int32_t group, int32_t dtype,
                                  const void *send, void *recv, int64_t count) {
  groupCollective(group, "reduce-scatter", {count}, [&](loom_comm *comm) {
    return onGpuOrHost(
        comm, loom::NcclOp::ReduceScatter, dtype, send, recv, count, [&] {
          return loom_rt_reduce_scatter(comm, static_cast<loom_dtype>(dtype),
                                        send, recv, count);
        });
  });
}

void loom_rt_group_reduce(int32_t group, int32_t dtype, void *buffer,
                          int64_t count, int64_t root) {
  groupCollective(group, "reduce", {count}, [&](loom_comm *comm) {
    if (!checkRoot("reduce", comm, root))
      return 1;
    return onGpuOrHost(
        comm, loom::NcclOp::Reduce, dtype, buffer, buffer, count,
        [&] {
          return loom_rt_reduce(comm, static_cast<loom_dtype>(dtype), buffer,
                                buffer, count, root);
        },
        static_cast<int>(root));
  });
}

void loom_rt_group_send(int32_t group, int32_t dtype, const void *buffer,
                        int64_t count, int64_t peer, int64_t tag) {
  groupCollective(group, "send", {count, peer, tag}, [&](loom_comm *comm) {
    loom::cudaWait();
    return sendCopy(comm, static_cast<loom_dtype>(dtype), buffer, count, peer,
                    tag);
  });
}

void loom_rt_group_recv(int32_t group, int32_t dtype, void *buffer,
                        int64_t count, int64_t peer, int64_t tag) {
  groupCollective(group, "receive", {count, peer, tag}, [&](loom_comm *comm) {
    loom::cudaWait();
    return recvTagged(comm, static_cast<loom_dtype>(dtype), buffer, count, peer,
                      tag);
  });
}

int64_t loom_rt_group_rank(int32_t group) {
  return loom_comm_rank(stepGroup(group));
}

} // extern "C"

bool loom::gatherToFirst(const std::string &mine,
                         std::vector<std::string> &all) {
  Context &c = context();
  const loom_comm &world = c.groups[LOOM_GROUP_WORLD];
  if (!c.mpi || world.size == 1) {
    all = {mine};
    return true;
  }
  int size = static_cast<int>(mine.size());
  std::vector<int> sizes(world.size), offsets(world.size);
  if (mpiFailed(MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0,
                           world.comm),
                "gathering", &world))
    return false;
  std::vector<char> text;
  if (world.rank == 0) {
    long long total = 0;
    for (int64_t r = 0; r < world.size; ++r) {
      offsets[r] = static_cast<int>(total);
      total += sizes[r];
    }
    if (total > INT_MAX)
      return setError("gathering: %lld bytes are more than one call moves",
                      total);
    text.resize(total);
  }
  if (mpiFailed(MPI_Gatherv(mine.data(), size, MPI_CHAR, text.data(),
                            sizes.data(), offsets.data(), MPI_CHAR, 0,
                            world.comm),
                "gathering", &world))
    return false;
  all.clear();
  if (world.rank == 0)
    for (int64_t r = 0; r < world.size; ++r)
      all.emplace_back(text.data() + offsets[r], sizes[r]);
  return true;
}
