// Stand-in for CANN's graph/types.h (the graph engine layer, which the
// asc-devkit does not ship), written for this repository. The tiling
// sources reach it only through adv_api/utils/types.h, which aliases
// ge::DataType; none of them uses a value, so a few names suffice.
#pragma once

#include <cstdint>

namespace ge {

enum DataType : int32_t {
  DT_FLOAT = 0,
  DT_FLOAT16 = 1,
  DT_BF16 = 27,
  DT_UNDEFINED = 28,
};

}  // namespace ge
