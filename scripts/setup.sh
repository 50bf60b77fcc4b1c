#!/usr/bin/env bash
# Installs what Loom needs to build and test on Debian 12, then configures
# and builds it. Safe to rerun: packages already present are not fetched
# again and the build is incremental.
#
#   scripts/setup.sh            # build into ./build
#   BUILD_DIR=out scripts/setup.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"

packages=(
  cmake ninja-build ccache g++ python3-pip python3-numpy libgtest-dev
  libopenblas-dev libdnnl-dev base-files
  libopenmpi-dev openmpi-bin
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  clang
)

missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "loom setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"
fi

# One Python interpreter for everything Loom runs (docs/python.md):
# LOOM_PYTHON if set, else the one this build was configured with, else
# Debian's. The tests' packages go into it, and the build records it.
. "$root/scripts/lib/python.sh"
pip_install() {
  "$LOOM_PYTHON" -m pip --version >/dev/null 2>&1 || {
    echo "loom setup: $LOOM_PYTHON (LOOM_PYTHON) has no pip to install $* with" >&2
    exit 1
  }
  "$LOOM_PYTHON" -m pip install --quiet --break-system-packages "$@"
}
# The tests read safetensors exports back with the Python package (Debian
# has no package for it).
if ! "$LOOM_PYTHON" -c "import numpy, safetensors" 2>/dev/null; then
  echo "loom setup: installing numpy and safetensors into $LOOM_PYTHON"
  pip_install numpy safetensors
fi
# Preparing token shards from text (scripts/prepare-data.py: tokenizers for
# a Hugging Face tokenizer.json, tiktoken for GPT-2's) and drawing training
# logs (scripts/plot.py), with the tests of both.
if ! "$LOOM_PYTHON" -c "import tokenizers, tiktoken, matplotlib" 2>/dev/null; then
  echo "loom setup: installing tokenizers, tiktoken and matplotlib into $LOOM_PYTHON"
  pip_install tokenizers tiktoken matplotlib
fi
# TensorBoard's own reader of event files, which loom-run --tensorboard's
# test reads them back with (test/e2e/tensorboard.test).
if ! "$LOOM_PYTHON" -c "import tensorboard" 2>/dev/null; then
  echo "loom setup: installing tensorboard into $LOOM_PYTHON"
  pip_install tensorboard
fi
# JAX on the CPU: the independent GPT-2 trainer that the fp32 and bf16
# losses are checked against (scripts/jax-gpt2.py, test/e2e/jax-reference.test).
if ! "$LOOM_PYTHON" -c "import jax" 2>/dev/null; then
  echo "loom setup: installing JAX (CPU) into $LOOM_PYTHON for the reference trainer"
  pip_install "jax[cpu]"
fi

# GPT-2's BPE for scripts/prepare-data.py without a network: tiktoken
# downloads it from openaipublic at first use, and the same file (tiktoken's
# r50k_base ranks, checked by their SHA-256) ships in openai-whisper's
# source package on PyPI. Only that file is kept, in the build directory,
# where bin/loom-python and the tests point prepare-data.py (LOOM_GPT2_BPE).
gpt2_bpe="$build_dir/share/gpt2.tiktoken"
gpt2_bpe_sha256=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930
if [ ! -f "$gpt2_bpe" ]; then
  echo "loom setup: fetching GPT-2's BPE ranks (openai-whisper's source package on PyPI)"
  fetch="$(mktemp -d)"
  if "$LOOM_PYTHON" -m pip download --quiet --no-deps --no-binary :all: \
       openai-whisper==20250625 -d "$fetch" >/dev/null 2>&1 &&
     tar --no-same-owner -xzf "$fetch"/openai_whisper-20250625.tar.gz -C "$fetch" \
       openai_whisper-20250625/whisper/assets/gpt2.tiktoken &&
     echo "$gpt2_bpe_sha256  $fetch/openai_whisper-20250625/whisper/assets/gpt2.tiktoken" |
       sha256sum --check --status; then
    mkdir -p "$build_dir/share"
    mv "$fetch"/openai_whisper-20250625/whisper/assets/gpt2.tiktoken "$gpt2_bpe"
  else
    echo "loom setup: warning: could not fetch GPT-2's BPE ranks; prepare-data.py --tokenizer gpt2 will need tiktoken's download" >&2
  fi
  rm -rf "$fetch"
fi

configured="$(sed -n 's/^LOOM_PYTHON:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null)" ||
  configured=""
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S "$root" -B "$build_dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DLOOM_PYTHON="$LOOM_PYTHON"
elif [ "$configured" != "$LOOM_PYTHON" ]; then
  cmake -S "$root" -B "$build_dir" -DLOOM_PYTHON="$LOOM_PYTHON" >/dev/null
fi
# Two jobs: the machines Loom is developed and tested on have two cores, and
# more parallel MLIR compiles only trade time for memory.
ninja -C "$build_dir" -j "${LOOM_JOBS:-$(nproc)}"
