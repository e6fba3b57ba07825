#!/usr/bin/env bash
# Builds the kernel test driver (cpp/tests) with sanitizers and runs it.
#
#   cpp/tests/run_sanitizers.sh [asan|tsan|all] [BUILD_ROOT]
#
# asan (default): AddressSanitizer + UndefinedBehaviorSanitizer through the
#   JAX_LNGB_SANITIZE option; runs every case on the ISA variant the CPU
#   picks, then the kernel cases again on each lower variant
#   (JAX_LNGB_ISA=generic/avx2), so every variant's code runs sanitized.
# tsan: ThreadSanitizer (a separate build: it cannot be combined with
#   ASan); runs the cases that involve threads. Slower; not part of CI.
# BUILD_ROOT defaults to <repo>/build; builds go to BUILD_ROOT/sanitize-<mode>.
# Needs cmake and a C++17 compiler with the sanitizer runtimes (GCC or Clang).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:-asan}
build_root=${2:-$root/build}
jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

# -O1 (the level the sanitizers' documentation advises) rather than the
# Release -O3: the instrumented kernels, three ISA variants of template
# code, build in about half the time, and the driver runs about as fast.
# -g1 (line tables) rather than -g: the reports keep file and line, and the
# instrumented kernels build about a fifth faster.
configure_and_build() {  # <dir> <cmake args...>
  local dir=$1
  shift
  cmake -S "$root/cpp" -B "$dir" "${generator[@]}" -DJAX_LNGB_PYTHON=OFF -DJAX_LNGB_TESTS=ON \
    -DJAX_LNGB_BENCH=ON -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" "$@" >/dev/null
  cmake --build "$dir" --target jax_lngb_kernel_tests jax_lngb_kernel_bench --parallel "$jobs"
}

# The timing driver (cpp/bench) on a small shape, two threads, no eviction
# or pause: its worker pool and the kernels' fork-join under the sanitizer.
run_bench() {  # <build dir>
  echo "== $mode: timing driver"
  "$1/bench/jax_lngb_kernel_bench" 512 1024 bf16 2 3 1 0
}

# The ISA variants below the one in use: forced with JAX_LNGB_ISA, which can
# lower the variant but never raise it past what the CPU supports.
lower_isas() {  # <driver>
  local active
  active=$("$1" dispatch 2>/dev/null | sed -n 's/.*active ISA: \([a-z0-9]*\).*/\1/p')
  case $active in
    avx512) echo "generic avx2" ;;
    avx2) echo "generic" ;;
    *) echo "" ;;
  esac
}

run_asan() {
  local dir=$build_root/sanitize-asan
  # GCC's -Wmaybe-uninitialized misfires inside the AVX-512 intrinsic headers
  # once ASan instruments them; the warning says nothing about our code.
  configure_and_build "$dir" -DJAX_LNGB_SANITIZE=ON -DCMAKE_CXX_FLAGS=-Wno-maybe-uninitialized
  local driver=$dir/tests/jax_lngb_kernel_tests
  export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
  echo "== asan+ubsan: every case"
  "$driver"
  for isa in $(lower_isas "$driver"); do
    echo "== asan+ubsan: kernel cases on the $isa variant"
    # reduce_rows cases call every variant directly, and the sparse
    # 2^31-element case reads 8.6 GB: once (above) is enough for both.
    JAX_LNGB_ISA=$isa "$driver" grad_beta -sparse
  done
  run_bench "$dir"
}

run_tsan() {
  local dir=$build_root/sanitize-tsan
  configure_and_build "$dir" -DJAX_LNGB_SANITIZE=OFF "-DCMAKE_CXX_FLAGS=-fsanitize=thread -g1 -Wno-maybe-uninitialized" \
    -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
  echo "== tsan: threaded cases"
  # The sparse case would make TSan shadow 8.6 GB of reads; the rest of
  # grad_beta, every fork-join case, and the LayerNorm and RMSNorm drivers
  # (forward, LayerNormGrad, fused backward on every executor, the thread
  # pool's included) run.
  "$dir/tests/jax_lngb_kernel_tests" parallel concurrent combine_partials_any grad_beta_big grad_beta_concurrent \
    layer_norm_drivers rms_norm_drivers -sparse
  run_bench "$dir"
}

case $mode in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all) run_asan && run_tsan ;;
  *)
    echo "usage: $0 [asan|tsan|all] [BUILD_ROOT]" >&2
    exit 2
    ;;
esac
