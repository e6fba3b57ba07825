# Which ISA variants of the kernels to compile. Each variant is an object
# library of the same sources with its own target flags; the runtime
# dispatcher (kernels/base/cpu_features.cc) picks one, so the default build runs
# on any CPU of the architecture.
set(JAX_LNGB_X86 OFF)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i[3-6]86)$")
  set(JAX_LNGB_X86 ON)
endif()

set(JAX_LNGB_ISA_FLAGS_generic "")
set(JAX_LNGB_ISA_FLAGS_avx2 -mavx2 -mf16c -mfma)
set(JAX_LNGB_ISA_FLAGS_avx512 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mf16c -mfma)

set(JAX_LNGB_ISAS generic)
if(JAX_LNGB_X86)
  list(APPEND JAX_LNGB_ISAS avx2 avx512)
endif()

# jax_lngb_isa_sources(<target> <name> SOURCES ...): compiles SOURCES once
# per ISA (object libraries <name>_<isa>) and adds the objects to <target>.
function(jax_lngb_isa_sources target name)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  foreach(isa IN LISTS JAX_LNGB_ISAS)
    add_library(${name}_${isa} OBJECT ${ARG_SOURCES})
    string(TOUPPER ${isa} ISA_UP)
    target_compile_definitions(${name}_${isa} PRIVATE JAX_LNGB_ISA_${ISA_UP}=1)
    target_compile_options(${name}_${isa} PRIVATE ${JAX_LNGB_ISA_FLAGS_${isa}})
    target_include_directories(${name}_${isa} PRIVATE ${PROJECT_SOURCE_DIR})
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${name}_${isa}>)
  endforeach()
endfunction()

# Definitions that tell the dispatcher which variants exist.
set(JAX_LNGB_ISA_DEFINITIONS "")
if(JAX_LNGB_X86)
  set(JAX_LNGB_ISA_DEFINITIONS JAX_LNGB_HAVE_AVX2=1 JAX_LNGB_HAVE_AVX512=1)
endif()
