#!/usr/bin/env bash
# Fused attention (the runtime's kernels, no [T, T] scores in memory)
# against the loops that keep the scores (loomc --attention=materialized),
# on the CPU: gpt2-tiny's shape at a longer sequence (default 512 tokens, 2
# sequences a step). For each sequence length: ms/step of each (the median
# of the steps after the first, the two compiled steps run in turns), the
# compiled step's arena, the final losses (equal up to rounding) and the
# fused step's time and memory as a share of the materialized one's.
#
#   scripts/bench-attention.sh [--seq "256 512 1024"] [--batch N] [--steps N] [--threads N]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
. "$root/scripts/lib/python.sh"
seqs="512" batch=2 steps=4 threads=""
usage() {
  echo "usage: scripts/bench-attention.sh [--seq \"256 512\"] [--batch N] [--steps N] [--threads N]" >&2
  exit 1
}
number() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "$1 needs a positive integer, got '$2'" >&2; exit 1; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    --seq) [ $# -ge 2 ] || usage; for s in $2; do number --seq "$s"; done; seqs="$2"; shift 2 ;;
    --batch) [ $# -ge 2 ] || usage; number "$1" "$2"; batch="$2"; shift 2 ;;
    --steps) [ $# -ge 2 ] || usage; number "$1" "$2"; [ "$2" -ge 2 ] || { echo "--steps needs at least 2" >&2; exit 1; }; steps="$2"; shift 2 ;;
    --threads) [ $# -ge 2 ] || usage; number "$1" "$2"; threads="--threads $2"; shift 2 ;;
    *) usage ;;
  esac
done
"$root/scripts/setup.sh" >&2

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
loomc="$build_dir/bin/loomc"
loom_run="$build_dir/bin/loom-run"
data=/usr/share/common-licenses/GPL-3

echo "gpt2-tiny's shape (4 layers, 4 heads of 32), batch $batch, $steps steps, CPU"
echo
echo "| tokens | fused ms/step | materialized ms/step | fused arena | materialized arena | fused / materialized (time, arena) | final losses |"
echo "|---|---|---|---|---|---|---|"
for seq in $seqs; do
  "$LOOM_PYTHON" - "$root/examples/gpt2-tiny.json" "$work/model.json" "$seq" "$batch" <<'PY'
import json, sys
model = json.load(open(sys.argv[1]))
seq, batch = int(sys.argv[3]), int(sys.argv[4])
model["model"]["n_positions"] = max(model["model"]["n_positions"], seq)
model["training"].update(sequence_length=seq, batch_size=batch)
json.dump(model, open(sys.argv[2], "w"))
PY
  for mode in fused materialized; do
    "$loomc" "$work/model.json" --attention=$mode -o "$work/$mode.loom"
    "$loomc" "$work/model.json" --attention=$mode --emit=memory > "$work/$mode.memory"
  done
  # In turns, so that both see the same load on a shared machine.
  for round in 1 2; do
    for mode in fused materialized; do
      "$loom_run" "$work/$mode.loom" --data "$data" --steps "$steps" $threads \
        > "$work/$mode.$round.log"
    done
  done
  "$LOOM_PYTHON" - "$work" "$seq" <<'PY'
import re, statistics, sys
work, seq = sys.argv[1], sys.argv[2]
def times(mode):
    ms = []
    for round in (1, 2):
        text = open(f"{work}/{mode}.{round}.log").read()
        ms += [float(m) for m in re.findall(r"^step +\d+/\d+ .*\| +([0-9.]+) ms", text, re.M)[1:]]
    return statistics.median(ms)
def arena(mode):
    text = open(f"{work}/{mode}.memory").read()
    return int(re.search(r"^compiled +train_step: arena (\d+) B", text, re.M).group(1))
def loss(mode):
    text = open(f"{work}/{mode}.1.log").read()
    return re.search(r"final loss ([0-9.]+)", text).group(1)
f, m = times("fused"), times("materialized")
af, am = arena("fused"), arena("materialized")
print(f"| {seq} | {f:.1f} | {m:.1f} | {af / 2**20:.1f} MiB | {am / 2**20:.1f} MiB "
      f"| {f / m:.2f}, {af / am:.2f} | {loss('fused')}, {loss('materialized')} |")
PY
done
