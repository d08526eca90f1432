"""density_modeling task (RMwGGIS Table 1, 4; Fig. 1, 2, 4) through the real entry point; the
ratio matching learner itself is tested in test_ratio_matching.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ebmlab.learning.ratio_matching import ratio_matching_loss
from ebmlab.metrics.density_2d import log_density_grid
from ebmlab.models.enumeration import binary_states
from ebmlab.models.mlp_energy import MLPEnergy
from ebmlab.report import collect
from ebmlab.report.figures.density_modeling import grid_figure
from tests.helpers import run_cli

TIMINGS = ("seconds", "time_per_iter")

# tiny CPU sizes: 16-bit data, 32-unit MLP, 20 iterations, 200 vs 200 MMD samples
TINY = [
    "experiment=rmwggis/table1_synthetic",
    "scale=smoke",
    "dataset.dim=16",
    "model.hidden_dim=32",
    "run.n_steps=20",
    "learner.batch_size=32",
    "run.eval_every=5",
    "task.mmd_every=10",
    "task.heatmap_every=10",
    "run.checkpoint_every=10",
    "task.mmd_samples=200",
    "task.gibbs_sweeps=2",
    "task.rm_samples=100",
    "task.heatmap_resolution=20",
]


def _strict_json(run_dir) -> None:
    """results.json holds finite numbers only (no NaN / Infinity tokens)."""
    text = (run_dir / "results.json").read_text()
    assert "NaN" not in text and "Infinity" not in text


def test_end_to_end_rmwggis(tmp_path):
    run_dir = tmp_path / "run"
    r = run_cli(TINY + ["learner.variant=basic"], run_dir).results
    assert math.isfinite(r["mmd"]) and math.isfinite(r["rm_objective"])
    assert 0 < r["mmd_se"] < 16
    # unbiased MMD with the linear kernel is bounded by d in absolute value
    assert abs(r["mmd"]) < 16 and r["rm_objective"] > 0 and r["dim"] == 16
    assert r["n_iters"] == 20 and r["mmd_samples"] == 200 and math.isfinite(r["final_loss"])
    assert "accept_rate" not in r  # ratio matching has no sampler: the key is left out
    _strict_json(run_dir)
    z = np.load(run_dir / "heatmap.npz")
    assert z["log_density"].shape == (400,)
    assert np.exp(z["log_density"]).sum() == pytest.approx(1.0, abs=1e-9)
    assert list(z["snap_steps"]) == [0, 10, 20]
    np.testing.assert_array_equal(z["snaps"][-1], z["log_density"])
    for f in ("density", "density_over_training", "eval"):
        assert (run_dir / "figures" / f"{f}.png").exists(), f
    # the cross-run grid of heat maps reads these files
    fig = grid_figure(collect(tmp_path), ["dataset.name"], ["learner.variant"], False, "t")
    assert len(fig.axes) == 1


def test_end_to_end_pcd_gibbs_without_rm_objective(tmp_path):
    args = TINY + [
        "learner=pcd",
        "sampler=gibbs",
        "learner.sampler_steps=2",
        "learner.buffer_size=32",
        "learner.l1=0.0",
        "task.mmd_every=0",
        "task.heatmap_every=0",
        "task.rm_samples=0",
    ]
    r = run_cli(args, tmp_path / "run").results
    assert math.isfinite(r["mmd"]) and "rm_objective" not in r  # rm_samples = 0: left out
    assert r["accept_rate"] == pytest.approx(1.0)  # Gibbs always moves
    _strict_json(tmp_path / "run")
    assert list(np.load(tmp_path / "run" / "heatmap.npz")["snap_steps"]) == [20]


def test_pcd_without_sampler_is_exit_2(tmp_path):
    p = run_cli(TINY + ["learner=pcd"], tmp_path / "run", check=False)  # experiment: no sampler
    assert p.returncode == 2 and "sampler" in p.stderr
    assert not (tmp_path / "run" / "run_config.json").exists()  # refused before the run dir


def test_model_dim_mismatch_is_exit_2(tmp_path):
    p = run_cli(TINY + ["model.dim=20"], tmp_path / "run", check=False)
    assert p.returncode == 2 and "model.dim" in p.stderr
    assert not (tmp_path / "run" / "run_config.json").exists()  # refused before the run dir


@pytest.mark.parametrize(
    "override,key",
    [("task.mmd_samples=1", "mmd_samples"), ("task.mmd_every=7", "eval_every")],
)
def test_bad_task_value_is_exit_2(tmp_path, override, key):
    p = run_cli(TINY + [override], tmp_path / "run", check=False)
    assert p.returncode == 2 and key in p.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [15, 20])  # mid-run (checkpoint at 10) / after the last step
def test_resume_after_kill_matches_uninterrupted(tmp_path, kill_at):
    full = run_cli(TINY, tmp_path / "full").results
    env = {"EBMLAB_FAULT_KILL_AT_STEP": str(kill_at)}
    killed = run_cli(TINY, tmp_path / "res", env=env, check=False)
    assert killed.returncode != 0
    resumed = run_cli(TINY, tmp_path / "res").results
    assert resumed.keys() == full.keys()
    for k in full:
        if k not in TIMINGS:
            assert resumed[k] == full[k], k
    a, b = np.load(tmp_path / "full" / "heatmap.npz"), np.load(tmp_path / "res" / "heatmap.npz")
    for k in a.files:
        np.testing.assert_array_equal(a[k], b[k])


def test_log_density_grid_is_normalised_and_ordered():
    torch.manual_seed(0)
    m = MLPEnergy(dim=8, hidden_dim=8, num_layers=1, learn_beta=True)
    bits = binary_states(0, 256, 8)
    lp = log_density_grid(m, bits, chunk=50)  # chunking must not change the result
    with torch.no_grad():
        ref = torch.log_softmax(m.log_prob(bits).double(), 0)
    assert torch.allclose(lp, ref, atol=1e-6)


def test_rm_objective_metric_is_eq3_mean():
    """The task's Table 4 number is ratio_matching_loss (mean over points of the d-term sum)."""
    torch.manual_seed(0)
    m = MLPEnergy(dim=4, hidden_dim=4, num_layers=1, learn_beta=True)
    x = binary_states(0, 16, 4)
    with torch.no_grad():
        e = -m.log_prob(x)
        brute = 0.0
        for i in range(4):
            y = x.clone()
            y[:, i] = 1 - y[:, i]
            brute = brute + torch.exp(2 * (e + m.log_prob(y)))
    with torch.no_grad():
        value = float(ratio_matching_loss(m, x, chunk_size=5))
    assert value == pytest.approx(float(brute.mean()), rel=1e-5)


def test_an_rbm_is_a_binary_energy_it_accepts(tmp_path):
    """model=rbm (n_visible, not dim) passes the requirements; a wrong n_visible is refused."""
    rbm = [o for o in TINY if not o.startswith("model.")] + ["model=rbm", "model.n_hidden=8"]
    ok = run_cli(rbm + ["run.n_steps=10"], tmp_path / "a")
    assert (tmp_path / "a" / "results.json").exists(), ok.stderr
    bad = run_cli(rbm + ["model.n_visible=20"], tmp_path / "b", check=False)
    assert bad.returncode == 2 and "model.n_visible" in bad.stderr
