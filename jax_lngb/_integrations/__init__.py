"""Drop-in norm modules for Flax and Equinox, each a subclass of the
library's own module that runs our kernels where they serve and the
library's own code everywhere else: `linen` and `nnx` (LayerNorm and
RMSNorm side by side, as Flax groups them) on `flax_common` and the two
kernel routes `flax_layer_norm` / `flax_rms_norm`; `equinox` on
`equinox_common`. The public modules `jax_lngb.flax`, `jax_lngb.nnx` and
`jax_lngb.equinox` re-export them; none is imported by `import jax_lngb`.
`promotion` keeps their decisions the same under strict dtype promotion
and jax_enable_x64.
"""
