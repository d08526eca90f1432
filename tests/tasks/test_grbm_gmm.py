"""grbm_gmm (GRBM Fig. 1): the grid and mode metrics, an end-to-end run with its figure and the
Fig. 1 assembly, and kill/resume through the real entry point."""

import math

import pytest
import torch

from ebmlab.data.gmm_toy import gmm_params, gmm_toy
from ebmlab.metrics.density_2d import grid_metrics, mode_stats
from ebmlab.plotting.grbm_gmm import figure
from tests.helpers import from_conf, run_cli


def test_mode_stats_known_answers():
    iso, aniso = gmm_params("iso"), gmm_params("aniso")
    means = torch.tensor([[-5.0, -5.0], [5.0, -5.0], [0.0, 5.0]])
    assert torch.equal(iso[1], means)
    exact = torch.cat([means[0].expand(33, 2), means[1].expand(33, 2), means[2].expand(34, 2)])
    assert mode_stats(exact, *iso, 3.0) == {"in_mode": 1.0, "modes_covered": 3, "mode_tv": 0.0}
    one = mode_stats(means[2].expand(50, 2), *iso, 3.0)
    assert one["modes_covered"] == 1 and one["mode_tv"] == pytest.approx(0.66)
    far = mode_stats(torch.full((10, 2), 50.0), *aniso, 3.0)
    assert far == {"in_mode": 0.0, "modes_covered": 0, "mode_tv": 1.0}
    # a point 2 std away along the narrow aniso axis of component 0 (std 0.5 in y) is inside
    assert mode_stats(torch.tensor([[-5.0, -4.0]]), *aniso, 3.0)["in_mode"] == 1.0
    assert mode_stats(torch.tensor([[-5.0, -3.0]]), *aniso, 3.0)["in_mode"] == 0.0
    assert mode_stats(torch.tensor([[-5.0, -3.0]]), *aniso, 4.5)["in_mode"] == 1.0


def test_grid_kl_matches_monte_carlo_for_a_gaussian_grbm():
    """With W = 0 the GRBM is N(mu, diag(var)); KL(p_true || model) from the grid must match a
    Monte Carlo estimate from 200,000 true samples within 4 standard errors."""
    data = from_conf("dataset/gmm_aniso")
    model = from_conf("model/grbm", n_visible=2, n_hidden=3)
    with torch.no_grad():
        model.W.zero_()
        model.b.fill_(0.3)
        model.mu.copy_(torch.tensor([0.5, -1.0]))
        model.log_var.copy_(torch.log(torch.tensor([20.0, 30.0])))
    test = data.fresh(1000, data.seed + 1)
    ev = grid_metrics(model, data.log_prob, test, 12.0, 241)
    x = gmm_toy("aniso", 200_000, torch.Generator().manual_seed(0)).double()
    var = model.var.double()
    log_q = (
        -0.5 * ((x - model.mu.double()) ** 2 / var).sum(1)
        - 0.5 * torch.log(var).sum()
        - math.log(2 * math.pi)
    )
    diff = data.log_prob(x) - log_q
    se = float(diff.detach().std() / math.sqrt(x.shape[0]))
    assert ev["kl"] == pytest.approx(float(diff.detach().mean()), abs=4 * se + 1e-3)
    with torch.no_grad():
        assert ev["log_z"] == pytest.approx(float(model.log_partition()), abs=1e-3)
        nll = -(model.log_prob(test).double() - model.log_partition().double()).mean()
    assert ev["test_nll"] == pytest.approx(float(nll), abs=1e-3)


# ---------------------------------------------------------------------- end-to-end runs
TINY_GMM = [
    "experiment=grbm/fig1_gmm",
    "scale=smoke",
    "run.n_steps=2",
    "learner.batch_size=250",
    "learner.cd_steps=5",
    "run.eval_every=1",
    "run.checkpoint_every=1",
    "task.n_samples=200",
    "task.grid_points=41",
    "model.n_hidden=16",
]


def _gmm_run(run, env=None):
    r = run_cli(TINY_GMM, run, env=env).results
    for k in ("kl", "test_nll", "sample_in_mode", "sample_modes_covered", "sample_mode_tv",
              "shown_in_mode", "shown_modes_covered"):  # fmt: skip
        assert math.isfinite(r[k]), k
    assert 0.0 <= r["accept_rate"] <= 1.0 and r["sample_steps"] == 5 and r["n_epochs"] == 2
    assert (run / "figures" / "gmm.png").is_file() and (run / "gmm_arrays.pt").is_file()
    return r


def test_gmm_run_and_fig1_assembly(tmp_path):
    _gmm_run(tmp_path / "gmm")
    arrays = torch.load(tmp_path / "gmm" / "gmm_arrays.pt", weights_only=True)
    assert arrays["label"] == "gibbs_langevin_w_adjust" and arrays["samples"].shape == (200, 2)
    assert arrays["data"].shape == (1000, 2) and arrays["neg_energy"].shape == (41, 41)
    assert figure([tmp_path], tmp_path / "fig1.png").is_file()


@pytest.mark.slow
def test_gmm_resume_after_kill_gives_the_same_numbers(tmp_path):
    """Killed after epoch 1 (mid-run) or 2 (the last: the rerun goes straight to finish)."""
    r = _gmm_run(tmp_path / "gmm")
    r.pop("seconds")
    for at in (1, 2):
        run2 = tmp_path / f"gmm_killed_{at}"
        env = {"EBMLAB_FAULT_KILL_AT_STEP": str(at)}
        killed = run_cli(TINY_GMM, run2, env=env, check=False)
        assert killed.returncode != 0 and not (run2 / "results.json").exists()
        resumed = _gmm_run(run2)
        resumed.pop("seconds")
        assert resumed == r, at
