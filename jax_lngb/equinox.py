"""Drop-ins for `equinox.nn.LayerNorm` and `equinox.nn.RMSNorm` whose
forward and backward run jax_lngb's kernels:

    from jax_lngb.equinox import LayerNorm, RMSNorm   # instead of equinox.nn's
    model = jax_lngb.equinox.convert(model)           # or swap them in a built model

Same constructor and fields as Equinox's, so checkpoints load unchanged;
every call the kernels do not serve runs Equinox's own code. The rules:
`jax_lngb._integrations.equinox`. Needs Equinox: `pip install 'jax_lngb[equinox]'`.
"""

from ._integrations.equinox import LayerNorm, RMSNorm, convert, from_equinox

__all__ = ["LayerNorm", "RMSNorm", "convert", "from_equinox"]
