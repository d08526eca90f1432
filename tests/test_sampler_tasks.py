"""sampler_ess (AB ESS tables) and multimodal_2d (ACS Fig. 1) tasks: the toy target's modes,
the ESS_n normalisation on a known case, acceptance tuning, and tiny end-to-end runs through
the real entry point."""

from __future__ import annotations

import math

import pytest
import torch

from ebmlab.errors import ConfigError
from ebmlab.metrics.ess import ess_1d
from ebmlab.models.multimodal_grid import MultimodalGrid
from ebmlab.tasks.multimodal_2d import mode_masses
from ebmlab.tasks.sampler_ess import AcceptanceTuner, SamplerESS, ess_per_queries
from tests.helpers import run_cli

# ---------------------------------------------------------------------------------- toy target


def test_toy_has_25_modes_75_apart_on_the_grid():
    m = MultimodalGrid()
    assert m.n_modes == 25 and m.dim == 2 and m.state_kind == "ordinal"
    assert m.max_value == 450 and m.n_states == 451  # App. D.1: (sqrt(25) + 1) * 75
    coords = sorted({float(c) for c in m.modes.reshape(-1)})
    assert coords == [75.0, 150.0, 225.0, 300.0, 375.0]
    assert {tuple(r) for r in m.modes.tolist()} == {
        (75.0 * (i + 1), 75.0 * (j + 1)) for i in range(5) for j in range(5)
    }


@pytest.mark.parametrize("form", ["paper", "code"])
def test_toy_modes_are_the_local_maxima_and_equally_likely(form):
    """Every mode centre is a strict local maximum of f on the lattice; by symmetry the 25
    cells carry (nearly) equal mass; the analytic gradient matches autograd."""
    m = MultimodalGrid(form=form)
    lp = m.grid_log_probs()
    assert torch.isclose(lp.exp().sum(), torch.tensor(1.0, dtype=lp.dtype))
    pad = torch.nn.functional.pad(lp[None, None], (1, 1, 1, 1), value=-math.inf)[0, 0]
    nbr = torch.stack([pad[1:-1, :-2], pad[1:-1, 2:], pad[:-2, 1:-1], pad[2:, 1:-1]]).amax(0)
    peaks = torch.nonzero(lp > nbr).float()
    assert {tuple(r) for r in peaks.tolist()} == {tuple(r) for r in m.modes.tolist()}
    masses = mode_masses(m, lp.exp())
    assert torch.allclose(masses, torch.full_like(masses, 1 / 25), atol=1e-3)
    x = torch.tensor([[10.0, 400.0], [80.0, 151.0], [300.0, 226.0]])
    _, g = m.log_prob_and_grad(x)
    xg = x.clone().requires_grad_(True)
    (ga,) = torch.autograd.grad(m.log_prob(xg).sum(), xg)
    torch.testing.assert_close(g, ga, rtol=1e-4, atol=1e-6)


def test_toy_rejects_bad_config():
    with pytest.raises(ConfigError, match="form"):
        MultimodalGrid(form="squared")
    with pytest.raises(ConfigError, match="variance"):
        MultimodalGrid(variance=0.0)


# ---------------------------------------------------------------------------------- ESS_n


def test_ess_n_on_ar1_chains_matches_the_analytic_value(gen):
    """AR(1) with coefficient phi has ESS = n (1 - phi) / (1 + phi); a sampler costing q
    queries per step then has ESS_n = ESS * 10,000 / (q n). Monte Carlo band from 64 chains."""
    n, chains, phi, q = 20000, 64, 0.6, 3
    e = torch.randn(n, chains, generator=gen, dtype=torch.float64)
    x = torch.zeros_like(e)
    x[0] = e[0] / math.sqrt(1 - phi**2)
    for t in range(1, n):
        x[t] = phi * x[t - 1] + e[t]
    ess = ess_1d(x)
    expected = n * (1 - phi) / (1 + phi)
    got = ess_per_queries(float(ess.mean()), q * n)
    want = expected * 10_000 / (q * n)
    # per-chain relative sd of the ESS estimate is about 5% here; the mean over 64 chains 1%
    rel_sd = float(ess.std() / ess.mean()) / math.sqrt(chains)
    assert abs(got - want) / want < 5 * rel_sd + 0.01, (got, want)
    assert want == pytest.approx(10_000 * 0.25 / 3)
    with pytest.raises(ValueError):
        ess_per_queries(1.0, 0)


def test_acceptance_tuner_moves_towards_the_target():
    class S:
        step_size = 1.0

    s = S()
    tuner = AcceptanceTuner(s, "step_size", 0.574)
    tuner.update(0.9)  # accepting too much -> bigger steps
    assert s.step_size > 1.0
    big = s.step_size
    tuner.update(0.1)
    assert s.step_size < big
    d = tuner.state_dict()
    s2 = S()
    t2 = AcceptanceTuner(s2, "step_size", 0.574)
    t2.load_state_dict(d)
    assert s2.step_size == s.step_size and t2.t == 2


