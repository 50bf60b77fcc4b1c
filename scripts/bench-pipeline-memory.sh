#!/usr/bin/env bash
# Memory per pipeline rank, measured against predicted: gpt2-tiny on pp
# stages (default 4) under mpirun, for GPipe and 1F1B, each recomputation
# mode (selective compiles to none's step on the CPU and is left out) and
# several micro-batch counts. For every rank: the peak of its tensors as
# loom-run measures it (the runtime's heap: parameters, optimizer state and
# every buffer of the step in use at once), the compiled step's state plus
# the activations its schedule holds (loomc --emit=memory, temporaries
# aside) and the cost model's prediction (state, held activations and one
# pass's temporaries, without a GPU framework's overhead). Prints a
# Markdown table, MiB per rank.
#
#   scripts/bench-pipeline-memory.sh [--pp N] [--mb "2 4 8"] [--steps N]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
. "$root/scripts/lib/python.sh"
pp=4 mbs="2 4 8" steps=2
while [ $# -gt 0 ]; do
  case "$1" in
    --pp) pp="$2"; shift 2 ;;
    --mb) mbs="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    *) echo "usage: scripts/bench-pipeline-memory.sh [--pp N] [--mb \"2 4 8\"] [--steps N]" >&2; exit 1 ;;
  esac
done
"$root/scripts/setup.sh" >&2

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" -ne 0 ] || mpirun+=(--allow-run-as-root)
loomc="$build_dir/bin/loomc"
loom_run="$build_dir/bin/loom-run"
data=/usr/share/common-licenses/GPL-3

echo "gpt2-tiny, pp = $pp, $steps steps; MiB per rank (rank 0 / rank 1 / ...)"
echo
echo "| schedule | recompute | micro-batches | measured peak | compiled: state + held activations | cost model |"
echo "|---|---|---|---|---|---|"
for schedule in gpipe 1f1b; do
  for recompute in none full stage; do
    for mb in $mbs; do
      plan="pp=$pp,mb=$mb,schedule=$schedule,recompute=$recompute"
      "$loomc" "$root/examples/gpt2-tiny.json" --plan "$plan" --emit=memory > "$work/memory.txt"
      "$loomc" "$root/examples/gpt2-tiny.json" --plan "$plan" -o "$work/step.loom"
      "${mpirun[@]}" -np "$pp" "$loom_run" "$work/step.loom" --data "$data" \
        --steps "$steps" --threads 1 --verbose-ranks > "$work/run.txt"
      "$LOOM_PYTHON" - "$work/memory.txt" "$work/run.txt" "$pp" "$schedule" "$recompute" "$mb" <<'PY'
import re, sys

memory, run = open(sys.argv[1]).read(), open(sys.argv[2]).read()
pp = int(sys.argv[3])

def per_rank(pattern, text):
    found = {int(r): int(b) for r, b in re.findall(pattern, text)}
    if sorted(found) != list(range(pp)):
        sys.exit(f"expected figures of {pp} ranks, found {sorted(found)}")
    return [found[r] / 2**20 for r in range(pp)]

measured = per_rank(r"\[rank (\d+)\] loom-run: .* \(tensors (\d+) B,", run)
compiled = per_rank(r"compiled\s+pipeline rank (\d+): .* = (\d+) B", memory)
model = per_rank(r"cost model\s+pipeline rank (\d+): .* = (\d+) B", memory)
cells = [" / ".join(f"{x:.2f}" for x in xs) for xs in (measured, compiled, model)]
print(f"| {sys.argv[4]} | {sys.argv[5]} | {sys.argv[6]} | " + " | ".join(cells) + " |")
PY
    done
  done
done
