// Which instruction-set variant of the kernels this CPU runs.
//
// The default build never assumes more than the architecture's baseline: the
// AVX2 and AVX-512 variants are compiled in separate translation units and
// chosen here, once, from CPUID. JAX_LNGB_ISA=generic|avx2|avx512 in the
// environment forces a lower (never an unsupported) variant, which the tests
// use to prove every variant gives the same bits.
#pragma once

#include <string>

namespace jax_lngb {

enum class Isa : int { kGeneric = 0, kAvx2 = 1, kAvx512 = 2 };

// The best variant this CPU supports and this build contains.
Isa supported_isa();
// supported_isa(), lowered by JAX_LNGB_ISA when set (read once).
Isa active_isa();
const char* isa_name(Isa isa);

// Who made the CPU. Some loop choices are not one instruction set's but
// one memory system's (reduce_loop_for): the same loop measured fastest on
// one vendor's cores and slowest on the other's.
enum class CpuVendor : int { kOther = 0, kIntel = 1, kAmd = 2 };
CpuVendor cpu_vendor();
const char* vendor_name(CpuVendor v);
// Human-readable list of the CPU features the dispatcher looked at.
std::string cpu_feature_summary();

}  // namespace jax_lngb
