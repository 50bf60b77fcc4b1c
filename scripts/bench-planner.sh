#!/usr/bin/env bash
# Planning speed: the cost model searches every legal plan of GPT-3 (96
# layers, width 12288) on 1,024 A100s; prints the wall time of the whole
# loomc run (import, search, report) next to the number of plans priced.
#
#   scripts/bench-planner.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
. "$root/scripts/lib/python.sh"
"$root/scripts/setup.sh" >&2

report="$(mktemp)"
trap 'rm -f "$report"' EXIT
start=$(date +%s.%N)
"$build_dir/bin/loomc" "$root/examples/gpt3-175b.json" --plan auto --emit=plan >"$report"
end=$(date +%s.%N)
grep -E '^(searched|chosen)' "$report"
"$LOOM_PYTHON" -c "import sys; print(f'planning time: {float(sys.argv[2]) - float(sys.argv[1]):.3f} s')" "$start" "$end"
