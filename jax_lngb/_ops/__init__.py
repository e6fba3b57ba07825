"""The primitives, one module per primitive with all of its rules side by
side (abstract evaluation, lowerings, partitioning, JVP/transpose,
batching): `grad_beta` (CANN's LayerNormGradBeta, which both norms use),
and a subpackage per norm family (`layer_norm`, `rms_norm`, and `add_norm`, the residual add fused with
either) holding its
forward, tangent, backward and CANN-style grad primitives, its jax.numpy
`formulas` and its public `api`.

`primitives` declares every Primitive object and FFI target first; the rule
modules import from it and never from each other in a loop. Importing this
package registers every rule.
"""

from . import add_norm, grad_beta, layer_norm, rms_norm  # noqa: F401  (registers the rules)
