# Sourced by Loom's scripts: sets LOOM_PYTHON to the one Python interpreter
# everything Loom runs uses (docs/python.md), never whichever `python3` comes
# first on PATH, which may lack the packages setup installed.
#
# In order: LOOM_PYTHON from the environment; the interpreter the build in
# $build_dir was configured with (setup records it as LOOM_PYTHON in
# CMakeCache.txt); Debian's /usr/bin/python3, which setup installs into by
# default. Needs `build_dir` set.

loom_resolve_python() {
  local chosen="${LOOM_PYTHON:-}" cache="${build_dir:?}/CMakeCache.txt"
  if [ -z "$chosen" ] && [ -f "$cache" ]; then
    chosen="$(sed -n 's/^LOOM_PYTHON:[A-Z]*=//p' "$cache")"
  fi
  chosen="${chosen:-/usr/bin/python3}"
  local resolved
  resolved="$(command -v -- "$chosen" 2>/dev/null)" || resolved=""
  if [ -z "$resolved" ] || [ ! -x "$resolved" ]; then
    echo "loom: LOOM_PYTHON=$chosen: no such interpreter (set LOOM_PYTHON to a Python 3 executable)" >&2
    return 1
  fi
  case "$resolved" in /*) ;; *) resolved="$PWD/$resolved" ;; esac
  LOOM_PYTHON="$resolved"
  export LOOM_PYTHON
}
loom_resolve_python || exit 1
