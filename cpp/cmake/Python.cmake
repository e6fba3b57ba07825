# Python, nanobind and the XLA FFI headers, for every extension module.
find_package(Python 3.11 REQUIRED COMPONENTS Interpreter Development.Module)
execute_process(
  COMMAND "${Python_EXECUTABLE}" -m nanobind --cmake_dir
  OUTPUT_STRIP_TRAILING_WHITESPACE OUTPUT_VARIABLE nanobind_ROOT)
find_package(nanobind CONFIG REQUIRED)

# XLA FFI headers of the jaxlib in the build environment. pyproject.toml pins
# that jaxlib to the oldest supported release: a handler built against older
# FFI headers loads on newer jaxlibs, never the other way round.
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c "import os, jaxlib; print(os.path.join(os.path.dirname(jaxlib.__file__), 'include'))"
  OUTPUT_STRIP_TRAILING_WHITESPACE OUTPUT_VARIABLE XLA_FFI_INCLUDE_DIR
  RESULT_VARIABLE _jaxlib_rc)
if(NOT _jaxlib_rc EQUAL 0 OR NOT EXISTS "${XLA_FFI_INCLUDE_DIR}/xla/ffi/api/ffi.h")
  message(FATAL_ERROR "jaxlib with XLA FFI headers not found in the build environment (${XLA_FFI_INCLUDE_DIR})")
endif()
message(STATUS "XLA FFI headers: ${XLA_FFI_INCLUDE_DIR}")
