#!/usr/bin/env bash
# Installs, builds and runs every Loom test (lit + FileCheck), then prints
# how many ran: "N passed, N failed, N skipped"; then runs each fuzzer for
# LOOM_FUZZ_SECONDS (default 12) from its seeds (scripts/fuzz.sh).
#
#   scripts/test.sh [lit flags...]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
. "$root/scripts/lib/python.sh"

results="$build_dir/test-results.json"
rm -f "$results"
status=0
/usr/lib/llvm-22/bin/lit "$build_dir/test" "$build_dir/test/unit" -sv -o "$results" "$@" || status=$?

summary=0
"$LOOM_PYTHON" - "$results" "$status" <<'PY' || summary=$?
import json, sys
path, status = sys.argv[1], int(sys.argv[2])
try:
    tests = json.load(open(path))["tests"]
except (OSError, ValueError, KeyError) as err:
    print(f"loom tests: no results from lit ({err})")
    sys.exit(status or 1)
codes = [t["code"] for t in tests]
passed = sum(c in ("PASS", "XFAIL") for c in codes)
skipped = sum(c in ("UNSUPPORTED", "SKIPPED", "EXCLUDED") for c in codes)
failed = len(codes) - passed - skipped
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed or status or not codes else 0)
PY

# Each fuzzer for a few seconds from its seeds (docs/fuzzing.md): about a
# minute; any finding fails the run.
fuzz=0
"$root/scripts/fuzz.sh" "${LOOM_FUZZ_SECONDS:-12}" || fuzz=$?
exit $(( summary || fuzz ))
