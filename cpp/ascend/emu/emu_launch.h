// Host side of the emulation: put the inputs in emulated global memory,
// launch the kernels of ascend/grad_beta_kernel.asc (compiled against the
// emulated AscendC), and read the results back. Mirrors what the NPU
// launcher does with aclrt* and <<<>>>.
#pragma once

#include <cstdint>
#include <vector>

#include "ascend/emu/emu_runtime.h"

namespace jax_lngb::emu {

struct GradBetaEmuArgs {
  const uint8_t* res = nullptr;  // [rows, h] of in_type_size bytes each, row major
  const uint8_t* dy = nullptr;
  uint64_t rows = 0;
  uint64_t h = 0;             // storage H
  uint32_t in_type_size = 4;  // 4: float, 2: half
  uint32_t out_type_size = 4;
  std::vector<uint8_t> tiling;  // the kernels' tiling bytes (normally a plan's)
  uint64_t workspace_bytes = 0;
  uint32_t block_dim = 1;
  uint32_t combine_block_dim = 1;
  uint64_t ub_bytes = 196608;  // per core
  bool reverse_core_order = false;
  uint32_t npu_arch = 2201;  // 2002, 2201 or 3510: which LayerNormGradBeta implementation runs
};

struct GradBetaEmuResult {
  std::vector<uint8_t> pd_gamma;  // h elements of out_type_size bytes
  std::vector<uint8_t> pd_beta;
  LaunchStats partials;
  LaunchStats combine;
};

GradBetaEmuResult run_grad_beta(const GradBetaEmuArgs& a);

// One LayerNormGradBeta call on a single core (the probe kernels).
struct ProbeEmuArgs {
  const uint8_t* res = nullptr;  // elems values of type_size bytes
  const uint8_t* dy = nullptr;
  uint64_t elems = 0;
  uint64_t h = 0;
  uint32_t type_size = 4;
  bool is_reuse_source = false;
  uint32_t stack_bytes = 0;
  std::vector<uint32_t> api_tiling;  // CANN's 20 words
  uint64_t ub_bytes = 196608;
  uint32_t npu_arch = 2201;
};

GradBetaEmuResult run_probe(const ProbeEmuArgs& a);

// The deliberately wrong kernels of selftest_kernels.asc (case index as
// there), over `block_dim` cores. Returns the output buffer.
std::vector<uint8_t> run_selftest(uint32_t which, uint32_t block_dim, uint64_t ub_bytes);

}  // namespace jax_lngb::emu
