#!/usr/bin/env bash
# Incremental developer build without pip: compiles the extensions into
# build/dev and links them into jax_lngb/, so `PYTHONPATH=$PWD pytest` runs
# the working tree. Releases and CI use `pip install .` instead.
set -euo pipefail
case "${1:-}" in
  -h|--help)
    echo "usage: cpp/dev_build.sh [CMAKE_ARGS...]"
    echo "Builds the extensions into build/dev and links them into jax_lngb/ (PYTHON=... picks the interpreter;"
    echo "it needs nanobind, cmake, ninja and jaxlib importable there)."
    exit 0 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
cmake -S "$root/cpp" -B "$root/build/dev" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$(command -v "$py")" "$@" >/dev/null
cmake --build "$root/build/dev"
# Every extension module the build produced (they all install into jax_lngb/).
find "$root/build/dev" -name '*.so' -not -path '*/CMakeFiles/*' -print0 |
  while IFS= read -r -d '' so; do ln -sf "$so" "$root/jax_lngb/$(basename "$so")"; done
