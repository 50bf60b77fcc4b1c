#!/usr/bin/env bash
# A GPT-2's training throughput on one NVIDIA GPU: Loom's CUDA step next to
# PyTorch's (scripts/bench/torch_gpt2.py: nanoGPT's recipe, eager and
# torch.compile), run one after the other on the same GPU. Each line:
# tokens/s, ms/step (median of the steps after the warm-up ones), MFU
# against the GPU's dense peak for the precision (the cost model's FLOP
# count: loom-run --peak-tflops, docs/loom-run.md), peak memory and the last
# step's loss: both train on the same batches of the same text (the docs,
# repeated), from their own initializations.
#
#   scripts/bench-cuda.sh [--model FILE] [--precision bf16|fp32]
#                         [--batch N|auto] [--seq N] [--steps N] [--warmup N]
#                         [--cuda-arch sm_90] [--torch-modes eager,compile|'']
#                         [--memory-mib N] [--compile-only]
#                         [--artifact FILE] [--pad-vocab N] [--trace]
#
# --model is a model description (examples/gpt2-124m.json by default), whose
# shape PyTorch's model takes too. --batch auto (the default) takes the
# largest power of two whose compiled step (parameters, optimizer state and
# arena, loomc --emit=memory) fits in the GPU's free memory (nvidia-smi, or
# --memory-mib) less 10%: the CUDA context, cuBLASLt's workspace, and
# managed memory never asked past what the GPU has. --compile-only stops
# after choosing the batch and compiling, for machines without a GPU;
# --artifact runs a step compiled elsewhere (loomc --target=cuda) from
# --model with the --precision given here, which names the line and picks
# the peak, where only the runtime is (BUILD_DIR/bin/loom-run and its
# libraries), and takes its batch and sequence for PyTorch's. --pad-vocab N
# pads the token table to a multiple of N rows on both sides (loomc
# --pad-vocab; llm.c and nanoGPT use 50,304), which aligns the vocabulary's
# GEMMs; with --artifact, say the N the artifact was compiled with.
# --trace runs Loom's step again for 4 steps under loom-run --trace and
# prints where its GPU time goes (scripts/trace-summary.py: by kind, and
# the busiest kernels), and PyTorch's 2 more steps under its profiler
# (torch_gpt2.py --profile: the same, by its kernels' names). Needs a
# build with the CUDA backend (docs/cuda.md)
# and, for the PyTorch lines, torch with CUDA in LOOM_PYTHON
# (docs/python.md).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
. "$root/scripts/lib/python.sh"
precision=bf16 batch=auto seq=1024 steps=10 warmup=3 arch=sm_90
torch_modes=eager,compile memory_mib="" compile_only=0 artifact= pad_vocab=1
model="$root/examples/gpt2-124m.json" trace=0
usage() {
  sed -n '11,15p' "${BASH_SOURCE[0]}" | sed 's/^# *//' >&2
  exit 1
}
number() {
  [[ "$2" =~ ^[1-9][0-9]*$ ]] || {
    echo "bench-cuda.sh: $1 needs a positive integer, got '$2'" >&2
    exit 1
  }
}
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || [ "$1" = --compile-only ] || [ "$1" = --trace ] || usage
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --trace) trace=1; shift ;;
    --precision) precision="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --seq) number "$1" "$2"; seq="$2"; shift 2 ;;
    --steps) number "$1" "$2"; steps="$2"; shift 2 ;;
    --warmup) [[ "$2" =~ ^[0-9]+$ ]] || number "$1" "$2"; warmup="$2"; shift 2 ;;
    --cuda-arch) arch="$2"; shift 2 ;;
    --torch-modes) torch_modes="$2"; shift 2 ;;
    --memory-mib) number "$1" "$2"; memory_mib="$2"; shift 2 ;;
    --compile-only) compile_only=1; shift ;;
    --artifact) artifact="$2"; shift 2 ;;
    --pad-vocab) number "$1" "$2"; pad_vocab="$2"; shift 2 ;;
    *) usage ;;
  esac
done
case "$precision" in
  bf16) peak=989e12 ;; # H100 SXM: dense BF16 tensor cores
  fp32) peak=67e12 ;;  # H100 SXM: FP32 on CUDA cores
  *) echo "bench-cuda.sh: --precision is bf16 or fp32, got '$precision'" >&2; exit 1 ;;
esac
[ "$batch" = auto ] || number --batch "$batch"
[ -f "$model" ] || { echo "bench-cuda.sh: --model $model: no such file" >&2; exit 1; }
# The model's name and shape, for the lines and PyTorch's model.
read -r name layers width heads < <("$LOOM_PYTHON" - "$model" <<'PY'
import json, sys
try:
    with open(sys.argv[1]) as f:
        description = json.load(f)
    m = description["model"]
    print(description.get("name", "model"), m["n_layer"], m["n_embd"], m["n_head"])
except (OSError, ValueError, KeyError, TypeError) as err:
    sys.exit(f"bench-cuda.sh: --model {sys.argv[1]}: not a model description ({err})")
PY
) || exit 1
[ "$steps" -gt "$warmup" ] || {
  echo "bench-cuda.sh: --steps ($steps) must exceed --warmup ($warmup)" >&2
  exit 1
}
loomc="$build_dir/bin/loomc" loom_run="$build_dir/bin/loom-run"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ -n "$artifact" ]; then
  [ -f "$artifact" ] || { echo "bench-cuda.sh: no artifact '$artifact'" >&2; exit 1; }
  cp "$artifact" "$work/step.loom"
