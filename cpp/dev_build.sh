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
# The extension modules this configuration declares (jax_lngb_python_module
# installs each into jax_lngb/), staged under build/dev/stage: a module a
# source move left behind in the build tree is not picked up.
cmake --install "$root/build/dev" --prefix "$root/build/dev/stage" >/dev/null
find "$root/build/dev/stage/jax_lngb" -name '*.so' -print0 |
  while IFS= read -r -d '' so; do ln -sf "$so" "$root/jax_lngb/$(basename "$so")"; done
