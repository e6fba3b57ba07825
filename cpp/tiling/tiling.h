// The jax_lngb tiling library: CANN's host tiling for LayerNormGradBeta,
// LayerNormGrad, LayerNorm and RmsNorm, and the plan of our Ascend LayerNormGradBeta kernels.
// Plain C++17, no JAX, no Python: the Ascend launcher, the CPU emulation,
// the Python bindings and C++ test drivers all link this one library.
//
//   #include "tiling/tiling.h"
//   using namespace jax_lngb::tiling;
//   TmpSize t = layer_norm_grad_beta_max_min_tmp_size({2, 16, 64}, 2);
//   LayerNormGradBetaTiling nd = layer_norm_grad_beta_nd_tiling_info({2, 16, 64}, t.min_bytes, 2);
//   std::vector<uint8_t> bytes = nd.pack();   // what the kernel reads
//
// Invalid arguments throw TilingError (derived from std::invalid_argument).
#pragma once

#include "tiling/grad_beta_kernel_plan.h"
#include "tiling/grad_beta_kernel_tiling.h"
#include "tiling/layer_norm_grad_beta_tiling.h"
#include "tiling/layer_norm_grad_tiling.h"
#include "tiling/layer_norm_tiling.h"
#include "tiling/rms_norm_kernel_plan.h"
#include "tiling/rms_norm_tiling.h"
#include "tiling/tiling_common.h"
