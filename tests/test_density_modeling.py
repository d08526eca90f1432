"""density_modeling task (RMwGGIS Table 1, 4; Fig. 1, 4) and ratio matching on Ising learning
(RMwGGIS Table 3) through the PCD-interface adapter."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir

import ebmlab.run  # noqa: F401 - registers resolvers
from ebmlab.errors import ConfigError
from ebmlab.learning.ratio_matching import ratio_matching_loss
from ebmlab.learning.ratio_matching_learner import RatioMatchingTrainer
from ebmlab.models.enumeration import binary_states
from ebmlab.models.ising import DenseIsing, LatticeIsing
from ebmlab.models.mlp_energy import MLPEnergy
from ebmlab.tasks.density_modeling import grid_figure, log_density_grid
from ebmlab.utils.config import validate_node
from tests.helpers import run_cli

CONF = Path(__file__).resolve().parents[1] / "conf"

# tiny CPU sizes: 16-bit data, 32-unit MLP, 20 iterations, 200 vs 200 MMD samples
TINY = [
    "experiment=rmwggis_synthetic_smoke",
    "dataset.dim=16",
    "model.hidden_dim=32",
    "task.n_iters=20",
    "task.batch_size=32",
    "task.log_every=5",
    "task.eval_every=10",
    "task.heatmap_every=10",
    "task.checkpoint_every=10",
    "task.mmd_samples=200",
    "task.gibbs_sweeps=2",
    "task.rm_samples=100",
    "task.heatmap_resolution=20",
]


def test_end_to_end_rmwggis(tmp_path):
    run_dir = tmp_path / "run"
    p = run_cli(TINY + ["learner.variant=basic"], run_dir)
    r = p.results
    assert math.isfinite(r["mmd"]) and math.isfinite(r["rm_objective"])
    # unbiased MMD with the linear kernel is bounded by d in absolute value
    assert abs(r["mmd"]) < 16 and r["rm_objective"] > 0 and r["dim"] == 16
    z = np.load(run_dir / "heatmap.npz")
    assert z["log_density"].shape == (400,)
    assert np.exp(z["log_density"]).sum() == pytest.approx(1.0, abs=1e-9)
    assert list(z["snap_steps"]) == [0, 10, 20]
    for f in ("density", "density_over_training", "eval"):
        assert (run_dir / "figures" / f"{f}.png").exists(), f
    # the cross-run grid of heat maps reads these files
    fig = grid_figure([tmp_path], ["dataset.name"], ["learner.variant"], False, "t")
    assert len(fig.axes) == 1


def test_end_to_end_pcd_gibbs(tmp_path):
    args = TINY + [
        "learner=pcd",
        "sampler=gibbs",
        "learner.sampler_steps=2",
        "learner.buffer_size=32",
        "learner.l1=0.0",
        "task.eval_every=0",
        "task.heatmap_every=0",
    ]
    r = run_cli(args, tmp_path / "run").results
    assert math.isfinite(r["mmd"]) and math.isfinite(r["rm_objective"])
    assert r["accept_rate"] == pytest.approx(1.0)  # Gibbs always moves


def test_pcd_without_sampler_is_exit_2(tmp_path):
    p = run_cli(TINY + ["learner=pcd"], tmp_path / "run", check=False)  # experiment: no sampler
    assert p.returncode == 2 and "sampler" in p.stderr


def test_model_dim_mismatch_is_exit_2(tmp_path):
    p = run_cli(TINY + ["model.dim=20"], tmp_path / "run", check=False)
    assert p.returncode == 2 and "model.dim" in p.stderr


def test_bad_task_value_is_exit_2(tmp_path):
    p = run_cli(TINY + ["task.mmd_samples=1"], tmp_path / "run", check=False)
    assert p.returncode == 2 and "mmd_samples" in p.stderr


@pytest.mark.slow
def test_resume_after_kill_matches_uninterrupted(tmp_path):
    full = run_cli(TINY, tmp_path / "full").results
    killed = run_cli(TINY, tmp_path / "res", env={"EBMLAB_FAULT_KILL_AT_STEP": "10"}, check=False)
    assert killed.returncode != 0
    resumed = run_cli(TINY, tmp_path / "res").results
    for k in ("mmd", "rm_objective", "final_loss"):
        assert resumed[k] == pytest.approx(full[k], rel=1e-6, abs=1e-9), k


def test_log_density_grid_is_normalised_and_ordered():
    torch.manual_seed(0)
    m = MLPEnergy(dim=8, hidden_dim=8, num_layers=1)
    bits = binary_states(0, 256, 8)
    lp = log_density_grid(m, bits, chunk=50)  # chunking must not change the result
    with torch.no_grad():
        ref = torch.log_softmax(m.log_prob(bits).double(), 0)
    assert torch.allclose(lp, ref, atol=1e-6)


def test_ising_learning_rmwggis_end_to_end(tmp_path):
    args = [
        "experiment=ising_learning_rm_smoke",
        "dataset.n_side=4",
        "dataset.n_samples=200",
        "dataset.gibbs_steps=2000",
        "task.n_iters=30",
        "task.eval_every=10",
        "task.checkpoint_every=10",
        "learner.batch_size=20",
    ]
    r = run_cli(args, tmp_path / "run").results
    assert math.isfinite(r["log_rmse"]) and r["time_per_iter"] > 0


@pytest.mark.parametrize("learner", ["rm", "rmwggis", "rmwrand"])
def test_ising_rm_experiment_composes_with_each_learner(learner):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=["experiment=ising_learning_rm", f"learner={learner}"])
    validate_node(cfg.learner, "learner")
    assert cfg.learner._target_.endswith("RatioMatchingTrainer")
    assert cfg.learner.objective == learner and cfg.learner.l1 == 0.01
    assert cfg.learner.batch_size == 100 and cfg.learner.lr == 1e-4 and cfg.learner.s == 10


# ---- the adapter: L1, projection, learning an Ising model ----------------------------------
def _exact_samples(model, n: int, gen) -> torch.Tensor:
    states = binary_states(0, 1 << model.dim, model.dim)
    with torch.no_grad():
        p = torch.softmax(model.log_prob(states).double(), 0)
    return states[torch.multinomial(p, n, replacement=True, generator=gen)]


@pytest.mark.parametrize(
    "objective,variant,replacement",
    [("rm", "advanced", False), ("rmwggis", "advanced", False), ("rmwggis", "basic", True)],
)
def test_trainer_learns_small_ising_structure(objective, variant, replacement, gen):
    """3x3 periodic lattice, sigma 0.3, 4,000 exact samples.

    The paper's objective (Eq. 3, Lyu's form E sum_i exp(2 (E(x) - E(x_-i)))) is minimised by
    a model whose conditional log-odds are the data's divided by 4 (one bit with P(1) = a:
    minimise a r^2 + (1 - a) / r^2 over the odds r -> r^4 = (1 - a) / a), so the learned
    couplings come out near sigma / 4 = 0.075, not sigma (Hyvarinen's sigmoid^2 form, Eq. 2,
    recovers sigma). Edges must stand out from non-edges.
    """
    truth = LatticeIsing(n_side=3, sigma=0.3)
    data = _exact_samples(truth, 4000, gen)
    torch.manual_seed(0)
    model = DenseIsing(dim=9, init_scale=0.01)
    tr = RatioMatchingTrainer(
        objective, variant, s=4, replacement=replacement, lr=0.005, batch_size=200, l1=0.0
    )
    tr.setup(model, None, data, gen)
    for _ in range(300):
        tr.step(model, tr.sample_batch(data, gen), gen)
    j = model.J.detach()
    edge = truth.J > 0
    off = ~edge & ~torch.eye(9, dtype=torch.bool)
    assert 0.045 < float(j[edge].mean()) < 0.1, j[edge]
    assert float(j[off].abs().mean()) < 0.03, j[off]


def test_trainer_projects_and_applies_l1(gen):
    data = _exact_samples(LatticeIsing(n_side=3, sigma=0.3), 2000, gen)
    norms = {}
    for l1 in (0.0, 1.0):
        torch.manual_seed(0)
        model = DenseIsing(dim=9, init_scale=0.01)
        with torch.no_grad():  # asymmetric, non-zero diagonal: the projection must fix it
            model.J_raw.add_(0.05 * torch.triu(torch.ones(9, 9)))
        tr = RatioMatchingTrainer("rm", lr=0.01, batch_size=100, l1=l1)
        tr.setup(model, None, data, gen)
        for _ in range(300):
            info = tr.step(model, tr.sample_batch(data, gen), gen)
        j = model.J.detach()
        assert torch.equal(j, j.T) and torch.all(j.diagonal() == 0)
        assert info["loss"] >= info["rm_loss"]
        norms[l1] = float(j.abs().sum())
    assert norms[1.0] < 0.75 * norms[0.0], norms


def test_trainer_state_round_trip(gen):
    data = (torch.rand(100, 5, generator=gen) < 0.5).float()
    model = DenseIsing(dim=5)
    tr = RatioMatchingTrainer("rmwggis", s=2, batch_size=10)
    tr.setup(model, None, data, gen)
    tr.step(model, tr.sample_batch(data, gen), gen)
    tr2 = RatioMatchingTrainer("rmwggis", s=2, batch_size=10)
    tr2.setup(model, None, data, gen)
    tr2.load_state_dict(tr.state_dict())
    assert tr2.iteration == 1 and tr2.optimizer.state_dict()["state"]


@pytest.mark.parametrize(
    "kw,key",
    [({"batch_size": 0}, "batch_size"), ({"l1": -1.0}, "l1"), ({"objective": "cd"}, "objective")],
)
def test_trainer_config_errors(kw, key):
    with pytest.raises(ConfigError) as e:
        RatioMatchingTrainer(**kw)
    assert e.value.key == key


def test_trainer_s_larger_than_dim_without_replacement(gen):
    tr = RatioMatchingTrainer("rmwggis", s=10, replacement=False)
    with pytest.raises(ConfigError) as e:
        tr.setup(DenseIsing(dim=4), None, torch.zeros(3, 4), gen)
    assert e.value.key == "s"


def test_rm_objective_metric_is_eq3_mean():
    """The task's Table 4 number is ratio_matching_loss (mean over points of the d-term sum)."""
    torch.manual_seed(0)
    m = MLPEnergy(dim=4, hidden_dim=4, num_layers=1)
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
