// Host side of the LayerNorm kernels' emulation: copies the launch's
// buffers into emulated global memory, launches the kernels of
// ascend/layer_norm_kernels.asc (compiled against the emulated AscendC) as
// the NPU launcher enqueues them, and copies the results back into the
// launch's output buffers.
#pragma once

#include <cstdint>

#include "ascend/emu/emu_runtime.h"
#include "ascend/launch/layer_norm_launch.h"

namespace jax_lngb::emu {

struct LayerNormEmuConfig {
  uint64_t ub_bytes = 196608;
  uint32_t npu_arch = 2201;  // 2002 or 2201 (the norm APIs fault on 3510: not emulated)
  bool reverse_core_order = false;
};

struct LayerNormEmuStats {
  LaunchStats main;     // the forward, LayerNormGrad or fused backward kernel
  LaunchStats combine;  // fused backward only
};

LayerNormEmuStats run_layer_norm_forward(const ascend::LayerNormForwardLaunch& l, const LayerNormEmuConfig& c);
LayerNormEmuStats run_layer_norm_backward(const ascend::LayerNormBackwardLaunch& l, const LayerNormEmuConfig& c);

}  // namespace jax_lngb::emu
