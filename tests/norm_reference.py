"""What the drop-in module tests (test_flax, test_nnx, test_equinox,
test_rms_dropins, test_dropin_configs) share: test data, a float64
LayerNorm with its VJP as the oracle, error bounds, a jitted training loop
(optax when installed, plain SGD otherwise), and the `promotion` fixture
that reruns a test under strict dtype promotion and under jax_enable_x64."""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import U32, enable_x64, unit_roundoff

try:
    import optax
except ImportError:  # the training loop falls back to plain SGD
    optax = None

F32, F16, BF16 = jnp.float32, jnp.float16, jnp.bfloat16
CUSTOM_CALL = "jax_lngb_layer_norm_backward"  # the fused backward: the VJP's one kernel


def data(shape, dtype, seed=0, std=0.02):
    """Normals rounded to `dtype`. The small default standard deviation
    makes epsilon matter (variance 4e-4 against 1e-6 or 1e-5), so a wrong
    default would show."""
    rng = np.random.default_rng(seed)
    return jnp.asarray((rng.standard_normal(shape) * std).astype(np.float32)).astype(dtype)


def random_like(tree, seed=1):
    """Non-trivial scale/bias values (around 1, spread 0.5) for every array
    leaf of `tree`, each in the leaf's own dtype."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    rng = np.random.default_rng(seed)
    new = [jnp.asarray(1 + 0.5 * rng.standard_normal(p.shape)).astype(p.dtype) for p in leaves]
    return jax.tree_util.tree_unflatten(treedef, new)


def _unit_roundoff(dtype) -> float:
    """unit_roundoff, float64 included (Equinox's default parameter dtype
    under jax_enable_x64)."""
    return 2.0**-53 if np.dtype(dtype) == np.dtype(np.float64) else unit_roundoff(dtype)


def assert_close(got, want, *, result_dtype, scale, input_dtype=F32, rounded_to=None, what=""):
    """|got - want| <= one rounding of the result (2u|want|) plus float32
    noise and one rounding of a 16-bit input per term, both relative to
    `scale` (the sum of the terms' magnitudes, or the array's magnitude).
    Checks that got has `result_dtype`; `rounded_to` names a narrower dtype
    the value passed through on its way (default: result_dtype)."""
    assert np.dtype(got.dtype) == np.dtype(result_dtype), f"{what}: dtype {got.dtype}, expected {result_dtype}"
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    u_in = unit_roundoff(input_dtype) if np.dtype(input_dtype) != np.dtype(F32) else 0.0
    u_out = max(_unit_roundoff(result_dtype), _unit_roundoff(rounded_to or result_dtype))
    tol = 2 * u_out * np.abs(want) + (64 * U32 + u_in) * np.asarray(scale)
    err = np.abs(got - want)
    worst = np.argmax(err - tol)
    assert np.all(err <= tol), (
        f"{what}: error {err.flat[worst]} > tolerance {tol.flat[worst]} "
        f"(got {got.flat[worst]}, want {want.flat[worst]})"
    )


def layer_norm_reference(x, scale, bias, ct, epsilon, sum_axes=None):
    """float64 LayerNorm over the last axis of `x` and its VJP for the
    cotangent `ct`, with the sizes of the terms the error bounds need.

    The parameter gradients are summed over `sum_axes` (default: every
    leading axis; `()` gives per-row gradients).
    """
    x, ct = np.asarray(x, np.float64), np.asarray(ct, np.float64)
    scale = np.ones(x.shape[-1]) if scale is None else np.asarray(scale, np.float64)
    bias = np.zeros(x.shape[-1]) if bias is None else np.asarray(bias, np.float64)
    rows = tuple(range(x.ndim - 1)) if sum_axes is None else sum_axes
    rstd = 1 / np.sqrt(x.var(-1, keepdims=True) + epsilon)
    xhat = (x - x.mean(-1, keepdims=True)) * rstd
    g = ct * scale
    return dict(
        y=xhat * scale + bias,
        d_scale=(ct * xhat).sum(rows),
        d_bias=ct.sum(rows),
        d_x=rstd * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True)),
        d_scale_terms=np.abs(ct * xhat).sum(rows),
        d_bias_terms=np.abs(ct).sum(rows),
        # dx is a difference of terms of size rstd * |g|
        d_x_terms=np.abs(rstd * g).max(-1, keepdims=True) * np.ones_like(x),
    )


def check_against_reference(
    y, g_scale, g_bias, g_x, ref, *, out_dtype, param_dtype, x_dtype, compute_dtype=None, double_rounded_dx=False
):
    """Each result within the bounds of `assert_close` of the reference.

    The parameter gradients are sums of dy * xhat with dy in the output
    dtype (jax_lngb hands the kernel xhat in dy's dtype, one rounding per
    term when it is 16-bit). `double_rounded_dx`: Flax's own autodiff narrows
    the two paths into a 16-bit x separately and then adds them, one more
    rounding of the terms of dx. `compute_dtype`: the dtype nnx promotes x
    and the parameters to first (their gradients pass through it).
    """
    assert_close(y, ref["y"], result_dtype=out_dtype, scale=np.abs(ref["y"]).max(), what="output")
    if g_scale is not None:
        assert_close(
            g_scale,
            ref["d_scale"],
            result_dtype=param_dtype,
            input_dtype=out_dtype,
            rounded_to=compute_dtype,
            scale=ref["d_scale_terms"],
            what="d scale",
        )
    if g_bias is not None:
        assert_close(
            g_bias,
            ref["d_bias"],
            result_dtype=param_dtype,
            input_dtype=out_dtype,
            rounded_to=compute_dtype,
            scale=ref["d_bias_terms"],
            what="d bias",
        )
    u_x = max(unit_roundoff(x_dtype), unit_roundoff(compute_dtype or x_dtype))
    extra = 4 * u_x / (64 * U32) if double_rounded_dx else 0.0
    assert_close(
        g_x,
        ref["d_x"],
        result_dtype=x_dtype,
        rounded_to=compute_dtype,
        scale=ref["d_x_terms"] * (1 + extra),
        what="d x",
    )


def train(loss_fn, params, batches, lr=0.05):
    """Runs one jitted step per batch: SGD with momentum from optax, or plain
    SGD when optax is missing. Returns (params, losses, the step's StableHLO)."""
    if optax is not None:
        tx = optax.sgd(lr, momentum=0.9)
        opt_state = tx.init(params)

        def apply(grads, opt_state, params):
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state
    else:
        opt_state = ()

        def apply(grads, opt_state, params):
            return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), opt_state

    @jax.jit
    def step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        params, opt_state = apply(grads, opt_state, params)
        return params, opt_state, loss

    text = step.lower(params, opt_state, *batches[0]).as_text()
    losses = []
    for x, y in batches:
        params, opt_state, loss = step(params, opt_state, x, y)
        losses.append(float(loss))
    return params, np.array(losses), text


