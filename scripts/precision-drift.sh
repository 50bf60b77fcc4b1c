#!/usr/bin/env bash
# How far gpt2-tiny's bf16 losses drift from fp32's over a run, on the CPU,
# for Loom and for an independent trainer (scripts/jax-gpt2.py: JAX, bf16
# placed as PyTorch's autocast places it), from the same weights on the
# same data, over several initializations:
#
#   scripts/precision-drift.sh [--seeds N] [--steps N] [--data FILE]
#                              [--out DIR] [-- LOOMC-FLAGS...]
#
# For each seed 1..N (default 8): loom-run's initialization with that seed,
# saved as an llm.c checkpoint, then 100 steps (--steps) of Loom's fp32 and
# bf16 steps and of the reference's fp32 and bf16, from it. LOOMC-FLAGS go
# to the bf16 artifact (--gelu=epilogue --residual-add=epilogue: the CUDA
# target's placement). One line per seed: the largest difference of
# 10-step means of the losses, Loom's fp32 against the reference's, then
# each trainer's bf16 against its own fp32; and how many seeds stay within
# 2%. The data defaults to GPL-3's text four times (scripts/check-cuda.sh's).
# Logs and checkpoints go to DIR (default: a new temporary directory).
# Needs JAX (scripts/setup.sh installs it).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
. "$root/scripts/lib/python.sh"
compare="$root/test/e2e/Inputs/compare-losses.py"
reference="$root/scripts/jax-gpt2.py"
model="$root/examples/gpt2-tiny.json"
usage() {
  echo "usage: scripts/precision-drift.sh [--seeds N] [--steps N] [--data FILE] [--out DIR] [-- LOOMC-FLAGS...]" >&2
  exit 1
}
seeds=8 steps=100 data="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) [ $# -ge 2 ] || usage; seeds="$2"; shift 2 ;;
    --steps) [ $# -ge 2 ] || usage; steps="$2"; shift 2 ;;
    --data) [ $# -ge 2 ] || usage; data="$2"; shift 2 ;;
    --out) [ $# -ge 2 ] || usage; out="$2"; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[[ "$seeds" =~ ^[1-9][0-9]*$ ]] || { echo "precision-drift.sh: --seeds $seeds: not a positive count" >&2; exit 1; }
# Means over 10 steps need whole windows.
[[ "$steps" =~ ^[1-9][0-9]*0$ ]] || { echo "precision-drift.sh: --steps $steps: not a positive multiple of 10" >&2; exit 1; }
loomc="$build_dir/bin/loomc" loom_run="$build_dir/bin/loom-run"
[ -x "$loomc" ] && [ -x "$loom_run" ] || {
  echo "precision-drift.sh: no $loomc or $loom_run: build Loom first (README)" >&2
  exit 1
}
"$LOOM_PYTHON" -c "import jax" 2>/dev/null || {
  echo "precision-drift.sh: needs JAX in $LOOM_PYTHON (LOOM_PYTHON): scripts/setup.sh installs it" >&2
  exit 1
}
out="${out:-$(mktemp -d)}"
mkdir -p "$out"
if [ -z "$data" ]; then
  data="$out/data.txt"
  for _ in 1 2 3 4; do cat /usr/share/common-licenses/GPL-3; done >"$data"
fi
[ -f "$data" ] || { echo "precision-drift.sh: --data $data: no such file" >&2; exit 1; }

"$loomc" "$model" -o "$out/fp32.loom"
"$loomc" "$model" --plan precision=bf16 "$@" -o "$out/bf16.loom"

# drift A.log B.log: the largest relative difference of their 10-step means.
drift() {
  "$LOOM_PYTHON" "$compare" "$1" "$2" 1 --mean-over 10 | sed 's/.* //'
}
within() {
  "$LOOM_PYTHON" -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 0.02 else 1)" "$1"
}
echo "precision-drift.sh: gpt2-tiny, $steps steps on $data, bf16 flags: ${*:-none}; largest difference of 10-step means"
printf '%6s  %-22s  %-14s  %-14s\n' seed "fp32: Loom vs JAX" "bf16: Loom" "bf16: JAX"
loom_ok=0 jax_ok=0
for seed in $(seq 1 "$seeds"); do
  s="$out/seed$seed"
  "$loom_run" "$out/fp32.loom" --data "$data" --seed "$seed" --steps 0 \
    --save "$s.ckpt" --quiet >/dev/null
  for p in fp32 bf16; do
    "$loom_run" "$out/$p.loom" --load "$s.ckpt" --data "$data" \
      --steps "$steps" >"$s.loom-$p.log"
    "$LOOM_PYTHON" "$reference" "$model" --load "$s.ckpt" --data "$data" \
      --steps "$steps" --precision "$p" >"$s.jax-$p.log"
  done
  fp32="$(drift "$s.jax-fp32.log" "$s.loom-fp32.log")"
  loom="$(drift "$s.loom-fp32.log" "$s.loom-bf16.log")"
  jax="$(drift "$s.jax-fp32.log" "$s.jax-bf16.log")"
  within "$loom" && loom_ok=$((loom_ok + 1))
  within "$jax" && jax_ok=$((jax_ok + 1))
  printf '%6s  %-22s  %-14s  %-14s\n' "$seed" "$fp32" "$loom" "$jax"
done
echo "precision-drift.sh: bf16 within 2% of fp32: Loom $loom_ok of $seeds seeds, JAX $jax_ok of $seeds (logs in $out)"
