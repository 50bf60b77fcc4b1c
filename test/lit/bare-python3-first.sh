#!/usr/bin/env bash
# bare-python3-first.sh DIR COMMAND...: runs COMMAND with DIR/python3 first
# on PATH, a Python without site-packages (no NumPy, no JAX), and without
# LOOM_PYTHON: what a machine whose user-level python3 lacks the packages
# setup installed looks like to Loom's scripts (docs/python.md).
set -euo pipefail
dir="$1"
shift
real="${LOOM_PYTHON:?the lit configuration sets LOOM_PYTHON}"
mkdir -p "$dir"
cat >"$dir/python3" <<SHIM
#!/bin/sh
exec "$real" -S -s "\$@"
SHIM
chmod +x "$dir/python3"
unset LOOM_PYTHON
PATH="$dir:$PATH" exec "$@"
