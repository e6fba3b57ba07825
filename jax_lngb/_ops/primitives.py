"""Every primitive of the package and the FFI target each one's kernel runs.

Declared here, before any rule: the modules beside this one give each
primitive its abstract evaluation, lowerings, partitioning, JVP, transpose
and batching rules, and a rule that binds another primitive (the forward's
JVP binds the tangent, the tangent's transpose binds the backward) imports
it from here. The rule modules therefore never import each other in a loop,
as in JAX's own `lax`. This module imports nothing else of the package.

Each kernel primitive comes as a public/local pair (see
`_core.partitioning`): the public one is what users bind and what
differentiation and vmap see; the local one is the kernel on the rows one
device holds, bound only by the public one's lowering.
"""

from __future__ import annotations

from jax.extend.core import Primitive

# The backward a LayerNorm or RMSNorm forward asks its VJP for: one fused
# kernel, or CANN's chain of its two public operations.
BACKWARDS = ("fused", "chained")

# FFI targets of the CPU kernels (cpp/ffi/), registered by _core.native.
LAYER_NORM_GRAD_BETA_TARGET = "jax_lngb_layer_norm_grad_beta"
LAYER_NORM_FORWARD_TARGET = "jax_lngb_layer_norm_forward"
LAYER_NORM_GRAD_TARGET = "jax_lngb_layer_norm_grad"
LAYER_NORM_BACKWARD_TARGET = "jax_lngb_layer_norm_backward"
# layer_norm(..., beta=None): the kernels that read no bias and sum no pd_beta.
LAYER_NORM_FORWARD_NO_BETA_TARGET = "jax_lngb_layer_norm_forward_no_beta"
LAYER_NORM_BACKWARD_NO_BETA_TARGET = "jax_lngb_layer_norm_backward_no_beta"
RMS_NORM_FORWARD_TARGET = "jax_lngb_rms_norm_forward"
RMS_NORM_GRAD_TARGET = "jax_lngb_rms_norm_grad"
RMS_NORM_BACKWARD_TARGET = "jax_lngb_rms_norm_backward"
ADD_LAYER_NORM_FORWARD_TARGET = "jax_lngb_add_layer_norm_forward"
ADD_LAYER_NORM_BACKWARD_TARGET = "jax_lngb_add_layer_norm_backward"
ADD_RMS_NORM_FORWARD_TARGET = "jax_lngb_add_rms_norm_forward"
ADD_RMS_NORM_BACKWARD_TARGET = "jax_lngb_add_rms_norm_backward"

# The norms the fused residual-add primitives serve (their static `kind`).
ADD_NORM_KINDS = ("layer", "rms")

# FFI targets of the AscendC kernels (cpp/ascend/ffi/), lowered by jax_lngb.ascend.
ASCEND_LAYER_NORM_GRAD_BETA_TARGET = "jax_lngb_ascend_layer_norm_grad_beta"
ASCEND_LAYER_NORM_FORWARD_TARGET = "jax_lngb_ascend_layer_norm_forward"
ASCEND_LAYER_NORM_GRAD_TARGET = "jax_lngb_ascend_layer_norm_grad"
ASCEND_LAYER_NORM_BACKWARD_TARGET = "jax_lngb_ascend_layer_norm_backward"
ASCEND_RMS_NORM_FORWARD_TARGET = "jax_lngb_ascend_rms_norm_forward"
ASCEND_RMS_NORM_BACKWARD_TARGET = "jax_lngb_ascend_rms_norm_backward"
# Every Ascend target, for jax_lngb.export.
ASCEND_TARGETS = (
    ASCEND_LAYER_NORM_GRAD_BETA_TARGET,
    ASCEND_LAYER_NORM_FORWARD_TARGET,
    ASCEND_LAYER_NORM_GRAD_TARGET,
    ASCEND_LAYER_NORM_BACKWARD_TARGET,
    ASCEND_RMS_NORM_FORWARD_TARGET,
    ASCEND_RMS_NORM_BACKWARD_TARGET,
)


def _primitive(name: str) -> Primitive:
    p = Primitive(name)
    p.multiple_results = True
    return p


# ----------------------------------------------------- CANN's LayerNormGradBeta
layer_norm_grad_beta_p = _primitive("layer_norm_grad_beta")
layer_norm_grad_beta_local_p = _primitive("layer_norm_grad_beta_local")

# ------------------------------------------------------------------ LayerNorm
layer_norm_forward_p = _primitive("layer_norm_forward")
layer_norm_forward_local_p = _primitive("layer_norm_forward_local")
# The forward's JVP, linear in the tangents; its transpose is the backward.
layer_norm_tangent_p = _primitive("layer_norm_tangent")
# CANN's LayerNormGrad: pd_x and res_for_gamma.
layer_norm_grad_p = _primitive("layer_norm_grad")
layer_norm_grad_local_p = _primitive("layer_norm_grad_local")
# The fused backward: LayerNormGrad feeding LayerNormGradBeta in one pass.
layer_norm_backward_p = _primitive("layer_norm_backward")
layer_norm_backward_local_p = _primitive("layer_norm_backward_local")

# -------------------------------------------------------------------- RMSNorm
rms_norm_forward_p = _primitive("rms_norm_forward")
rms_norm_forward_local_p = _primitive("rms_norm_forward_local")
rms_norm_tangent_p = _primitive("rms_norm_tangent")
rms_norm_grad_p = _primitive("rms_norm_grad")
rms_norm_grad_local_p = _primitive("rms_norm_grad_local")
rms_norm_backward_p = _primitive("rms_norm_backward")
rms_norm_backward_local_p = _primitive("rms_norm_backward_local")

# ------------------------------------------- residual add + norm (both kinds)
# h = x + residual, y = norm(h) in one pass; `kind` says which norm.
add_norm_forward_p = _primitive("add_norm_forward")
add_norm_forward_local_p = _primitive("add_norm_forward_local")
add_norm_tangent_p = _primitive("add_norm_tangent")
# The fused backward: the norm's dx plus the cotangent of h, and the
# parameter sums, in one pass.
add_norm_backward_p = _primitive("add_norm_backward")
add_norm_backward_local_p = _primitive("add_norm_backward_local")
