#!/usr/bin/env bash
# Training-step throughput on the CPU: gpt2-tiny and GPT-2 124M at batch 4,
# sequence 64, in f32, and the latter in bf16 too (gpt2-124m-bf16: its GEMMs
# on AMX or AVX512-BF16 where the CPU has them), next to a plain OpenBLAS
# SGEMM measured in the same process.
#
#   scripts/bench.sh [--steps N]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh" >&2

"$build_dir/bin/loomc" "$root/examples/gpt2-tiny.json" -o "$build_dir/bench-tiny.loom"
"$build_dir/bin/loomc" "$root/examples/gpt2-124m.json" --batch-size 4 --seq-len 64 \
  -o "$build_dir/bench-124m.loom"
sed 's/"name": "gpt2-124m"/"name": "gpt2-124m-bf16"/' \
  "$root/examples/gpt2-124m.json" > "$build_dir/bench-124m-bf16.json"
"$build_dir/bin/loomc" "$build_dir/bench-124m-bf16.json" --batch-size 4 \
  --seq-len 64 --plan precision=bf16 -o "$build_dir/bench-124m-bf16.loom"
"$build_dir/bin/loom-bench" "$@" "$build_dir/bench-tiny.loom" \
  "$build_dir/bench-124m.loom" "$build_dir/bench-124m-bf16.loom"
