#!/bin/sh
# Stands in for loom-run on a GPU in check-cuda.test: rank 0 prints the
# CPU's log of the artifact (ARTIFACT.cpu.log beside ARTIFACT.loom); where
# NCCL_DEBUG_FILE names a log, each rank writes what NCCL's would say of
# its host and its communicator (FAKE_NCCL_RANKS: only ranks below it,
# all by default); ranks that are one host to NCCL (no NCCL_HOSTID) and
# would use it (LOOM_COMM unset) stop with the runtime's refusal.
rank="${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}"
if [ -z "${NCCL_HOSTID+set}" ] && [ "${LOOM_COMM:-}" != mpi ]; then
  echo "loom: error: rank $rank: NCCL: ranks 0 and 1 of group dp share $(hostname) GPU 0000:1A:00.0, and NCCL takes one rank per GPU" >&2
  exit 1
fi
if [ -n "${NCCL_DEBUG_FILE:-}" ] && [ "$rank" -lt "${FAKE_NCCL_RANKS:-1000}" ]; then
  log="$(echo "$NCCL_DEBUG_FILE" | sed "s/%h/$(hostname)/; s/%p/$$/")"
  {
    echo "NCCL INFO NCCL_HOSTID set by environment to $NCCL_HOSTID"
    echo "NCCL INFO ncclCommInitRank comm 0x1 rank $rank nranks 2 - Init COMPLETE"
    echo "NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0"
  } >"$log"
fi
if [ "$rank" = 0 ]; then
  cat "${1%.loom}.cpu.log"
fi
