// A self-registering list of the CPU FFI handlers.
//
// Each handler file registers its symbol under its FFI target name with
// JAX_LNGB_CPU_HANDLER; the Python module hands the whole list to
// jax.ffi.register_ffi_target. The handler objects are linked as an object
// library, so no registration is dropped by the linker.
#pragma once

#include <vector>

#include "xla/ffi/api/c_api.h"

namespace jax_lngb::ffi_util {

struct HandlerEntry {
  const char* target_name;
  XLA_FFI_Handler* handler;
};

inline std::vector<HandlerEntry>& cpu_handlers() {
  static std::vector<HandlerEntry> entries;
  return entries;
}

inline bool register_cpu_handler(const char* name, XLA_FFI_Handler* fn) {
  cpu_handlers().push_back({name, fn});
  return true;
}

}  // namespace jax_lngb::ffi_util

#define JAX_LNGB_CPU_HANDLER(target_name, symbol)            \
  [[maybe_unused]] static const bool jax_lngb_reg_##symbol = \
      ::jax_lngb::ffi_util::register_cpu_handler(target_name, symbol)
