"""`jax.export` of programs that use this package's kernels.

`jax.export` refuses custom calls whose targets carry no compatibility
guarantee unless told otherwise, and our kernels are such custom calls. The
names to allow are every target any of our lowerings may emit, for every
platform: the CPU handlers of the compiled extension and the Ascend NPU
kernel (`jax_lngb.ascend.FFI_TARGET`; `_ops.primitives` lists them all), so one list serves
`platforms=["cpu"]`, `["ascend"]` and `["cpu", "ascend"]` alike:

    exp = jax.export.export(jax.jit(step), disabled_checks=jax_lngb.export.disabled_safety_checks())(*specs)
    # or, the same:
    exp = jax_lngb.export.export(jax.jit(step))(*specs)
    blob = exp.serialize()                        # needs the flatbuffers package

    # elsewhere (same package version): importing jax_lngb registers the handlers
    import jax_lngb
    jax.export.deserialize(blob).call(*args)

Symbolic shapes work (e.g. `jax.export.symbolic_shape("b")` for the batch):
the CPU kernels read every size from their buffers, never from attributes.
(The Ascend lowering needs concrete shapes: with symbolic ones it keeps the
portable jax.numpy form.)

Exporting for Ascend needs JAX to know the platform: on a machine without
the Ascend PJRT plugin call `jax_lngb.ascend.register_platform("ascend")`
first (see `jax_lngb.ascend`), or the export silently holds the jax.numpy
reduction instead of the AscendC kernel.

What allowing them means: a serialized artifact names our targets and
passes the CPU ones buffers only (no attributes; the Ascend one also gets
its launch plan as attributes and a tiling constant), so it runs in any
process that imported a jax_lngb registering the same targets with the same
contract; the safe assumption is the same package version.

A module exported for more than one device has no custom calls of ours at
all: the sharded lowering of our primitives cannot be serialized (see
`jax_lngb._core.partitioning`), so such exports use the `jax.numpy` form, which
XLA partitions itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jax import export as _jax_export

from ._core import native
from ._ops.primitives import ASCEND_TARGETS

__all__ = ["custom_call_targets", "disabled_safety_checks", "export"]


def custom_call_targets() -> tuple[str, ...]:
    """Every custom-call target this package's lowerings may emit, on any
    platform (CPU handlers and the Ascend NPU kernel), sorted."""
    return tuple(sorted({*native.register_cpu_targets(), *ASCEND_TARGETS}))


def disabled_safety_checks() -> list[_jax_export.DisabledSafetyCheck]:
    """`DisabledSafetyCheck.custom_call` for each of our targets, ready for
    `jax.export.export(..., disabled_checks=...)`."""
    return [_jax_export.DisabledSafetyCheck.custom_call(t) for t in custom_call_targets()]


def export(
    fun_jit: Any,
    *,
    disabled_checks: Sequence[_jax_export.DisabledSafetyCheck] = (),
    **kwargs: Any,
) -> Callable[..., _jax_export.Exported]:
    """`jax.export.export` with our custom-call targets allowed.

    Takes the same arguments as `jax.export.export` (`platforms=...` and
    any further `disabled_checks` included) and returns the same thing: a
    function of the argument shapes that returns an `Exported`.
    """
    if not hasattr(fun_jit, "trace") and not hasattr(fun_jit, "lower"):
        raise TypeError(f"jax_lngb.export.export: fun_jit must be the result of jax.jit; got {type(fun_jit).__name__}")
    checks = [*disabled_checks, *disabled_safety_checks()]
    return _jax_export.export(fun_jit, disabled_checks=checks, **kwargs)
