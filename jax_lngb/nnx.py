"""Drop-ins for `flax.nnx.LayerNorm` and `flax.nnx.RMSNorm` whose forward
and backward run jax_lngb's kernels:

    from jax_lngb.nnx import LayerNorm, RMSNorm    # instead of flax.nnx's

Same constructor, parameters and state tree as Flax's; every call the
kernels do not serve runs Flax's own code. The rules:
`jax_lngb._integrations.nnx`. Needs Flax: `pip install 'jax_lngb[flax]'`.
"""

from ._integrations.nnx import LayerNorm, RMSNorm

__all__ = ["LayerNorm", "RMSNorm"]
