// Host side of the emulated RMSNorm kernels (ascend/rms_norm_kernel.asc):
// put the operands in emulated global memory, launch the kernels as the NPU
// launcher does (launch/rms_norm_launch.asc), read the results back.
#pragma once

#include <cstdint>
#include <vector>

#include "ascend/emu/emu_runtime.h"

namespace jax_lngb::emu {

struct RmsNormForwardEmuArgs {
  const uint8_t* x = nullptr;    // [rows, h], type_size bytes each
  const float* gamma = nullptr;  // [h]
  uint64_t rows = 0;
  uint64_t h = 0;               // storage H
  uint32_t type_size = 4;       // 4: float, 2: half
  std::vector<uint8_t> tiling;  // RmsNormForwardKernelTiling bytes
  uint64_t rstd_elems = 0;
  uint32_t block_dim = 1;
  uint64_t ub_bytes = 196608;
  bool reverse_core_order = false;
  uint32_t npu_arch = 2201;
};

struct RmsNormForwardEmuResult {
  std::vector<uint8_t> y;
  std::vector<float> rstd;  // [num_tiles, rstd_stride]
  LaunchStats stats;
};

struct RmsNormBackwardEmuArgs {
  const uint8_t* dy = nullptr;   // [rows, h]
  const uint8_t* x = nullptr;    // [rows, h]
  const float* rstd = nullptr;   // [rstd_elems]
  const float* gamma = nullptr;  // [h]
  uint64_t rows = 0;
  uint64_t h = 0;
  uint32_t type_size = 4;
  uint32_t out_type_size = 4;
  std::vector<uint8_t> tiling;  // RmsNormBackwardKernelTiling bytes
  uint64_t rstd_elems = 0;
  uint64_t workspace_bytes = 0;
  uint32_t block_dim = 1;
  uint32_t combine_block_dim = 1;
  uint64_t ub_bytes = 196608;
  bool reverse_core_order = false;
  uint32_t npu_arch = 2201;
};

struct RmsNormBackwardEmuResult {
  std::vector<uint8_t> dx;
  std::vector<uint8_t> pd_gamma;  // h elements of out_type_size bytes
  std::vector<uint8_t> pd_beta;
  LaunchStats partials;
  LaunchStats combine;
};

RmsNormForwardEmuResult run_rms_norm_forward(const RmsNormForwardEmuArgs& a);
RmsNormBackwardEmuResult run_rms_norm_backward(const RmsNormBackwardEmuArgs& a);

}  // namespace jax_lngb::emu
