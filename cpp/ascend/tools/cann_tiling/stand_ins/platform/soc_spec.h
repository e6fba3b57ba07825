// Stand-in for CANN's platform/soc_spec.h (the platform layer, which the
// asc-devkit does not ship), written for this repository: the NpuArch
// enumeration that utils/tiling/platform/platform_ascendc.h declares and the
// tiling sources compare against. The values are ours (the architecture
// numbers); the sources only compare names.
#pragma once

#include <cstdint>

enum class NpuArch : uint32_t {
  DAV_1001 = 1001,
  DAV_2002 = 2002,
  DAV_2201 = 2201,
  DAV_3002 = 3002,
  DAV_3003 = 3003,
  DAV_3113 = 3113,
  DAV_3510 = 3510,
  DAV_5102 = 5102,
};
