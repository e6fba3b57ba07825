"""RMSNorm: `api` (the public `rms_norm`), the primitives `forward`,
`tangent` (the JVP, whose transpose is the backward), `backward` (fused:
dx and, through LayerNormGradBeta's pd_gamma, dgamma) and `grad` (dx
alone), and the jax.numpy `formulas`. Importing the package registers
every rule."""

from . import api, backward, forward, grad, tangent  # noqa: F401  (registers the rules)
