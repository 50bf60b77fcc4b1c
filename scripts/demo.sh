#!/usr/bin/env bash
# Loom's main job, end to end: install and build, compile the default model
# (examples/gpt2-tiny.json) to an artifact, and train it on the CPU on a text
# file every Debian machine has, read as bytes.
#
#   scripts/demo.sh [model.json] [loom-run flags...]
#
# Defaults: 300 steps on /usr/share/common-licenses/GPL-3, validation loss on
# its last tenth every 100 steps.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh" >&2

model="${1:-$root/examples/gpt2-tiny.json}"
[ "$#" -gt 0 ] && shift
artifact="$build_dir/$(basename "${model%.json}").loom"

"$build_dir/bin/loomc" "$model" --summary -o "$artifact"
echo "loomc: wrote $artifact" >&2
"$build_dir/bin/loom-run" "$artifact" \
  --data /usr/share/common-licenses/GPL-3 --steps 300 --val-every 100 "$@"
