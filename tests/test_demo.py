"""The demo (`jax-lngb`, `jax-lngb demo --quick`): the document's example,
the two training runs agreeing, LayerNorm alone agreeing with XLA, and an
exit status that follows correctness."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from jax_lngb._ops.primitives import ADD_LAYER_NORM_BACKWARD_TARGET as ADD_BACKWARD
from jax_lngb._ops.primitives import ADD_LAYER_NORM_FORWARD_TARGET as ADD_FORWARD
from jax_lngb.cli import demo


def test_quick_demo_runs_and_checks_out(tmp_path):
    # Outside the source tree, as a user would run the installed command.
    proc = subprocess.run(
        [sys.executable, "-m", "jax_lngb", "demo", "--quick"], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "pd_gamma = [8960, 9416, 9888, 10376, 10880, 11400, 11936, 12488]" in out
    assert "matches the document: yes" in out
    assert "of the loss (allowed 0.001): agree" in out
    assert "of their largest entry (allowed 0.0001): yes" in out
    assert "all checks passed" in out


def test_the_two_trainings_agree_step_by_step():
    cfg = demo.QUICK
    params = demo.init_params(demo.jax.random.PRNGKey(3), cfg)
    x = demo.jax.random.normal(demo.jax.random.PRNGKey(4), (cfg.tokens, cfg.width))
    teacher = demo.init_params(demo.jax.random.PRNGKey(5), cfg)
    y = demo.forward(teacher, x, demo.IMPLEMENTATIONS["jax.numpy"])
    runs = demo.train(cfg, params, [(x, y)] * 3)
    ours, ref = runs["jax_lngb"].losses, runs["jax.numpy"].losses
    assert len(ours) == len(ref) == 3
    np.testing.assert_allclose(ours, ref, rtol=demo.LOSS_RTOL)
    # Training on the same batch again must lower the loss (the step really steps).
    assert ours[-1] < ours[0]


def test_a_wrong_result_fails_the_exit_status(monkeypatch, capsys):
    monkeypatch.setattr(demo, "DOC_PD_BETA", [0] * 8)
    monkeypatch.setattr(demo, "training_comparison", lambda cfg: True)
    monkeypatch.setattr(demo, "layer_norm_alone", lambda cfg: True)
    assert demo.main(["--quick"]) == 1
    out = capsys.readouterr().out
    assert "matches the document: NO" in out
    assert "A CHECK FAILED" in out


def test_the_cli_dispatches_demo_and_bench_help():
    env = {**os.environ}
    for argv, needle in ((["demo", "--help"], "--quick"), (["bench", "--help"], "--section")):
        proc = subprocess.run(
            [sys.executable, "-m", "jax_lngb", *argv],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=os.path.dirname(__file__),
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert needle in proc.stdout


def test_the_model_runs_the_fused_add_and_norm_kernels():
    # The demo's model is written as a user would after reading the README:
    # each residual add fused with the LayerNorm after it.
    cfg = demo.QUICK
    params = demo.init_params(demo.jax.random.PRNGKey(3), cfg)
    x = demo.jax.random.normal(demo.jax.random.PRNGKey(4), (64, cfg.width))
    hlo = demo.make_step(demo.IMPLEMENTATIONS["jax_lngb"]).lower(params, x, x[:, :8]).as_text()
    assert hlo.count(ADD_FORWARD) == 1 and hlo.count(ADD_BACKWARD) == 1, (
        hlo.count(ADD_FORWARD),
        hlo.count(ADD_BACKWARD),
    )
    plain = demo.make_step(demo.IMPLEMENTATIONS["jax.numpy"]).lower(params, x, x[:, :8]).as_text()
    assert ADD_FORWARD not in plain
