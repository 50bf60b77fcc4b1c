#!/usr/bin/env bash
# GPT-2 124M at batch 4, sequence 64, trained by llm.c's CPU reference
# (train_gpt2.c, built with its Makefile's flags for this CPU) and by Loom,
# from the same weights on the same tokens with llm.c's hyperparameters
# (AdamW, lr 1e-4, betas 0.9/0.999, no weight decay or clipping), one after
# the other on every core: each one's ms/step (the median over the steps
# after the first), their ratio, and how far their losses are apart.
#
#   scripts/bench-llmc.sh LLMC [--steps N]
#
# LLMC is an llm.c checkout (the directory holding train_gpt2.c). Loom does
# not ship llm.c; both its early version (checkpoint version 1, bare int32
# tokens) and the later ones (version 3, token shards) are understood.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
usage="usage: scripts/bench-llmc.sh LLMC [--steps N]"
[ $# -ge 1 ] || { echo "$usage" >&2; exit 1; }
llmc="$1"
shift
steps=10
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { echo "$usage" >&2; exit 1; }
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    *) echo "$usage" >&2; exit 1 ;;
  esac
done
# llm.c samples text at step 20, untimed but minutes long on a CPU.
if ! [[ "$steps" =~ ^[0-9]+$ ]] || [ "$steps" -lt 3 ] || [ "$steps" -gt 20 ]; then
  echo "bench-llmc.sh: --steps must be from 3 to 20 (llm.c samples at step 20)" >&2
  exit 1
fi
source="$llmc/train_gpt2.c"
[ -f "$source" ] || { echo "bench-llmc.sh: $source: no such file" >&2; exit 1; }
"$root/scripts/setup.sh" >&2
. "$root/scripts/lib/python.sh"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# llm.c's Makefile: -Ofast, this CPU's instructions, OpenMP threads.
gcc -Ofast -march=native -fopenmp -DOMP -Wno-unused-result -I"$llmc" \
  "$source" -lm -o "$work/train_gpt2"

sed -e 's/"learning_rate": [0-9.e-]*/"learning_rate": 0.0001/' \
  -e 's/"beta2": [0-9.e-]*/"beta2": 0.999/' \
  -e 's/"weight_decay": [0-9.e-]*/"weight_decay": 0.0/' \
  -e 's/"grad_clip": [0-9.e-]*/"grad_clip": 0.0/' \
  "$root/examples/gpt2-124m.json" > "$work/gpt2-124m.json"
"$build_dir/bin/loomc" "$work/gpt2-124m.json" --batch-size 4 --seq-len 64 \
  -o "$work/gpt2-124m.loom"
"$build_dir/bin/loom-run" "$work/gpt2-124m.loom" --steps 0 \
  --data /usr/share/common-licenses/GPL-3 --save "$work/init.bin" > /dev/null
"$LOOM_PYTHON" "$root/scripts/llmc-files.py" "$source" "$work/init.bin" \
  /usr/share/common-licenses/GPL-3 "$work" > /dev/null

# llm.c runs 41 steps; stop it after ours. Its own timing leaves out its
# validations, as Loom's leaves out none (it runs none here).
llmc_steps() { grep -c '^step .*took' "$work/llmc.log" || true; }
: > "$work/llmc.log"
(cd "$work" && exec stdbuf -oL ./train_gpt2 > llmc.log 2>&1) &
llmc_pid=$!
while kill -0 "$llmc_pid" 2>/dev/null && [ "$(llmc_steps)" -lt "$steps" ]; do
  sleep 1
done
kill "$llmc_pid" 2>/dev/null || true
wait "$llmc_pid" 2>/dev/null || true
if [ "$(llmc_steps)" -lt "$steps" ]; then
  echo "bench-llmc.sh: llm.c stopped before $steps steps:" >&2
  cat "$work/llmc.log" >&2
  exit 1
fi

"$build_dir/bin/loom-run" "$work/gpt2-124m.loom" --load "$work/init.bin" \
  --data "$work/loom-train.bin" --steps "$steps" > "$work/loom.log"

"$LOOM_PYTHON" - "$work/llmc.log" "$work/loom.log" "$steps" <<'EOF'
import re, statistics, sys
llmc, loom, steps = open(sys.argv[1]).read(), open(sys.argv[2]).read(), int(sys.argv[3])
a = re.findall(r"^step \d+: train loss ([0-9.]+) \(took ([0-9.]+) ms\)", llmc, re.M)[:steps]
b = re.findall(r"^step +\d+/\d+ \| loss ([0-9.]+) .*\| +([0-9.]+) ms", loom, re.M)
if len(b) != steps:
    sys.exit(f"bench-llmc.sh: loom-run printed {len(b)} steps of {steps}")
ms_a = statistics.median(float(t) for _, t in a[1:])
ms_b = statistics.median(float(t) for _, t in b[1:])
diff = max(abs(float(x) - float(y)) / float(x) for (x, _), (y, _) in zip(a, b))
print(f"GPT-2 124M, batch 4 x 64, {steps} steps (median of steps 2-{steps}):")
print(f"  llm.c train_gpt2.c: {ms_a:.0f} ms/step")
print(f"  Loom:               {ms_b:.0f} ms/step, {ms_a / ms_b:.2f}x llm.c's speed")
print(f"  losses: llm.c {float(a[0][0]):.6f} -> {float(a[-1][0]):.6f}, "
      f"Loom {float(b[0][0]):.6f} -> {float(b[-1][0]):.6f}, "
      f"largest relative difference {diff:.1e}")
EOF
