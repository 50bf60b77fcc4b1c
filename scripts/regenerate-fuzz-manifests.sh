#!/usr/bin/env bash
# Regenerates the manifest seeds of the fuzzers (fuzz/corpus/manifest/)
# with this build's loomc, after a change of the manifest's format: the
# micro-gpt model of test/e2e/Inputs under one rank, dp=2,tp=2,zero=3 and a
# two-stage pipeline of two micro-batches, micro-qwen2 (with the safetensors
# harness's seed) alone and under tp=2 (its key/value head shared by a team
# of ranks), and pp2-layer-run-overflow, the pipeline's manifest
# with one layer run's first layer a 90-digit number and another stage's
# run moved onto layer 0 (a crash the manifest fuzzer once found).
#
#   scripts/regenerate-fuzz-manifests.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
. "$root/scripts/lib/python.sh"
corpus=$root/fuzz/corpus/manifest
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# manifest ARTIFACT OUT: the artifact's manifest text, without its NUL.
manifest() {
  "$LOOM_PYTHON" - "$1" "$2" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
start = data.index(b"loom-artifact ")
open(sys.argv[2], "wb").write(data[start:data.index(b"\0", start)])
PY
}

model=$root/test/e2e/Inputs/micro-gpt.json
# name:loomc flags, the vocabulary padded to 12 for tp = 2.
for seed in "micro-gpt:" \
            "micro-gpt-dp2-tp2-zero3:--plan dp=2,tp=2,zero=3 --pad-vocab 12" \
            "micro-gpt-pp2:--plan pp=2,mb=2"; do
  name=${seed%%:*} flags=${seed#*:}
  # shellcheck disable=SC2086 # the flags are words
  "$build_dir/bin/loomc" "$model" $flags -o "$work/$name.loom"
  manifest "$work/$name.loom" "$corpus/$name"
done
"$LOOM_PYTHON" - "$corpus/micro-gpt-pp2" "$corpus/pp2-layer-run-overflow" <<'PY'
import sys
text = open(sys.argv[1]).read()
first = "arg param h.*.ln_2.weight f32 1x8 layers=0:1"
second = "arg param h.*.mlp.c_fc.weight f32 1x32x8 layers=1:1"
assert first in text and second in text
text = text.replace(first, first.replace("layers=0:1", "layers=0" + "8" * 89 + ":1"), 1)
text = text.replace(second, second.replace("layers=1:1", "layers=0:1"), 1)
open(sys.argv[2], "w").write(text)
PY
# A Llama-family model for the safetensors harness: grouped key/value heads
# and q/k/v biases, whose Hugging Face tensors interleave in the fused
# projection; and its initial weights as the harness's seed.
"$build_dir/bin/loomc" "$root/test/e2e/Inputs/micro-qwen2.json" -o "$work/micro-qwen2.loom"
manifest "$work/micro-qwen2.loom" "$corpus/micro-qwen2"
# Its one key/value head shared by a team of two tensor-parallel ranks
# (tp_shared).
"$build_dir/bin/loomc" "$root/test/e2e/Inputs/micro-qwen2.json" \
  --plan tp=2 --pad-vocab 12 -o "$work/micro-qwen2-tp2.loom"
manifest "$work/micro-qwen2-tp2.loom" "$corpus/micro-qwen2-tp2-teams"
mkdir -p "$root/fuzz/corpus/safetensors"
"$LOOM_PYTHON" "$root/test/e2e/Inputs/make-shard.py" "$work/tokens.bin" 100 11
"$build_dir/bin/loom-run" "$work/micro-qwen2.loom" --data "$work/tokens.bin" \
  --steps 0 --threads 1 --quiet \
  --export-safetensors "$root/fuzz/corpus/safetensors/micro-qwen2.safetensors"
echo "regenerated $(ls "$corpus" | wc -l) manifest seeds in $corpus"
