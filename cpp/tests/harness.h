// A minimal test harness for the kernel test driver (no third-party test
// framework, so the driver builds wherever the kernels build).
//
// Every test file registers its cases with JAX_LNGB_TEST(name); the driver's
// main() runs them in registration order (optionally filtered by substring)
// and exits non-zero if any CHECK failed. JAX_LNGB_XFAIL(name, why) registers
// a case that documents a known defect: it runs in a forked child process
// (a sanitizer report or a crash must not take the driver down) and must
// fail; a known-failure case that passes is reported as an error, so the
// marker cannot outlive the fix.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace jax_lngb::test {

struct Case {
  const char* name;
  void (*fn)();
  const char* xfail_reason;  // nullptr for an ordinary case
};

std::vector<Case>& registry();

struct Registrar {
  Registrar(const char* name, void (*fn)(), const char* xfail_reason = nullptr) {
    registry().push_back({name, fn, xfail_reason});
  }
};

// Records a failed check of the running case.
void fail(const char* file, int line, const std::string& what);
// Failed checks of the running case so far.
int64_t failures_in_case();

}  // namespace jax_lngb::test

#define JAX_LNGB_TEST(name)                                                                         \
  static void name();                                                                               \
  [[maybe_unused]] static const ::jax_lngb::test::Registrar jax_lngb_test_reg_##name(#name, &name); \
  static void name()

#define JAX_LNGB_XFAIL(name, why)                                                                        \
  static void name();                                                                                    \
  [[maybe_unused]] static const ::jax_lngb::test::Registrar jax_lngb_test_reg_##name(#name, &name, why); \
  static void name()

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) ::jax_lngb::test::fail(__FILE__, __LINE__, "CHECK(" #cond ")"); \
  } while (0)

// CHECK_MSG(cond, a << b << ...): the streamed message says what was tested.
#define CHECK_MSG(cond, msg)                                          \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::ostringstream jax_lngb_os_;                                \
      jax_lngb_os_ << "CHECK(" #cond ") " << msg;                     \
      ::jax_lngb::test::fail(__FILE__, __LINE__, jax_lngb_os_.str()); \
    }                                                                 \
  } while (0)
