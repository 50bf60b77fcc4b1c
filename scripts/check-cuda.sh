#!/usr/bin/env bash
# The CUDA target's correctness checks on a GPU, against the CPU's results,
# for a GPU machine that has Loom's runtime but not its compiler:
#
#   scripts/check-cuda.sh prepare DIR [--cuda-arch sm_90] [--quick]
#   scripts/check-cuda.sh run DIR
#
# `prepare`, where loomc is built: compiles the CUDA artifacts into DIR and
# runs the same steps on the CPU for their reference logs, validating every
# 5 steps (the forward pass alone), all on the same data (DIR/data.txt,
# GPL-3's text four times):
#   tiny-fp32   gpt2-tiny, fp32, 10 steps
#   tiny-bf16   gpt2-tiny, bf16, 10 steps
#   tiny-bf16-loops  the same with --gelu=loops --residual-add=loops (the
#               GELU and the residual adds in loops, not in cuBLASLt's
#               epilogues and C)
#   tiny-fp16   gpt2-tiny, fp16 with loss scaling, 30 steps from
#               DIR/tiny.ckpt (make-checkpoint.py's weights, as bf16-100
#               below): from loom-run's own initialization a loss spike at
#               step 16 makes fp16's gradient norm there, and whether step
#               22 overflows, a matter of the order of the sums (the CPU
#               with 1 and with 2 threads differs by 2.2% in loss)
#   m124-fp32   GPT-2 124M at 2 x 128 tokens, fp32, 10 steps
#   tiny-mb4    gpt2-tiny, fp32, 4 micro-batches, 10 steps
#   tiny-fp16-mb4  tiny-fp16 in 4 micro-batches (each seeded with a
#               quarter of the loss scale)
#   tiny-full-bf16  gpt2-tiny, bf16, each layer recomputed in the backward
#               pass, 10 steps
#   llama-fp32, llama-bf16  llama-tiny (RMSNorm, rotary positions, SwiGLU,
#               2 key/value heads for 4 query heads), 10 steps
#   tiny-offload, tiny-offload-bf16  gpt2-tiny with offload=optimizer
#               (the update on the host, the gradients and parameters
#               crossing to and from pinned host memory), fp32 and bf16,
#               10 steps
#   tiny-offload-params-bf16  gpt2-tiny, bf16, offload=parameters (each
#               layer fetched from host memory), 10 steps
#   tiny-offload-mb2-fp16  gpt2-tiny, fp16 in 2 micro-batches with
#               offload=optimizer (each layer's gradient unscaled in the
#               loop, the micro-batches' gradients summed on the host), 30
#               steps
#   dp2-zero2-offload-bf16  the same as tiny-offload-bf16 under ZeRO-2
#               over 2 ranks (each rank's host updates its slice)
#   pp2-offload-mb4  gpt2-tiny, fp32, 2 stages, 4 micro-batches, each stage
#               recomputed, offload=optimizer (each backward call's
#               gradients summed on its rank's host), 10 steps
#   dp2, tp2, pp2  gpt2-tiny, fp32, 10 steps on 2 ranks: data, tensor and
#               pipeline parallel
#   dp2-zero3-bf16  gpt2-tiny, bf16, ZeRO-3 over 2 ranks, 10 steps
#   tp2-sp-bf16 gpt2-tiny, bf16, tensor and sequence parallel, 10 steps
#   pp2-1f1b-fp16  gpt2-tiny, fp16, 2 stages in 1F1B, 4 micro-batches, 30
#               steps from DIR/tiny.ckpt
#   pp2-dp2-zero3-bf16  gpt2-tiny, bf16, 2 stages x 2 replicas under
#               ZeRO-3 (4 ranks), 10 steps
#   pp2-interleaved-stage  gpt2-tiny, fp32, 2 ranks of 2 model chunks each
#               (interleaved 1F1B), 4 micro-batches, each stage recomputed
# (--quick: gpt2-tiny only; the checks of several ranks need mpirun, MPIRUN names
# another launcher). `run`, on the GPU machine, with
# BUILD_DIR/bin/loom-run (BUILD_DIR defaults to build/): each artifact's
# losses and gradient norms against the CPU's (2 or 4 ranks under mpirun:
# NCCL's collectives where the machine has a GPU for each rank; where they
# share one, twice: with MPI's, LOOM_COMM=mpi, and as NAME-nccl with
# NCCL's, each rank given an NCCL_HOSTID of its own, which makes it a host
# of its own to NCCL, joined to the others by NCCL's socket transport over
# loopback, NCCL's log showing the communicators it made; then
# nccl-shared-gpu: ranks on one GPU as one host stop with the runtime's
# refusal, not NCCL's "invalid usage"), then bf16 against fp32 over
# 100 steps on the GPU from DIR/tiny.ckpt (make-checkpoint.py's weights,
# on which fp32 trains without a loss spike; 10-step means within 2%), the
# same from loom-run's own initialization (DIR/init.ckpt; reported, not
# judged: a loss spike there makes bf16's drift a matter of the last bits,
# so the line shows the JAX reference's drift from the same weights,
# computed by `prepare` where JAX is installed), LoomCudaTests (the
# attention kernels against f64; its output in DIR/LoomCudaTests.log)
# where BUILD_DIR has it, and
# compute-sanitizer's memcheck over two bf16 steps where it is installed.
# One line per check and a summary; the exit status is 1 if any check
# failed. Each loom-run of `run` is stopped after CHECK_CUDA_TIMEOUT
# seconds (300), failing its check. Speed is scripts/bench-cuda.sh's.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
. "$root/scripts/lib/python.sh"
mpirun="${MPIRUN:-mpirun}"
compare="$root/test/e2e/Inputs/compare-losses.py"
usage() {
  sed -n '5,6p' "${BASH_SOURCE[0]}" | sed 's/^# *//' >&2
  exit 1
}
[ $# -ge 2 ] || usage
mode="$1" dir="$2"
shift 2
arch=sm_90 quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cuda-arch) [ $# -ge 2 ] || usage; arch="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    *) usage ;;
  esac
done

# Each check: its name, loomc's arguments, its steps, the tolerance of its
# losses against the CPU's, whether the gradient norms are held to it too
# (not fp16's: a skipped step's norm is not finite), its ranks, and the
# weights it starts from, DIR/<from>.ckpt as bf16-100's are (none:
# loom-run's initialization).
checks() {
  local tiny="$root/examples/gpt2-tiny.json"
  local llama="$root/examples/llama-tiny.json"
  echo "tiny-fp32|$tiny|10|1e-4|--norms|1"
  echo "tiny-bf16|$tiny --plan precision=bf16|10|2e-3|--norms|1"
  echo "tiny-bf16-loops|$tiny --plan precision=bf16 --gelu=loops --residual-add=loops|10|2e-3|--norms|1"
  echo "tiny-fp16|$tiny --plan precision=fp16|30|5e-3||1|tiny"
  if [ "$quick" = 0 ]; then
    echo "m124-fp32|$root/examples/gpt2-124m.json --batch-size 2 --seq-len 128|10|1e-4|--norms|1"
  fi
  echo "tiny-mb4|$tiny --plan mb=4|10|1e-4|--norms|1"
  echo "tiny-fp16-mb4|$tiny --plan precision=fp16,mb=4|30|5e-3||1|tiny"
  echo "tiny-full-bf16|$tiny --plan recompute=full,precision=bf16|10|2e-3|--norms|1"
  echo "llama-fp32|$llama|10|1e-4|--norms|1"
  echo "llama-bf16|$llama --plan precision=bf16|10|2e-3|--norms|1"
  echo "tiny-offload|$tiny --plan offload=optimizer|10|1e-4|--norms|1"
  echo "tiny-offload-bf16|$tiny --plan precision=bf16,offload=optimizer|10|2e-3|--norms|1"
  echo "tiny-offload-params-bf16|$tiny --plan precision=bf16,offload=parameters|10|2e-3|--norms|1"
  echo "tiny-offload-mb2-fp16|$tiny --plan mb=2,precision=fp16,offload=optimizer|30|5e-3||1|tiny"
  if command -v "$mpirun" >/dev/null; then
    echo "dp2|$tiny --plan dp=2|10|1e-4|--norms|2"
    echo "tp2|$tiny --plan tp=2|10|1e-4|--norms|2"
    echo "pp2|$tiny --plan pp=2|10|1e-4|--norms|2"
    echo "dp2-zero3-bf16|$tiny --plan dp=2,zero=3,precision=bf16|10|2e-3|--norms|2"
    echo "tp2-sp-bf16|$tiny --plan tp=2,sp=1,precision=bf16|10|2e-3|--norms|2"
    echo "pp2-1f1b-fp16|$tiny --plan pp=2,mb=4,schedule=1f1b,precision=fp16|30|5e-3||2|tiny"
    echo "dp2-zero2-offload-bf16|$tiny --plan dp=2,zero=2,precision=bf16,offload=optimizer|10|2e-3|--norms|2"
    echo "pp2-offload-mb4|$tiny --plan pp=2,mb=4,recompute=full,offload=optimizer|10|1e-4|--norms|2"
    echo "pp2-dp2-zero3-bf16|$tiny --plan pp=2,dp=2,zero=3,precision=bf16|10|2e-3|--norms|4"
    echo "pp2-interleaved-stage|$tiny --plan pp=2,mb=4,schedule=interleaved,v=2,recompute=stage|10|1e-4|--norms|2"
  else
    echo "check-cuda.sh: no $mpirun: no checks on several ranks" >&2
  fi
}

# launch RANKS COMMAND...: the command on RANKS ranks under mpirun (as
# root, mpirun wants to be told), or alone.
# With launch_timeout set, the command is stopped after that many seconds.
launch() {
  local ranks="$1" limit=()
  shift
  [ -z "${launch_timeout:-}" ] || limit=(timeout --kill-after=10 "$launch_timeout")
  if [ "$ranks" = 1 ]; then
    "${limit[@]}" "$@"
  else
    local flags=(-np "$ranks" --oversubscribe)
    [ "$(id -u)" != 0 ] || flags+=(--allow-run-as-root)
    "${limit[@]}" "$mpirun" "${flags[@]}" "$@"
  fi
}

prepare() {
  local loomc="$build_dir/bin/loomc" loom_run="$build_dir/bin/loom-run"
  [ -x "$loomc" ] || {
    echo "check-cuda.sh: no $loomc: build Loom first (README)" >&2
    exit 1
  }
  mkdir -p "$dir"
  for _ in 1 2 3 4; do cat /usr/share/common-licenses/GPL-3; done >"$dir/data.txt"
  local name args cpu_args steps tolerance norms ranks from count=0
  # The weights on which fp32 trains smoothly (make-checkpoint.py's), which
  # the fp16 checks and bf16-100 start from.
  "$LOOM_PYTHON" "$root/test/e2e/Inputs/make-checkpoint.py" "$dir/tiny.ckpt" \
    4 128 4 256 256 64 --seed 3
  : >"$dir/checks.txt"
  while IFS='|' read -r name args steps tolerance norms ranks from; do
    # shellcheck disable=SC2086
    "$loomc" $args --target=cuda --cuda-arch="$arch" -o "$dir/$name.loom" </dev/null
    # The CPU's GELU and residual adds where the GPU's are, unless a check
    # says: in the GEMMs (--gelu's and --residual-add's default for CUDA),
    # from the same unrounded sums.
    cpu_args="$args"
    case "$args" in *--gelu=*) ;; *) cpu_args="$cpu_args --gelu=epilogue" ;; esac
    case "$args" in
    *--residual-add=*) ;;
    *) cpu_args="$cpu_args --residual-add=epilogue" ;;
    esac
    # shellcheck disable=SC2086
    "$loomc" $cpu_args -o "$dir/$name.cpu.loom" </dev/null
    # OpenBLAS's Haswell kernels whatever the CPU, so that the reference
    # does not depend on the machine that made it.
    OPENBLAS_CORETYPE=Haswell launch "$ranks" "$loom_run" \
      "$dir/$name.cpu.loom" --data "$dir/data.txt" --steps "$steps" \
      --val-every 5 ${from:+--load "$dir/$from.ckpt"} >"$dir/$name.cpu.log" </dev/null
    rm "$dir/$name.cpu.loom"
    echo "$name|$steps|$tolerance|$norms|$ranks|$from" >>"$dir/checks.txt"
    count=$((count + 1))
  done < <(checks)
  "$loomc" "$root/examples/gpt2-tiny.json" -o "$dir/init.cpu.loom" </dev/null
  "$loom_run" "$dir/init.cpu.loom" --data "$dir/data.txt" --steps 0 \
    --save "$dir/init.ckpt" --quiet >/dev/null </dev/null
  rm "$dir/init.cpu.loom"
  rm -f "$dir/init.jax-drift"
  if "$LOOM_PYTHON" -c "import jax" 2>/dev/null; then
    local p
    for p in fp32 bf16; do
      "$LOOM_PYTHON" "$root/scripts/jax-gpt2.py" "$root/examples/gpt2-tiny.json" \
        --load "$dir/init.ckpt" --data "$dir/data.txt" --steps 100 \
        --precision "$p" >"$dir/init.jax-$p.log" </dev/null
    done
    "$LOOM_PYTHON" "$compare" "$dir/init.jax-fp32.log" "$dir/init.jax-bf16.log" 1 \
      --mean-over 10 | sed 's/.* //' >"$dir/init.jax-drift"
  else
    echo "check-cuda.sh: no JAX: bf16-100-init will show no reference" >&2
  fi
  echo "check-cuda.sh: $count CUDA artifacts for $arch and their CPU references in $dir"
}

