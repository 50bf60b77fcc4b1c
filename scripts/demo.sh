#!/usr/bin/env bash
# Loom's main job, end to end: install and build, then compile the embedded
# default model (examples/gpt2-tiny.json) and print its summary and IR.
#
#   scripts/demo.sh [model.json] [loomc flags...]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh" >&2

model="${1:-$root/examples/gpt2-tiny.json}"
[ "$#" -gt 0 ] && shift
"$build_dir/bin/loomc" "$model" --emit=loom --summary "$@"
