// Host tiling for AscendC's LayerNormGrad (the companion that produces
// pd_x and res_for_gamma), with CANN's semantics.
//
// Unlike LayerNormGradBeta, CANN's LayerNormGrad tiling depends on the NPU
// architecture: on the 950 series (dav-3510) the kernel keeps all
// temporaries in registers per row and only needs two H-sized fp32 buffers.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tiling/layer_norm_grad_beta_tiling.h"  // TmpSize
#include "tiling/tiling_common.h"

namespace jax_lngb::tiling {

// The architectures the AscendC normalization APIs support (SPEC section 1).
enum class NpuArch : int {
  kDav2002 = 2002,  // Atlas inference series, AI Core
  kDav2201 = 2201,  // Atlas A2 / A3 training and inference series
  kDav3510 = 3510,  // Ascend 950PR / 950DT
};

// Parses "dav-2002", "dav-2201" or "dav-3510"; throws TilingError otherwise.
NpuArch parse_npu_arch(const std::string& name, const char* api);

#define JAX_LNGB_LAYER_NORM_GRAD_TILING_FIELDS(X) \
  X(stack_buffer_size)                            \
  X(b_length)                                     \
  X(s_length)                                     \
  X(h_length)                                     \
  X(original_h_length)                            \
  X(one_cal_size)                                 \
  X(noh_cal_size)                                 \
  X(loop_num)                                     \
  X(tail_size)                                    \
  X(noh_tail_size)                                \
  X(tmp_tensor_bsh_pos)                           \
  X(tmp_tensor_bsh_size)                          \
  X(pd_var_tensor_pos)                            \
  X(pd_var_tensor_size)                           \
  X(pd_mean_tensor_pos)                           \
  X(pd_mean_tensor_size)                          \
  X(x1_tensor_pos)                                \
  X(x1_tensor_size)                               \
  X(x2_tensor_pos)                                \
  X(x2_tensor_size)                               \
  X(x3_tensor_pos)                                \
  X(x3_tensor_size)                               \
  X(tmp_tensor_pos)                               \
  X(tmp_tensor_size)                              \
  X(tmp_tensor1_pos)                              \
  X(tmp_tensor1_size)                             \
  X(tmp_tensor2_pos)                              \
  X(tmp_tensor2_size)                             \
  X(last_dim_value_back)                          \
  X(last_dim_value_back_mul_two)

struct LayerNormGradTiling {
#define JAX_LNGB_X(name) uint32_t name = 0;
  JAX_LNGB_LAYER_NORM_GRAD_TILING_FIELDS(JAX_LNGB_X)
#undef JAX_LNGB_X

  static constexpr size_t kWords = 30;
  static const std::array<const char*, kWords>& field_names();

  std::array<uint32_t, kWords> words() const;
  static LayerNormGradTiling from_words(const uint32_t* w);
  std::vector<uint8_t> pack() const;  // 120 little-endian bytes
  static LayerNormGradTiling unpack(const std::vector<uint8_t>& bytes);
  bool operator==(const LayerNormGradTiling& o) const { return words() == o.words(); }
};
static_assert(sizeof(LayerNormGradTiling) == LayerNormGradTiling::kWords * 4,
              "LayerNormGradTiling must be 30 packed uint32 fields");

// GetLayerNormGradMaxMinTmpSize. For dav-2002/dav-2201, with n = B*S*H and
// k buffers (9 for half, 6 for float, 4 for float with isReuseSource):
//   max = k * max(n, H*H) * type_size,  min = k * min(n, H*H) * type_size.
// For dav-3510: 0 for float with isReuseSource, else 2 * ceil8(H) * 4 for
// both. Exact in 64 bits.
TmpSize layer_norm_grad_max_min_tmp_size(const std::vector<int64_t>& shape, int64_t type_size,
                                         bool is_reuse_source = false, NpuArch arch = NpuArch::kDav2201);

// GetLayerNormGradNDTilingInfo (`stack_buffer_size` in bytes, stored as
// given). For dav-2002/dav-2201: one_cal_size = stack/4/k rounded down to
// whole rows, then the row count rounded *up* to a multiple of 8 (float) or
// 16 (half) rows, as CANN does. Throws TilingError when the buffer is below
// the minimum of the rule above or holds no whole row.
LayerNormGradTiling layer_norm_grad_nd_tiling_info(const std::vector<int64_t>& shape, int64_t stack_buffer_size,
                                                   int64_t type_size, bool is_reuse_source = false,
                                                   NpuArch arch = NpuArch::kDav2201);

}  // namespace jax_lngb::tiling
