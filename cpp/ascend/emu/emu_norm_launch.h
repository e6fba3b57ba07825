// Host side of the normalization API probes (norm_api_kernels.asc): lays
// the operands out in emulated global memory, launches the probe kernel of
// one API on one core, and reads the outputs back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ascend/emu/emu_runtime.h"

namespace jax_lngb::emu {

struct NormApiArgs {
  std::string api;               // "layer_norm", "layer_norm_grad" or "rms_norm"
  uint32_t type_size = 4;        // 4: float, 2: half
  bool flag = false;             // isReuseSource (LayerNorm, LayerNormGrad) or isBasicBlock (RmsNorm)
  uint32_t b = 0, s = 0, h = 0;  // storage shape
  // Operands, row major, of type_size bytes each:
  //   layer_norm:      x [B,S,H], gamma [H], beta [H]
  //   layer_norm_grad: dy [B,S,H], x [B,S,H], variance [B,S], mean [B,S], gamma [H]
  //   rms_norm:        x [B,S,H], gamma [H]
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<uint32_t> api_tiling;  // the API's tiling struct as 32-bit words
  uint32_t tmp_bytes = 0;            // sharedTmpBuffer; 0: the overload without one
  float epsilon = 0;
  std::string mode = "normal";  // or "misaligned", "wrong_position", "overlap"
  uint32_t calls = 1;           // API calls with the one tiling object
  uint64_t ub_bytes = 196608;
  uint32_t npu_arch = 2201;
};

struct NormApiResult {
  // layer_norm: y, mean, variance; layer_norm_grad: pd_x, res_for_gamma;
  // rms_norm: y. Each exactly its element count (padding dropped).
  std::vector<std::vector<uint8_t>> outputs;
  std::vector<uint32_t> tiling_after;  // the tiling object after the calls
  LaunchStats stats;
};

NormApiResult run_norm_api(const NormApiArgs& a);

}  // namespace jax_lngb::emu
