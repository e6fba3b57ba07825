"""CPU lowerings of the LayerNorm primitives through jax.ffi.ffi_call.

The kernels take parameters and statistics in float32 (the dtype they
compute in), so the lowering widens them first; widening is exact, and it
is a cheap [H]- or [rows]-sized convert next to the [rows, H] kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import mlir


def cpu_lowering(
    target: str,
    result_avals: Callable[..., Sequence[jax.ShapeDtypeStruct]],
    float32_operands: Sequence[int],
) -> Callable:
    """A lowering rule calling FFI `target` with operands float32_operands
    widened to float32 and the static epsilon as an attribute. Shapes come
    from the buffers only, so symbolic shapes export."""

    def call(*args, epsilon, **params):
        args = [a.astype(jnp.float32) if i in float32_operands else a for i, a in enumerate(args)]
        outs = result_avals(*args, **params)
        return jax.ffi.ffi_call(target, outs)(*args, epsilon=np.float32(epsilon))

    return mlir.lower_fun(call, multiple_results=True)


def apply_impl(prim):
    """Eager execution compiles and runs the primitive alone through the same
    lowering (dispatch.apply_primitive also handles jax.disable_jit())."""

    def impl(*args, **params):
        from jax._src import dispatch

        return dispatch.apply_primitive(prim, *args, **params)

    return impl
