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
  cmake ninja-build ccache g++ python3 python3-pip python3-numpy libgtest-dev
  libopenblas-dev base-files
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

# The tests read safetensors exports back with the Python package, in the
# interpreter lit runs them with (Debian's, which has no package for it).
if ! /usr/bin/python3 -c "import numpy, safetensors" 2>/dev/null; then
  echo "loom setup: installing the safetensors Python package"
  /usr/bin/python3 -m pip install --quiet --break-system-packages safetensors
fi
# JAX on the CPU: the independent GPT-2 trainer that the fp32 and bf16
# losses are checked against (scripts/jax-gpt2.py, test/e2e/jax-reference.test).
if ! /usr/bin/python3 -c "import jax" 2>/dev/null; then
  echo "loom setup: installing JAX (CPU) for the reference trainer"
  /usr/bin/python3 -m pip install --quiet --break-system-packages "jax[cpu]"
fi

if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S "$root" -B "$build_dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
# Two jobs: the machines Loom is developed and tested on have two cores, and
# more parallel MLIR compiles only trade time for memory.
ninja -C "$build_dir" -j "${LOOM_JOBS:-$(nproc)}"
