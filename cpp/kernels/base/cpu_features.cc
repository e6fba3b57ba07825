#include "cpu_features.h"

#include <cstdlib>
#include <cstring>

namespace jax_lngb {

namespace {

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#define JAX_LNGB_X86 1
bool has_avx2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
}
bool has_avx512() {
  return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
#endif

Isa detect() {
#if defined(JAX_LNGB_X86) && defined(JAX_LNGB_HAVE_AVX512)
  if (has_avx512()) return Isa::kAvx512;
#endif
#if defined(JAX_LNGB_X86) && defined(JAX_LNGB_HAVE_AVX2)
  if (has_avx2()) return Isa::kAvx2;
#endif
  return Isa::kGeneric;
}

Isa from_env(Isa best) {
  const char* s = std::getenv("JAX_LNGB_ISA");
  if (s == nullptr || *s == '\0') return best;
  Isa want = best;
  if (std::strcmp(s, "generic") == 0) want = Isa::kGeneric;
  if (std::strcmp(s, "avx2") == 0) want = Isa::kAvx2;
  if (std::strcmp(s, "avx512") == 0) want = Isa::kAvx512;
  return static_cast<int>(want) < static_cast<int>(best) ? want : best;
}

}  // namespace

Isa supported_isa() {
  static const Isa isa = detect();
  return isa;
}

Isa active_isa() {
  static const Isa isa = from_env(supported_isa());
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kGeneric:
      return "generic";
  }
  return "?";
}

CpuVendor cpu_vendor() {
#if defined(JAX_LNGB_X86)
  static const CpuVendor v = __builtin_cpu_is("amd")     ? CpuVendor::kAmd
                             : __builtin_cpu_is("intel") ? CpuVendor::kIntel
                                                         : CpuVendor::kOther;
  return v;
#else
  return CpuVendor::kOther;
#endif
}

const char* vendor_name(CpuVendor v) {
  switch (v) {
    case CpuVendor::kIntel:
      return "intel";
    case CpuVendor::kAmd:
      return "amd";
    case CpuVendor::kOther:
      return "other";
  }
  return "?";
}

std::string cpu_feature_summary() {
  std::string out;
#if defined(JAX_LNGB_X86)
  const char* names[] = {"sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq"};
  const bool have[] = {bool(__builtin_cpu_supports("sse4.2")),   bool(__builtin_cpu_supports("avx")),
                       bool(__builtin_cpu_supports("avx2")),     bool(__builtin_cpu_supports("fma")),
                       bool(__builtin_cpu_supports("f16c")),     bool(__builtin_cpu_supports("avx512f")),
                       bool(__builtin_cpu_supports("avx512bw")), bool(__builtin_cpu_supports("avx512vl")),
                       bool(__builtin_cpu_supports("avx512dq"))};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    if (!have[i]) continue;
    if (!out.empty()) out += ' ';
    out += names[i];
  }
#elif defined(__aarch64__)
  out = "aarch64 (neon baseline)";
#else
  out = "baseline";
#endif
  return out;
}

}  // namespace jax_lngb
