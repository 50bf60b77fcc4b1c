#!/usr/bin/env bash
# Data parallelism on this machine's cores: tokens/s and the time each step
# spends in its collectives, for gpt2-tiny and GPT-2 124M (batch 4,
# sequence 64), at dp=1 (one process, every core's thread) and dp=2 (two
# processes under mpirun, one thread each), for each ZeRO stage; and each
# rank's bytes of parameters, gradients and optimizer state as compiled.
#
#   scripts/bench-dp.sh [--steps-tiny N] [--steps-124m N] [--models tiny,124m]
#
# One row a plan, its six columns separated by at least one space (the
# plan's label holds spaces of its own); test/tools/scripts/bench-dp.test
# parses them.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
steps_tiny=30 steps_124m=4 models=tiny,124m
usage="usage: scripts/bench-dp.sh [--steps-tiny N] [--steps-124m N] [--models tiny,124m]"
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { echo "$usage" >&2; exit 1; }
  case "$1" in
    --steps-tiny) steps_tiny="$2"; shift 2 ;;
    --steps-124m) steps_124m="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    *) echo "$usage" >&2; exit 1 ;;
  esac
done
"$root/scripts/setup.sh" >&2

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
data=/usr/share/common-licenses/GPL-3
cores="$(nproc)"
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" -ne 0 ] || mpirun+=(--allow-run-as-root)

printf '%-6s %-28s %10s %10s %14s %12s\n' model plan "ms/step" "tokens/s" "comm ms/step" "state MiB"
for model in ${models//,/ }; do
  case "$model" in
    tiny | 124m) ;;
    *) echo "scripts/bench-dp.sh: --models: unknown model '$model' (tiny, 124m)" >&2; exit 1 ;;
  esac
  if [ "$model" = tiny ]; then
    json="$root/examples/gpt2-tiny.json" shape=() steps="$steps_tiny"
  else
    json="$root/examples/gpt2-124m.json" shape=(--batch-size 4 --seq-len 64) steps="$steps_124m"
  fi
  for plan in dp=1 dp=2,zero=0 dp=2,zero=1 dp=2,zero=2 dp=2,zero=3; do
    artifact="$work/$model-${plan//[=,]/-}.loom"
    if ! "$build_dir/bin/loomc" "$json" "${shape[@]}" --plan "$plan" -o "$artifact" 2> "$work/err"; then
      printf '%-6s %-28s %s\n' "$model" "$plan" "does not compile: $(tail -1 "$work/err" | sed 's/.*error: //')"
      continue
    fi
    if [ "$plan" = dp=1 ]; then
      line="$("$build_dir/bin/loom-run" "$artifact" --data "$data" --steps "$steps" --threads "$cores" --quiet)"
      label="dp=1 ($cores threads)"
    else
      line="$("${mpirun[@]}" -np 2 "$build_dir/bin/loom-run" "$artifact" --data "$data" --steps "$steps" --threads 1 --quiet)"
      label="$plan (2 x 1 thread)"
    fi
    ms="$(sed -n 's/.*, \([0-9.]*\) ms\/step[ ,].*/\1/p' <<< "$line")"
    tps="$(sed -n 's/.* \([0-9]*\) tok\/s.*/\1/p' <<< "$line")"
    comm="$(sed -n 's/.*communication \([0-9.]*\) ms\/step.*/\1/p' <<< "$line")"
    # The compiled state's line alone: the activations' and the peak's
    # lines end in MiB too, and broke the row over three lines.
    state="$("$build_dir/bin/loomc" "$json" "${shape[@]}" --plan "$plan" --emit=memory |
      sed -n 's/^compiled  *per rank: parameters .*(\([0-9.]*\) MiB)$/\1/p')"
    printf '%-6s %-28s %10s %10s %14s %12s\n' "$model" "$label" "$ms" "$tps" "${comm:--}" "$state"
  done
done
