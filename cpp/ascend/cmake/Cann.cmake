# The NPU side: the CANN launcher (launch/grad_beta_launch.asc, compiled by
# CANN's ASC toolchain) and the `jax_lngb._ascend` module with the XLA FFI
# handler.
#
# JAX_LNGB_ASCEND (cache variable of the top-level CMakeLists.txt):
#   AUTO  build it when the CANN toolkit is found; otherwise skip quietly
#   ON    build it; fail with what was looked for when CANN is missing
#   OFF   never build it
# CANN is found through $ASCEND_HOME_PATH (set by CANN's set_env.sh) or the
# CMake variable ASCEND_HOME_PATH. CMAKE_ASC_ARCHITECTURES picks the NPU
# architecture: dav-2201 (Atlas A2/A3, default), dav-3510 (Ascend 950),
# dav-2002 (Atlas inference series AI Core).

string(TOUPPER "${JAX_LNGB_ASCEND}" _jl_mode)
if(NOT _jl_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "JAX_LNGB_ASCEND must be AUTO, ON or OFF; got '${JAX_LNGB_ASCEND}'")
endif()

set(_jl_ascend_dir ${CMAKE_CURRENT_LIST_DIR}/..)

if(JAX_LNGB_PYTHON)
  # The NPU FFI handler needs only the XLA FFI headers, so it is compiled in
  # every build (a broken handler fails here, not first on an NPU host); it
  # is linked into `_ascend` only when CANN is present.
  add_library(jax_lngb_ascend_npu_ffi OBJECT ${_jl_ascend_dir}/ffi/grad_beta_ascend_ffi.cc
    ${_jl_ascend_dir}/ffi/layer_norm_ascend_ffi.cc
    ${_jl_ascend_dir}/ffi/rms_norm_ascend_ffi.cc)
  target_include_directories(jax_lngb_ascend_npu_ffi SYSTEM PUBLIC ${XLA_FFI_INCLUDE_DIR})
  target_include_directories(jax_lngb_ascend_npu_ffi PUBLIC ${PROJECT_SOURCE_DIR})
endif()

if(_jl_mode STREQUAL "OFF")
  message(STATUS "jax_lngb: Ascend NPU launcher not built (JAX_LNGB_ASCEND=OFF)")
  return()
endif()

# --- locate CANN
set(_jl_cann_root "")
set(_jl_looked "")
foreach(_jl_candidate "${ASCEND_HOME_PATH}" "$ENV{ASCEND_HOME_PATH}")
  if(_jl_candidate)
    list(APPEND _jl_looked "${_jl_candidate}")
    if(EXISTS "${_jl_candidate}/lib64/cmake/asc-config.cmake"
       OR EXISTS "${_jl_candidate}/compiler/tikcpp/ascendc_kernel_cmake/asc-config.cmake")
      set(_jl_cann_root "${_jl_candidate}")
      break()
    endif()
  endif()
endforeach()

if(NOT _jl_cann_root)
  if(_jl_mode STREQUAL "ON")
    if(_jl_looked)
      set(_jl_where "no asc-config.cmake under ${_jl_looked}")
    else()
      set(_jl_where "ASCEND_HOME_PATH is not set")
    endif()
    message(FATAL_ERROR
      "JAX_LNGB_ASCEND=ON but the CANN toolkit was not found (${_jl_where}). Install CANN and "
      "source its set_env.sh (it sets ASCEND_HOME_PATH), or pass -DASCEND_HOME_PATH=<cann root>; "
      "or build with JAX_LNGB_ASCEND=AUTO/OFF to skip the NPU launcher.")
  endif()
  message(STATUS "jax_lngb: CANN toolkit not found; Ascend NPU launcher not built (JAX_LNGB_ASCEND=AUTO)")
  return()
endif()

if(NOT JAX_LNGB_PYTHON)
  message(STATUS "jax_lngb: CANN found at ${_jl_cann_root}; building the launcher library only (no Python)")
endif()

# asc-config.cmake reads the environment variable.
set(ENV{ASCEND_HOME_PATH} "${_jl_cann_root}")
set(CMAKE_ASC_ARCHITECTURES "dav-2201" CACHE STRING "NPU architecture: dav-2201 (A2/A3), dav-3510 (950), dav-2002")
# One architecture per build: the kernels pick their kernel type from
# __NPU_ARCH__ (AICORE on dav-2002, AIV_ONLY elsewhere), and the lowering
# plans for the architecture the handler was built for
# (jax_lngb._ascend.npu_arch()), which fixes block_dim's unit and the UB size.
if(NOT CMAKE_ASC_ARCHITECTURES MATCHES "^dav-(2002|2201|3510)$")
  message(FATAL_ERROR
    "CMAKE_ASC_ARCHITECTURES must be one of dav-2201 (Atlas A2/A3), dav-3510 (Ascend 950PR/950DT) or "
    "dav-2002 (Atlas inference series, AI Core); got '${CMAKE_ASC_ARCHITECTURES}'")
endif()
find_package(ASC CONFIG REQUIRED
  PATHS "${_jl_cann_root}/lib64/cmake" "${_jl_cann_root}/compiler/tikcpp/ascendc_kernel_cmake"
  NO_DEFAULT_PATH)
enable_language(ASC)
message(STATUS "jax_lngb: CANN at ${_jl_cann_root}; Ascend kernels for ${CMAKE_ASC_ARCHITECTURES}")

# --- the launcher: kernels + host stubs in one ASC translation unit
# launch/layer_norm_launch.asc and launch/rms_norm_launch.asc hold the LayerNorm and
# RMSNorm kernels (LayerNorm's combine kernel under names of its own, so the units
# link into one library).
add_library(jax_lngb_ascend_launch STATIC ${_jl_ascend_dir}/launch/grad_beta_launch.asc
  ${_jl_ascend_dir}/launch/layer_norm_launch.asc ${_jl_ascend_dir}/launch/rms_norm_launch.asc)
set_source_files_properties(${_jl_ascend_dir}/launch/grad_beta_launch.asc
  ${_jl_ascend_dir}/launch/layer_norm_launch.asc ${_jl_ascend_dir}/launch/rms_norm_launch.asc PROPERTIES LANGUAGE ASC)
set_target_properties(jax_lngb_ascend_launch PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_include_directories(jax_lngb_ascend_launch PRIVATE ${PROJECT_SOURCE_DIR})
# No --npu-arch here: CANN's CMakeASCInformation.cmake already appends
# --npu-arch=${CMAKE_ASC_ARCHITECTURES} to every ASC compile.
if(COMMAND library_interface_setup)
  # CANN's own interface for ASC libraries (include paths and the runtime
  # libraries <<<>>> launches need), as its ascendc_library() applies it.
  library_interface_setup(jax_lngb_ascend_launch)
else()
  target_include_directories(jax_lngb_ascend_launch PUBLIC "${_jl_cann_root}/include")
  target_link_directories(jax_lngb_ascend_launch PUBLIC "${_jl_cann_root}/lib64")
  target_link_libraries(jax_lngb_ascend_launch PUBLIC ascendc_runtime ascendcl runtime)
endif()

if(JAX_LNGB_PYTHON)
  jax_lngb_python_module(_ascend ${_jl_ascend_dir}/ffi/ascend_module.cc XLA_FFI
                         LINK jax_lngb_ascend_npu_ffi jax_lngb_ascend_launch)
  target_compile_definitions(_ascend PRIVATE JAX_LNGB_NPU_ARCH="${CMAKE_ASC_ARCHITECTURES}")
endif()
