#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/, docs/fuzzing.md) with clang,
# AddressSanitizer and UBSan into $BUILD_DIR/fuzz, and runs each from its
# seed corpus for SECONDS (default 12). Exits 1 on any finding (a crash, a
# sanitizer report, a timeout, memory past the limit), whose input is kept
# in $BUILD_DIR/fuzz/findings; prints each harness's executions.
#
#   scripts/fuzz.sh [SECONDS] [harness...]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}/fuzz"
seconds="${1:-12}"
shift || true
harnesses=("$@")
[ "${#harnesses[@]}" -gt 0 ] ||
  harnesses=(model-json plan-string cuda-arch manifest checkpoint
             token-shard safetensors)

if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DLOOM_FUZZERS=ON \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit >/dev/null
fi
ninja -C "$build_dir" -j "${LOOM_JOBS:-$(nproc)}" loom-fuzzers >/dev/null

# Refusing a request for more memory than there is, as the readers do, is
# the behaviour under test, not a finding.
export ASAN_OPTIONS="allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:${UBSAN_OPTIONS:-}"
mkdir -p "$build_dir/findings"
status=0
for name in "${harnesses[@]}"; do
  work="$build_dir/corpus/$name"
  mkdir -p "$work"
  log="$build_dir/$name.log"
  if "$build_dir/fuzz/loom-fuzz-$name" -max_total_time="$seconds" \
      -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build_dir/findings/$name-" \
      "$work" "$root/fuzz/corpus/$name" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz $name: ${runs:-?} executions in ${seconds} s, no findings"
  else
    status=1
    echo "fuzz $name: FINDING (log: $log)"
    grep -E "ERROR|SUMMARY|Test unit written" "$log" | sed 's/^/  /' || true
  fi
done
exit "$status"
