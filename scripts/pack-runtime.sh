#!/usr/bin/env bash
# Copies Loom's runtime into DIR for a machine that has no Loom build (a
# GPU machine without LLVM/MLIR, OpenBLAS or MPI installed):
#
#   scripts/pack-runtime.sh DIR
#
# DIR gets BUILD_DIR's layout: bin/loom-run, lib/libloomrt.so and, where
# the build has it, test/unit/LoomCudaTests, with the shared libraries they
# link (OpenBLAS, oneDNN, Open MPI's, ...) in lib/, which the binaries find
# there ($ORIGIN) before the system's. Not copied: the C and C++ runtimes
# (glibc, libstdc++, libgcc_s), which must be the target's own, as recent
# as the build machine's; the CUDA driver, cuBLASLt and NCCL, which the
# runtime opens where the target has them (docs/cuda.md); and Open MPI's
# launcher and plugins (mpirun): runs of several ranks need the target's
# MPI. On the target, DIR/bin/loom-run trains compiled artifacts, and
# BUILD_DIR=DIR serves scripts/check-cuda.sh run and scripts/bench-cuda.sh
# --artifact. DIR must not exist, or be empty.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
if [ $# -ne 1 ]; then
  echo "usage: scripts/pack-runtime.sh DIR" >&2
  exit 1
fi
dir="$1"
if [ ! -x "$build_dir/bin/loom-run" ] || [ ! -f "$build_dir/lib/libloomrt.so" ]; then
  echo "pack-runtime.sh: no $build_dir/bin/loom-run or $build_dir/lib/libloomrt.so: build Loom first (README)" >&2
  exit 1
fi
if [ -e "$dir" ] && { [ ! -d "$dir" ] || [ -n "$(ls -A "$dir")" ]; }; then
  echo "pack-runtime.sh: $dir exists and is not an empty directory" >&2
  exit 1
fi
mkdir -p "$dir/bin" "$dir/lib"
cp "$build_dir/bin/loom-run" "$dir/bin/"
cp "$build_dir/lib/libloomrt.so" "$dir/lib/"
binaries=("$dir/bin/loom-run" "$dir/lib/libloomrt.so")
if [ -x "$build_dir/test/unit/LoomCudaTests" ]; then
  mkdir -p "$dir/test/unit"
  cp "$build_dir/test/unit/LoomCudaTests" "$dir/test/unit/"
  binaries+=("$dir/test/unit/LoomCudaTests")
fi
# Every library the binaries load, by the path this machine resolves it to,
# but the C and C++ runtimes and the runtime itself.
libraries="$(ldd "${binaries[@]}" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u)"
count=0
for lib in $libraries; do
  case "$(basename "$lib")" in
  libc.so* | libm.so* | libstdc++.so* | libgcc_s.so* | ld-linux* | libdl.so* | \
    libpthread.so* | librt.so* | libloomrt.so) continue ;;
  esac
  cp -L "$lib" "$dir/lib/"
  count=$((count + 1))
done
echo "pack-runtime.sh: Loom's runtime in $dir, with $count shared libraries ($(du -sh "$dir" | cut -f1)): $dir/bin/loom-run trains artifacts there; BUILD_DIR=$dir for scripts/check-cuda.sh run and scripts/bench-cuda.sh --artifact"
