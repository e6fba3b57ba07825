"""Residual add + norm, fused: `api` (the public `add_layer_norm` and
`add_rms_norm`), the primitives `forward`, `tangent` (the JVP, whose
transpose is the backward) and `backward` (the norm's dx plus the cotangent
of h, and the parameter sums, in one pass), and the jax.numpy `formulas`.
One primitive family serves both norms through a static `kind`.
Importing the package registers every rule."""

from . import api, backward, forward, tangent  # noqa: F401  (registers the rules)
