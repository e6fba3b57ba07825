"""The nested-vmap Equinox benchmark: both norms run, agree, and print their tables."""

from __future__ import annotations

import pytest

pytest.importorskip("equinox")

from jax_lngb.bench import equinox_vmap

# Max |diff| against the flat call per output (y, dx, dweight, dbias): the
# drop-in is the same kernel work; Equinox is XLA autodiff in float32 (f32)
# or rounded once more (bf16, one bf16 ulp of values around 4).
TOL = {"f32": 1e-4, "bf16": 6e-2}


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_every_impl_times_and_agrees_with_flat(norm, dtype):
    med, diffs = equinox_vmap.run((2, 3, 16), equinox_vmap.DTYPES[dtype], reps=2, warmup=1, norm=norm)
    assert set(med) == set(diffs) == {"eqx-dropin", "eqx", "flat"}
    assert all(t > 0 for t in med.values())
    assert diffs["flat"] == [0.0] * 4
    for name in ("eqx-dropin", "eqx"):
        assert len(diffs[name]) == 4 and max(diffs[name]) < TOL[dtype], (name, diffs[name])


def test_norm_option_picks_the_tables(capsys):
    equinox_vmap.main(["--shape", "2x3x8", "--dtypes", "f32", "--reps", "1", "--warmup", "1", "--norm", "rms"])
    out = capsys.readouterr().out
    assert "RMSNorm [2, 3, 8] float32" in out and "LayerNorm" not in out
    equinox_vmap.main(["--shape", "2x3x8", "--dtypes", "f32", "--reps", "1", "--warmup", "1"])
    out = capsys.readouterr().out
    assert out.count("RMSNorm [2, 3, 8] float32") == 1 and out.count("LayerNorm [2, 3, 8] float32") == 1


def test_bad_norm_is_refused():
    with pytest.raises(SystemExit):
        equinox_vmap.main(["--norm", "batch"])