def assert_same_training(p_ours, p_theirs, p_init, loss_ours, loss_theirs, dtype):
    """Trajectories that differ per step by rounding only: losses within a
    few roundings, parameters within a few roundings of how far training
    moved them (plus the rounding of the parameter itself)."""
    u = unit_roundoff(dtype)
    assert loss_ours[-1] < loss_ours[0]
    np.testing.assert_allclose(loss_ours, loss_theirs, rtol=4 * u)
    leaves = [jax.tree_util.tree_leaves(t) for t in (p_ours, p_theirs, p_init)]
    assert len(leaves[0]) == len(leaves[1]) == len(leaves[2])
    for a, b, b0 in zip(*leaves):
        moved = float(np.abs(np.asarray(b, np.float64) - np.asarray(b0, np.float64)).max())
        assert moved > 0
        np.testing.assert_allclose(
            np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=4 * unit_roundoff(F32), atol=16 * u * moved
        )


# ------------------------------------------------------ promotion modes

# default: JAX's standard promotion, 32-bit; strict: what Equinox's own
# test suite runs under (no implicit promotion between different dtypes);
# x64: jax_enable_x64, where NumPy float64 values stay float64 and
# Equinox's default parameter dtype is float64.
PROMOTION_MODES = ("default", "strict", "x64")


def promotion_context(mode: str):
    """The context manager that sets `mode` (one of PROMOTION_MODES) for
    the code it runs, restoring the previous settings on exit."""
    if mode == "strict":
        return jax.numpy_dtype_promotion("strict")
    if mode == "x64":
        return enable_x64()
    assert mode == "default", mode
    return contextlib.nullcontext()


@pytest.fixture(name="promotion")
def promotion_fixture(request):
    """`promotion`: runs the test under the mode its parameters name (see
    `in_modes`); the value is the mode. A test module imports
    `promotion_fixture` to use it."""
    with promotion_context(request.param):
        yield request.param


def in_modes(cases, ids, also=lambda case: True) -> list:
    """`pytest.param`s for `@pytest.mark.parametrize("promotion,...", ...,
    indirect=["promotion"])`: every case under "default", and under "strict"
    and "x64" too where `also(case)` (the cases whose dtypes those modes can
    change: rerunning the rest would cost time and check nothing new)."""
    out = []
    for case, case_id in zip(cases, ids):
        for mode in PROMOTION_MODES if also(case) else ("default",):
            out.append(pytest.param(mode, *case, id=f"{mode}-{case_id}"))
    return out


def exercises_dtypes(attrs: dict, x_dtype) -> bool:
    """Whether strict promotion or x64 can change a Flax configuration: an
    input that is not float32, or a dtype option. The all-default float32
    case counts too, so that every mode checks the kernel still serves it."""
    dtype_options = {"dtype", "param_dtype", "force_float32_reductions", "promote_dtype"}
    return not attrs or np.dtype(x_dtype) != np.dtype(F32) or bool(dtype_options & set(attrs))


def run_upstream(mode: str, upstream, ours) -> tuple[bool, object]:
    """`(False, upstream())`, or `(True, None)` where strict promotion makes
    upstream raise, after checking that `ours()` raises the same error (type
    and message): then the test has nothing more to compare. Any other error
    of upstream's, or one in another mode, fails the test."""
    try:
        return False, upstream()
    except Exception as e:  # whichever error upstream raises, ours must match it
        if mode != "strict" or not isinstance(e, jax.dtypes.TypePromotionError):
            raise
        with pytest.raises(type(e)) as err:
            ours()
        assert str(err.value) == str(e)
        return True, None


def close_to_upstream(got, want, *, scale=None, input_dtype=None, what=""):
    """Within a few roundings of the result dtype (and of a 16-bit input)
    plus float32 noise, relative to `scale` (default: max |want|); the same
    dtype as `want`."""
    assert np.dtype(got.dtype) == np.dtype(want.dtype), f"{what}: dtype {got.dtype} vs {want.dtype}"
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = np.abs(w).max() if scale is None else scale
    u = unit_roundoff(got.dtype) if np.dtype(got.dtype) in map(np.dtype, (F32, F16, BF16)) else U32
    u_in = unit_roundoff(input_dtype) if input_dtype is not None and np.dtype(input_dtype) != np.dtype(F32) else 0.0
    tol = 2 * u * np.abs(w) + (64 * U32 + 2 * u_in + (2 * u if u > U32 else 0.0)) * scale
    err = np.abs(g - w)
    assert np.all(err <= tol), f"{what}: worst error {err.max()} (tolerance there {tol.flat[np.argmax(err - tol)]})"
