#!/usr/bin/env bash
# Compile speed: loomc from model description to artifact for gpt2-tiny,
# GPT-2 124M, GPT-2 1.5B and GPT-3 175B (batch 1, for this machine's CPU:
# the example's GPU cluster section is left out, so the plan is the
# single-rank one; compiled, not run). Prints each compile's wall time
# (the best of --runs, default 3) and the compiler's peak memory, then
# where the time of the GPT-2 124M compile goes (loomc --timing).
#
#   scripts/bench-compile.sh [--runs N]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
. "$root/scripts/lib/python.sh"
runs=3
if [ "${1:-}" = "--runs" ] && [ -n "${2:-}" ]; then
  runs="$2"
elif [ "$#" -gt 0 ]; then
  echo "usage: scripts/bench-compile.sh [--runs N]" >&2
  exit 1
fi
"$root/scripts/setup.sh" >&2

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$LOOM_PYTHON" - "$root/examples/gpt3-175b.json" "$work/gpt3-175b-cpu.json" <<'PY'
import json, sys
model = json.load(open(sys.argv[1]))
model.pop("cluster", None)
model["training"]["batch_size"] = 1
json.dump(model, open(sys.argv[2], "w"), indent=2)
PY

"$LOOM_PYTHON" - "$build_dir/bin/loomc" "$work" "$runs" \
  "gpt2-tiny=$root/examples/gpt2-tiny.json" \
  "gpt2-124m=$root/examples/gpt2-124m.json" \
  "gpt2-1.5b=$root/examples/gpt2-1.5b.json" \
  "gpt3-175b=$work/gpt3-175b-cpu.json" <<'PY'
import os, resource, subprocess, sys, time

loomc, work, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
print(f"{'model':<12} {'compile (s)':>12} {'peak memory (MiB)':>18} {'artifact (KiB)':>15}")
for spec in sys.argv[4:]:
    name, path = spec.split("=", 1)
    out = os.path.join(work, name + ".loom")
    best, peak = None, 0.0
    for _ in range(runs):
        start = time.perf_counter()
        # A fresh process per compile, so that ru_maxrss of the waited-for
        # child is this compile's peak.
        pid = os.fork()
        if pid == 0:
            os.execv(loomc, [loomc, path, "-o", out])
        _, status, usage = os.wait4(pid, 0)
        elapsed = time.perf_counter() - start
        if status != 0:
            sys.exit(f"bench-compile: loomc {path} failed")
        best = elapsed if best is None else min(best, elapsed)
        peak = max(peak, usage.ru_maxrss / 1024.0)
    size = os.path.getsize(out) / 1024.0
    print(f"{name:<12} {best:>12.2f} {peak:>18.0f} {size:>15.0f}")
PY

echo
echo "where the GPT-2 124M compile's time goes (loomc --timing):"
"$build_dir/bin/loomc" "$root/examples/gpt2-124m.json" -o "$work/timing.loom" \
  --timing 2>&1 | sort -k1 -n -r | head -12
