"""LayerNorm: `api` (the public `layer_norm`), the primitives `forward`,
`tangent` (the JVP, whose transpose is the backward), `backward` (the fused
LayerNormGrad -> LayerNormGradBeta) and `grad` (CANN's LayerNormGrad), and
the jax.numpy `formulas` every platform without a kernel lowers to.
Importing the package registers every rule."""

from . import api, backward, forward, grad, tangent  # noqa: F401  (registers the rules)
