// Maps the tiling library (cpp/tiling) onto the structs of tiling_fuzz.cc,
// so the fuzzer compares the real functions with the SPEC formulas.
// A TilingError is a refusal (nullopt); any other exception escapes and
// fails the test.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tiling/tiling.h"

namespace jax_lngb::test {

inline std::vector<int64_t> adapter_shape(const TilingQuery& q) {
  // The fuzzer draws dimensions up to 2^32 + 4: they fit int64 exactly.
  return {int64_t(q.b), int64_t(q.s), int64_t(q.h), int64_t(q.original_h)};
}

inline std::optional<GradBetaTiling> tiling_under_test(const TilingQuery& q) {
  tiling::LayerNormGradBetaTiling t;
  try {
    t = tiling::layer_norm_grad_beta_nd_tiling_info(adapter_shape(q), int64_t(q.stack_buffer_bytes),
                                                    int64_t(q.type_size), q.reuse_source);
  } catch (const tiling::TilingError&) {
    return std::nullopt;
  }
  GradBetaTiling g;
  g.stack_buffer_size = t.stack_buffer_size;
  g.b_length = t.b_length;
  g.s_length = t.s_length;
  g.h_length = t.h_length;
  g.original_h_length = t.original_h_length;
  g.bsh_length = t.bsh_length;
  g.bs_length = t.bs_length;
  g.one_cal_size = t.one_cal_size;
  g.number_of_tmp_buf = t.number_of_tmp_buf;
  g.loop_round = t.loop_round;
  g.input_tail_size = t.input_tail_size;
  g.input_tail_pos = t.input_tail_pos;
  g.bs_tail_size = t.bs_tail_size;
  g.bsh_cur_length = t.bsh_cur_length;
  g.bs_cur_length = t.bs_cur_length;
  g.gamma_temp_tensor_pos = t.gamma_temp_tensor_pos;
  g.beta_temp_tensor_pos = t.beta_temp_tensor_pos;
  g.input_dy_tmp_tensor_pos = t.input_dy_tmp_tensor_pos;
  g.res_for_gamma_tmp_tensor_pos = t.res_for_gamma_tmp_tensor_pos;
  g.reserved = t.reserved;
  return g;
}

inline std::optional<TmpSize> tmp_size_under_test(const TilingQuery& q) {
  try {
    const tiling::TmpSize t =
        tiling::layer_norm_grad_beta_max_min_tmp_size(adapter_shape(q), int64_t(q.type_size), q.reuse_source);
    return TmpSize{t.max_bytes, t.min_bytes};
  } catch (const tiling::TilingError&) {
    return std::nullopt;
  }
}

}  // namespace jax_lngb::test
