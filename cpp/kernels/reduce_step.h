// The gamma/beta reduction's step: the one definition of its arithmetic and
// of its row blocking, shared by the loops of reduce_rows (the public
// LayerNormGradBeta) and by the fused backward, which adds res_for_gamma
// into the same accumulators straight from its registers (see
// layer_norm_rows_isa.h, grad_reduce_rows_impl).
#pragma once

namespace jax_lngb {

// One row's terms added into one column's (or one vector of columns')
// accumulators: the product is rounded to float32, then added (AscendC's
// Mul then Add; no FMA contraction in this build). Calling it row after row
// fixes the association: each column adds its rows in row order.
template <class V>
[[gnu::always_inline]] inline void reduce_step(V& acc_gamma, V& acc_beta, const V& res, const V& dy) {
  acc_gamma = acc_gamma + res * dy;
  acc_beta = acc_beta + dy;
}

// Rows whose steps go into accumulators held in registers before those go
// back to memory: one load and one store of the accumulators per this many
// rows. Any count gives the same bits (the order of the additions is the
// same); this one keeps eight accumulator vectors and the rows' operands in
// registers.
inline constexpr int kReduceRowBlock = 4;

}  // namespace jax_lngb
