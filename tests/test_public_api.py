"""The public API, pinned: every name a user imports today from each public
module. A move inside the package that drops or renames one of them fails
here (add names freely; removing one is a breaking change and needs a
deliberate edit of this file)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PUBLIC = {
    "jax_lngb": [
        "ShardingWarning",
        "__version__",
        "ascend",
        "export",
        "host_memory",
        "tiling",
        "layer_norm",
        "layer_norm_jnp",
        "layer_norm_ref",
        "layer_norm_grad_beta",
        "layer_norm_grad_beta_p",
        "layer_norm_grad_beta_ref",
        "layer_norm_grad",
        "layer_norm_grad_p",
        "layer_norm_grad_ref",
        "layer_norm_forward_p",
        "layer_norm_forward_ref",
        "layer_norm_backward_p",
        "layer_norm_backward_ref",
        "layer_norm_tangent_p",
        "layer_norm_tangent_ref",
        "rms_norm",
        "rms_norm_jnp",
        "rms_norm_ref",
        "rms_norm_forward_p",
        "rms_norm_backward_p",
        "rms_norm_grad_p",
        "rms_norm_tangent_p",
        "rms_norm_tangent_ref",
        "psum_to_match",
        "retain_host_memory",
        "add_layer_norm",
        "add_layer_norm_ref",
        "add_rms_norm",
        "add_rms_norm_ref",
        "add_norm_forward_p",
        "add_norm_tangent_p",
        "add_norm_backward_p",
        "add_norm_backward_ref",
    ],
    "jax_lngb.flax": ["LayerNorm", "RMSNorm"],
    "jax_lngb.nnx": ["LayerNorm", "RMSNorm"],
    "jax_lngb.equinox": ["LayerNorm", "RMSNorm", "convert", "from_equinox"],
    "jax_lngb.export": ["custom_call_targets", "disabled_safety_checks", "export"],
    "jax_lngb.tiling": [
        "GradBetaKernelPlan",
        "LayerNormGradBetaTiling",
        "LayerNormGradTiling",
        "MAX_ROWS_PER_CALL_3510",
        "NpuArchDefaults",
        "get_layer_norm_grad_beta_max_min_tmp_size",
        "get_layer_norm_grad_beta_nd_tiling_info",
        "get_layer_norm_grad_max_min_tmp_size",
        "get_layer_norm_grad_nd_tiling_info",
        "npu_arch_defaults",
        "plan_layer_norm_grad_beta_kernel",
    ],
    "jax_lngb.ascend": [
        "ARCH_ENV",
        "DEFAULT_NUM_CORES",
        "DEFAULT_PLATFORMS",
        "DEFAULT_UB_BYTES",
        "FFI_TARGET",
        "NUM_CORES_ENV",
        "PLATFORM_ENV",
        "UB_BYTES_ENV",
        "handler_available",
        "npu_arch",
        "plan_for",
        "plan_rms_norm",
        "platform_names",
        "register",
        "register_platform",
        "registered_platforms",
    ],
    "jax_lngb.ascend_emu": ["KernelFault", "layer_norm_grad_beta", "run", "run_kernel", "pad_h"],
    "jax_lngb.host_memory": ["apply_env", "is_enabled", "retain_host_memory", "status", "summary", "time_both_ways"],
}


# Modules whose __all__ is part of the contract.
WITH_ALL = ("jax_lngb", "jax_lngb.flax", "jax_lngb.nnx", "jax_lngb.equinox", "jax_lngb.export", "jax_lngb.ascend")


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_names_are_importable(module):
    mod = importlib.import_module(module)
    missing = [n for n in PUBLIC[module] if not hasattr(mod, n)]
    assert not missing, f"{module} lost public names: {missing}"
    if module in WITH_ALL:
        # `from module import *` gives what __all__ lists: the pinned names stay there too.
        dropped = [n for n in PUBLIC[module] if n != "__version__" and n not in mod.__all__]
        assert not dropped, f"{module}.__all__ lost {dropped}"


def test_old_module_names_are_the_new_modules():
    import jax_lngb
    import jax_lngb.ascend.emulator
    import jax_lngb.ascend.tiling

    assert importlib.import_module("jax_lngb.tiling") is jax_lngb.ascend.tiling
    assert jax_lngb.tiling is jax_lngb.ascend.tiling
    assert importlib.import_module("jax_lngb.ascend_emu") is jax_lngb.ascend.emulator


def test_primitives_are_the_ones_the_rules_use():
    import jax_lngb
    from jax_lngb._ops import primitives

    for name in PUBLIC["jax_lngb"]:
        if name.endswith("_p"):
            assert getattr(jax_lngb, name) is getattr(primitives, name)


def test_import_jax_lngb_imports_no_optional_library():
    # The drop-ins load Flax / Equinox on first attribute access only.
    code = (
        "import sys, jax_lngb; bad = [m for m in ('flax', 'equinox') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