else
  [ -x "$loomc" ] && [ -x "$loom_run" ] || "$root/scripts/setup.sh" >&2

  if [ -z "$memory_mib" ]; then
    if ! command -v nvidia-smi > /dev/null; then
      echo "bench-cuda.sh: no nvidia-smi, so no GPU to size the batch for; give --memory-mib" >&2
      exit 1
    fi
    memory_mib="$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits | head -n 1)"
  fi

  compile() { # batch, output
    "$loomc" "$model" --target=cuda --cuda-arch="$arch" \
      --batch-size "$1" --seq-len "$seq" --plan "precision=$precision" \
      --pad-vocab "$pad_vocab" "${@:2}"
  }
  # The rank's peak, in bytes, as the compiler plans it.
  planned_bytes() {
    compile "$1" --emit=memory | sed -n 's/.*the rank.s peak \([0-9]*\) B.*/\1/p'
  }
  # Managed memory past what the GPU has free can hang it: keep 10% spare.
  budget=$((memory_mib * 1024 * 1024 * 90 / 100))
  if [ "$batch" = auto ]; then
    batch=0
    for b in 1 2 4 8 16 32 64 128 256; do
      bytes="$(planned_bytes "$b")"
      [ -n "$bytes" ] && [ "$bytes" -le "$budget" ] || break
      batch=$b
    done
    if [ "$batch" = 0 ]; then
      echo "bench-cuda.sh: not even batch 1 fits in $memory_mib MiB less 10%" >&2
      exit 2
    fi
  fi
  bytes="$(planned_bytes "$batch")"
  echo "$name, $precision, batch $batch x $seq: planned peak $((bytes / 1048576)) MiB of $memory_mib MiB free"
  compile "$batch" -o "$work/step.loom"
  [ "$compile_only" = 0 ] || exit 0
fi

# Enough text for every step's batch without wrapping around: the docs,
# repeated.
for _ in $(seq 40); do cat "$root"/docs/*.md; done > "$work/data.txt"
"$loom_run" "$work/step.loom" --data "$work/data.txt" --steps "$steps" \
  --val-fraction 0 --peak-tflops "$(awk -v p="$peak" 'BEGIN { print p / 1e12 }')" \
  > "$work/loom.log"
awk -v warmup="$warmup" -v peak="$peak" -v precision="$precision" \
  -v shape="$work/shape" '
  /^loom-run: .* parameters,/ {
    for (i = 1; i <= NF; ++i) if ($(i + 1) ~ /^parameters,/) params = $i
    for (i = 1; i <= NF; ++i) if ($i == "x" && $(i + 2) == "tokens") {
      batch = $(i - 1); seq = $(i + 1)
    }
  }
  /^step / {
    split($2, n, "/"); if (n[1] + 0 == 1) first = $10
    if (n[1] + 0 <= warmup) next
    ms[++count] = $10; loss = $5
    # loom-run'"'"'s own MFU (--peak-tflops): the cost model'"'"'s FLOPs.
    for (i = 1; i < NF; ++i) if ($i == "MFU") mfu[count] = $(i + 1) + 0
  }
  /^loom-run: .* steps, final loss/ {
    for (i = 1; i <= NF; ++i) {
      if ($i == "peak" && $(i + 1) == "memory") rss = $(i + 2)
      if ($i == "(tensors") tensors = $(i + 1) / 1048576
    }
  }
  END {
    print batch, seq > shape
    if (!count || !params) { print "bench-cuda.sh: no step lines from loom-run" > "/dev/stderr"; exit 1 }
    for (i = 1; i <= count; ++i) if (!(i in mfu)) {
      print "bench-cuda.sh: a step line of loom-run without its MFU (--peak-tflops)" > "/dev/stderr"; exit 1
    }
    # Median by insertion sort: a handful of steps; a step'"'"'s MFU goes with
    # its time.
    for (i = 2; i <= count; ++i) for (j = i; j > 1 && ms[j - 1] > ms[j]; --j) {
      t = ms[j]; ms[j] = ms[j - 1]; ms[j - 1] = t
      t = mfu[j]; mfu[j] = mfu[j - 1]; mfu[j - 1] = t
    }
    mid = int((count + 1) / 2)
    median = count % 2 ? ms[mid] : (ms[mid] + ms[mid + 1]) / 2
    utilization = count % 2 ? mfu[mid] : (mfu[mid] + mfu[mid + 1]) / 2
    tokens = batch * seq
    printf "loom  cuda-%-8s | %10.0f tok/s | %8.2f ms/step | MFU %5.1f%% of %.0f TFLOP/s | peak %.0f MiB of tensors (process %s MiB) | loss %.3f | first step %.0f ms\n",
      precision, tokens / median * 1e3, median, utilization,
      peak / 1e12, tensors, rss, loss, first
  }' "$work/loom.log"

if [ "$trace" = 1 ]; then
  # A timeline's events cost time of their own: a run apart from the timed
  # one, its first step left out of the summary.
  "$loom_run" "$work/step.loom" --data "$work/data.txt" --steps 4 \
    --val-fraction 0 --trace "$work/trace.json" > /dev/null
  "$LOOM_PYTHON" "$root/scripts/trace-summary.py" "$work/trace.json" --top 12
fi

read -r batch seq < "$work/shape"
modes=""
for m in ${torch_modes//,/ }; do modes="$modes,$m-$precision"; done
[ -z "$modes" ] || "$LOOM_PYTHON" "$root/scripts/bench/torch_gpt2.py" --batch "$batch" \
  --seq "$seq" --steps "$((steps - warmup))" --warmup "$warmup" \
  --layers "$layers" --width "$width" --heads "$heads" \
  --padded-vocab "$(( (50257 + pad_vocab - 1) / pad_vocab * pad_vocab ))" \
  --data "$work/data.txt" --modes "${modes#,}" --profile "$((trace * 2))"
