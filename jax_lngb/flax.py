"""Drop-ins for `flax.linen.LayerNorm` and `flax.linen.RMSNorm` whose
forward and backward run jax_lngb's kernels:

    from jax_lngb.flax import LayerNorm, RMSNorm   # instead of flax.linen's

Same attributes, parameters and module names as Flax's, so checkpoints load
unchanged; every call the kernels do not serve runs Flax's own code. The
rules: `jax_lngb._integrations.linen`. Needs Flax: `pip install 'jax_lngb[flax]'`.
"""

from ._integrations.linen import LayerNorm, RMSNorm

__all__ = ["LayerNorm", "RMSNorm"]
