"""`python -m jax_lngb.bench`: the benchmark shipped with the package.

Sections (``--section``):

* ``reduction`` (the default): LayerNormGradBeta, the gamma/beta gradient
  sums, against XLA's plain jax.numpy expression, NumPy, PyTorch's CPU
  LayerNorm backward and a streaming-read probe (the memory-bandwidth
  ceiling).
* ``layer_norm``: the full LayerNorm forward, backward and forward+backward
  against XLA autodiff and PyTorch.
* ``rms_norm``: RMSNorm forward, backward and forward+backward against XLA
  autodiff and PyTorch.
* ``add_norm``: the residual add fused with LayerNorm / RMSNorm against
  the add and the norm unfused, XLA autodiff and PyTorch.
* ``all``: every section, in this order.

Two experiments beside it, each its own command: ``python -m
jax_lngb.bench.allocators`` (a plain-jit LayerNorm step under glibc's
defaults, the retain_host_memory opt-in, huge pages, jemalloc and tcmalloc)
and ``python -m jax_lngb.bench.dx_alias`` (dx written into dy's buffer).

Run ``python -m jax_lngb.bench --help`` for the options. The modules here are
tools, not part of the jax_lngb API.
"""

SECTIONS = ("reduction", "layer_norm", "rms_norm", "add_norm")
