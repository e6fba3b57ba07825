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

# jax_lngb_python_module(<name> <bindings> [XLA_FFI] [SOURCES ...] [LINK ...])
#
# Declares the extension module jax_lngb.<name> (name with its leading
# underscore: _cpu, _tiling, _ascend_emu, _ascend), links the LINK targets
# into it and installs it into the jax_lngb package. Every module follows
# one convention: its nanobind bindings are one file named after the module,
# <name without the underscore>_module.cc, next to the library it binds;
# the file starts with a comment naming the Python module and what it
# binds, and sets m.doc(). XLA_FFI: the module hands out XLA FFI handler
# capsules; it gets the XLA FFI headers and reports the FFI API version it
# was built against as ffi_api_version.
function(jax_lngb_python_module name bindings)
  cmake_parse_arguments(ARG "XLA_FFI" "" "SOURCES;LINK" ${ARGN})
  string(REGEX REPLACE "^_" "" stem "${name}")
  get_filename_component(file "${bindings}" NAME)
  if(NOT file STREQUAL "${stem}_module.cc")
    message(FATAL_ERROR "jax_lngb_python_module(${name}): the bindings of jax_lngb.${name} belong in "
                        "${stem}_module.cc, not ${file}")
  endif()
  nanobind_add_module(${name} NB_STATIC ${bindings} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  if(ARG_XLA_FFI)
    target_include_directories(${name} SYSTEM PRIVATE ${XLA_FFI_INCLUDE_DIR})
  endif()
  target_link_libraries(${name} PRIVATE ${ARG_LINK})
  install(TARGETS ${name} LIBRARY DESTINATION jax_lngb)
endfunction()