run() {
  local loom_run="$build_dir/bin/loom-run"
  [ -x "$loom_run" ] || {
    echo "check-cuda.sh: no $loom_run" >&2
    exit 1
  }
  [ -f "$dir/data.txt" ] && [ -f "$dir/checks.txt" ] || {
    echo "check-cuda.sh: $dir has no data.txt or checks.txt: run 'check-cuda.sh prepare $dir' first" >&2
    exit 1
  }
  local failed=0 total=0
  # A rank waiting forever on the others (NCCL joining over a network that
  # does not connect, say) fails its check, not the whole run.
  local launch_timeout="${CHECK_CUDA_TIMEOUT:-300}"
  # verdict NAME STATUS DETAIL
  verdict() {
    total=$((total + 1))
    if [ "$2" = 0 ]; then
      echo "PASS $1: $3"
    else
      echo "FAIL $1: $3"
      failed=$((failed + 1))
    fi
  }
  # why LOG: rank 0's error in LOG, else the first of Loom's errors (one
  # rank's, as the ranks' lines interleave), else its last line (a
  # launcher's warnings may say "error" too).
  why() {
    grep -m 1 -E '^loom(-run)?: error: rank 0[: ]' "$1" ||
      grep -m 1 -E '^loom(-run)?: error' "$1" || tail -n 1 "$1"
  }
  # train NAME ARTIFACT STEPS [RANKS [LOOM-RUN ARGS...]]: the GPU's log
  # into DIR/NAME.gpu.log. With host_per_rank=1, each rank is given an
  # NCCL_HOSTID of its own (its rank in OpenMPI's, PMIx's or MPICH's
  # variable).
  local host_per_rank=0
  train() {
    local name="$1" artifact="$2" steps="$3" ranks="${4:-1}" runner=("$loom_run")
    shift $(($# < 4 ? $# : 4))
    if [ "$host_per_rank" = 1 ]; then
      # shellcheck disable=SC2016
      runner=(bash -c 'NCCL_HOSTID="check-cuda-rank-${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-}}}" exec "$0" "$@"' "$loom_run")
    fi
    launch "$ranks" "${runner[@]}" "$dir/$artifact.loom" --data "$dir/data.txt" \
      --steps "$steps" "$@" >"$dir/$name.gpu.log" 2>&1 </dev/null
  }
  # check NAME STEPS TOLERANCE NORMS RANKS FROM COLLECTIVES: the artifact
  # NAME's GPU steps against the CPU's, the verdict under NAME plus a
  # suffix for NCCL's ("nccl": the ranks made machines of their own).
  check() {
    local name="$1" steps="$2" tolerance="$3" norms="$4" ranks="$5" from="$6"
    local collectives="$7" label="$1" detail status=0 joined=""
    local label_collectives host_per_rank=0
    # What the ranks' collectives go through, for loom-run and NCCL.
    local -x LOOM_COMM="${LOOM_COMM:-}"
    case "$collectives" in
    mpi)
      label_collectives=" ($ranks ranks on ${gpus:-0} GPU, MPI's collectives)"
      LOOM_COMM=mpi
      ;;
    nccl) label_collectives=" ($ranks ranks, NCCL)" ;;
    nccl-hosts)
      label="$name-nccl"
      label_collectives=" ($ranks ranks on ${gpus:-0} GPU, NCCL, each rank a host of its own)"
      rm -f "$dir/$label".nccl.*.log
      # NCCL tells machines apart by NCCL_HOSTID: ranks that are hosts of
      # their own to it may share a GPU, and its socket transport (over
      # loopback, unless NCCL_SOCKET_IFNAME says otherwise) carries their
      # collectives. Its log says which communicators it made.
      host_per_rank=1 LOOM_COMM=""
      local -x NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}" NCCL_DEBUG=INFO \
        NCCL_DEBUG_SUBSYS=INIT NCCL_DEBUG_FILE="$dir/$label.nccl.%h.%p.log"
      ;;
    *) label_collectives="" ;;
    esac
    local started=$SECONDS
    train "$label" "$name" "$steps" "$ranks" --val-every 5 \
      ${from:+--load "$dir/$from.ckpt"} || status=$?
    # timeout's status, or 137 where the ranks ignored its TERM; a rank
    # killed otherwise (out of memory) also ends with 137, early.
    if [ "$status" = 124 ] ||
      { [ "$status" = 137 ] && [ $((SECONDS - started)) -ge "$launch_timeout" ]; }; then
      verdict "$label" 1 "loom-run stopped after $launch_timeout s (CHECK_CUDA_TIMEOUT)$label_collectives: $(tail -n 1 "$dir/$label.gpu.log")"
      return
    elif [ "$status" != 0 ]; then
      verdict "$label" 1 "loom-run failed$label_collectives: $(why "$dir/$label.gpu.log")"
      return
    fi
    if [ "$collectives" = nccl-hosts ]; then
      # Each rank logs each communicator it joins: every rank joins one at
      # least.
      local made transport
      made="$(cat "$dir/$label".nccl.*.log 2>/dev/null | grep -c 'Init COMPLETE' || true)"
      if [ "${made:-0}" -lt "$ranks" ]; then
        verdict "$label" 1 "NCCL's log shows ${made:-0} ranks' communicators, fewer than the $ranks ranks (its log: $dir/$label.nccl.*.log)"
        return
      fi
      transport="$(cat "$dir/$label".nccl.*.log | grep -o -m 1 'via NET/[A-Za-z]*' || true)"
      joined=", NCCL's log: $made ranks' communicators${transport:+, $transport}"
    fi
    # shellcheck disable=SC2086
    detail="$("$LOOM_PYTHON" "$compare" "$dir/$name.cpu.log" "$dir/$label.gpu.log" \
      "$tolerance" $norms 2>&1)" || status=$?
    verdict "$label" "$status" "GPU against CPU$label_collectives${from:+ from $from.ckpt}, tolerance $tolerance$joined: $detail"
  }
  # NCCL takes a GPU per rank: ranks that would share one run the check
  # twice, with MPI's collectives and with NCCL's, each rank a host of its
  # own to NCCL.
  local gpus
  gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"
  local name steps tolerance norms ranks from status detail shared=""
  local shared_ranks=2
  while IFS='|' read -r name steps tolerance norms ranks from; do
    ranks="${ranks:-1}"
    if [ ! -f "$dir/$name.loom" ]; then
      verdict "$name" 1 "no $dir/$name.loom"
      continue
    fi
    if [ "$ranks" = 1 ]; then
      check "$name" "$steps" "$tolerance" "$norms" "$ranks" "$from" ""
    elif ! command -v "$mpirun" >/dev/null; then
      verdict "$name" 1 "no $mpirun to start $ranks ranks"
    elif [ "${gpus:-0}" -ge "$ranks" ]; then
      check "$name" "$steps" "$tolerance" "$norms" "$ranks" "$from" nccl
    else
      check "$name" "$steps" "$tolerance" "$norms" "$ranks" "$from" mpi
      check "$name" "$steps" "$tolerance" "$norms" "$ranks" "$from" nccl-hosts
      [ -n "$shared" ] || shared="$name" shared_ranks="$ranks"
    fi
  done <"$dir/checks.txt"

  # Ranks sharing a GPU, as one host to NCCL, are refused before NCCL
  # would answer "invalid usage", naming the two ranks.
  if [ -n "$shared" ]; then
    status=0
    LOOM_COMM="" train nccl-shared-gpu "$shared" 1 "$shared_ranks" || status=$?
    detail="$(why "$dir/nccl-shared-gpu.gpu.log")"
    if [ "$status" != 0 ] && grep -q 'NCCL takes one rank per GPU' "$dir/nccl-shared-gpu.gpu.log"; then
      verdict nccl-shared-gpu 0 "$shared_ranks ranks on ${gpus:-0} GPU as one host, through NCCL, stopped (exit $status): $detail"
    else
      verdict nccl-shared-gpu 1 "$shared_ranks ranks on ${gpus:-0} GPU as one host, through NCCL, exit $status, not the runtime's refusal: $detail"
    fi
  fi

  if [ -f "$dir/tiny-bf16.loom" ] && [ -f "$dir/tiny-fp32.loom" ]; then
    for from in tiny init; do
      status=0
      if [ ! -f "$dir/$from.ckpt" ]; then
        status=1 detail="no $dir/$from.ckpt: prepare DIR again"
      elif train "$from-bf16-100" tiny-bf16 100 1 --load "$dir/$from.ckpt" &&
        train "$from-fp32-100" tiny-fp32 100 1 --load "$dir/$from.ckpt"; then
        detail="$("$LOOM_PYTHON" "$compare" "$dir/$from-fp32-100.gpu.log" \
          "$dir/$from-bf16-100.gpu.log" 0.02 --mean-over 10 2>&1)" || status=$?
      else
        status=1 detail="loom-run failed"
      fi
      if [ "$from" = tiny ]; then
        verdict bf16-100 "$status" "bf16 against fp32 on the GPU, 100 steps from make-checkpoint.py's weights: $detail"
      else
        echo "INFO bf16-100-init: bf16 against fp32 on the GPU, 100 steps from loom-run's initialization: $detail; the JAX reference from the same weights: $(cat "$dir/init.jax-drift" 2>/dev/null || echo 'not prepared (no JAX)')"
      fi
    done
  fi

  local tests="$build_dir/test/unit/LoomCudaTests"
  if [ -x "$tests" ]; then
    status=0
    "$tests" >"$dir/LoomCudaTests.log" 2>&1 </dev/null || status=$?
    # A crash before gtest's summary leaves no line to show.
    detail="$(grep -E '^\[ +(PASSED|SKIPPED|FAILED) +\] [0-9]+ test' "$dir/LoomCudaTests.log" | tr '\n' ' ')" || true
    # A test skipped for want of a GPU is no pass.
    if grep -q SKIPPED <<<"$detail"; then status=1; fi
    verdict LoomCudaTests "$status" "${detail:-no summary} (log: $dir/LoomCudaTests.log)"
  fi

  local sanitizer
  sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  if [ -x "$sanitizer" ] && [ -f "$dir/tiny-bf16.loom" ]; then
    status=0
    detail="$("$sanitizer" --tool memcheck --error-exitcode 3 \
      "$loom_run" "$dir/tiny-bf16.loom" --data "$dir/data.txt" --steps 2 2>&1 |
      tail -n 1)" || status=$?
    verdict memcheck "$status" "$detail"
  fi
  echo "check-cuda.sh: $total checks, $failed failed"
  [ "$failed" = 0 ]
}

case "$mode" in
  prepare) prepare ;;
  run) run ;;
  *) usage ;;
esac