def test_sampler_ess_validates_its_config():
    with pytest.raises(ConfigError, match="burn_in"):
        SamplerESS(n_steps=100, burn_in=98)
    with pytest.raises(ConfigError, match="tune_accept"):
        SamplerESS(tune_accept=1.5)
    with pytest.raises(ConfigError, match="tune_accept"):
        SamplerESS(n_steps=100, burn_in=0, tune_accept=0.5)


# ---------------------------------------------------------------------------------- end to end

ESS_TINY = ["task.n_chains=4", "task.n_steps=300", "task.burn_in=100", "task.log_every=50"]


def test_sampler_ess_end_to_end_dmala_tuned_on_small_ising(tmp_path):
    """LB baseline = DMALA tuned to 0.574 during burn-in: the step size moves, the reported
    counts are one query per step, ESS_n = ESS * 10,000 / (queries per step * post steps)."""
    p = run_cli(
        [
            "experiment=ab_ess_smoke",
            "model.n_side=4",
            "sampler=dmala",
            "task.tune_accept=0.574",
            *ESS_TINY,
        ],
        tmp_path / "lb",
    )
    r = p.results
    assert r["step_size"] != pytest.approx(0.2)
    assert r["queries_per_step"] == 1.0 and r["grad_evals_per_step"] == 1.0
    assert r["ess_n"] == pytest.approx(r["ess"] * 10_000 / (1.0 * 200), rel=1e-6)
    assert 0 < r["ess"] <= 200 * math.log10(200)
    assert 0 <= r["accept_rate"] <= 1 and r["ess_t"] > 0
    assert (tmp_path / "lb" / "metrics.jsonl").is_file()


@pytest.mark.slow
def test_sampler_ess_end_to_end_ab_and_gibbs_on_ordinal_target(tmp_path):
    """AB-1st adapts only within the task's burn-in (sync_burn_in); Gibbs on {0..20}^d costs
    S - 1 = 20 queries per step."""
    common = ["experiment=ab_ess_gaussian_smoke", "model.dim=6", *ESS_TINY]
    ab = run_cli([*common, "sampler=ab_1st", "sampler.n_probe=10"], tmp_path / "ab").results
    assert ab["queries_per_step"] == 1.0 and ab["sigma"] > 0 and 0.5 <= ab["alpha"] < 1
    gibbs = run_cli([*common, "sampler=gibbs"], tmp_path / "gibbs").results
    assert gibbs["queries_per_step"] == 20.0
    assert gibbs["ess_n"] == pytest.approx(gibbs["ess"] * 10_000 / (20.0 * 200), rel=1e-6)


def test_sampler_ess_rejects_a_learnable_model(tmp_path):
    p = run_cli(
        ["task=sampler_ess", "model=ising", "sampler=gibbs", *ESS_TINY],
        tmp_path / "bad",
        check=False,
    )
    assert p.returncode == 2 and "fixed target" in p.stderr


@pytest.mark.slow
def test_multimodal_2d_end_to_end_and_figure(tmp_path):
    sweep = tmp_path / "sweep"
    tiny = ["task.n_chains=8", "task.n_steps=60", "task.log_every=20"]
    for exp in ("acs_toy_dmala_smoke", "acs_toy_acs_smoke"):
        sampler = exp.split("_")[2]
        run_cli([f"experiment={exp}", f"sampler={sampler}", *tiny], sweep, multirun=True)
    runs = sorted(sweep.rglob("results.json"))
    assert len(runs) == 2
    import json

    for res in runs:
        m = json.loads(res.read_text())["metrics"]
        assert 1 <= m["modes_visited"] <= 25 and 0 <= m["mode_tv"] <= 1 and 0 <= m["tv"] <= 1
        visits = torch.load(res.parent / "visits.pt", weights_only=True)
        assert visits.shape == (451, 451) and float(visits.sum()) == pytest.approx(1.0)
    from ebmlab.tasks.multimodal_2d import main

    out = tmp_path / "fig.png"
    main(["figure", str(sweep), "--out", str(out)])
    assert out.is_file() and out.stat().st_size > 1000


@pytest.mark.slow
def test_sampler_ess_resumes_bit_for_bit_after_a_kill(tmp_path):
    args = [
        "experiment=ab_ess_smoke",
        "model.n_side=4",
        "sampler=dmala",
        "task.tune_accept=0.574",
        "task.checkpoint_every=100",
        *ESS_TINY,
    ]
    full = run_cli(args, tmp_path / "full").results
    env = {"EBMLAB_FAULT_KILL_AT_STEP": "150"}
    killed = run_cli(args, tmp_path / "kill", env=env, check=False)
    assert killed.returncode != 0 and killed.results is None
    resumed = run_cli(args, tmp_path / "kill").results
    for k in ("ess", "ess_n", "accept_rate", "step_size", "hamming_mean"):
        assert resumed[k] == full[k], k
