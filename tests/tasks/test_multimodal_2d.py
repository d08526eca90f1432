"""multimodal_2d task (ACS Fig. 1): the toy target's modes and cells, the task's config
checks, a tiny sweep with its figure, and kill/resume through the real entry point."""

from __future__ import annotations

import json
import math

import pytest
import torch

from ebmlab.errors import ConfigError
from ebmlab.metrics.mode_coverage import grid_cells, mode_masses
from ebmlab.report.figures import FIGURES
from ebmlab.runs.rundirs import collect
from tests.helpers import check_before_compute, from_conf, run_cli

EXP = ["experiment=acs/fig1_toy", "scale=smoke"]
TINY = ["task.n_chains=8", "run.n_steps=60", "run.eval_every=20", "run.checkpoint_every=20"]

# ---------------------------------------------------------------------------------- toy target


def test_toy_has_25_modes_75_apart_on_the_grid():
    m = from_conf("model/multimodal_2d")
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
    m = from_conf("model/multimodal_2d", form=form)
    lp = m.grid_log_probs()
    assert torch.isclose(lp.exp().sum(), torch.tensor(1.0, dtype=lp.dtype))
    pad = torch.nn.functional.pad(lp[None, None], (1, 1, 1, 1), value=-math.inf)[0, 0]
    nbr = torch.stack([pad[1:-1, :-2], pad[1:-1, 2:], pad[:-2, 1:-1], pad[2:, 1:-1]]).amax(0)
    peaks = torch.nonzero(lp > nbr).float()
    assert {tuple(r) for r in peaks.tolist()} == {tuple(r) for r in m.modes.tolist()}
    cells, dist = grid_cells(m)
    masses = mode_masses(cells, m.n_modes, lp.exp())
    assert torch.allclose(masses, torch.full_like(masses, 1 / 25), atol=1e-3)
    centres = (m.modes[:, 0] * m.n_states + m.modes[:, 1]).long()  # row-major grid index
    assert torch.equal(cells[centres], torch.arange(25)) and bool((dist[centres] == 0).all())
    x = torch.tensor([[10.0, 400.0], [80.0, 151.0], [300.0, 226.0]])
    _, g = m.log_prob_and_grad(x)
    xg = x.clone().requires_grad_(True)
    (ga,) = torch.autograd.grad(m.log_prob(xg).sum(), xg)
    torch.testing.assert_close(g, ga, rtol=1e-4, atol=1e-6)


def test_toy_rejects_bad_config():
    with pytest.raises(ConfigError, match="form"):
        from_conf("model/multimodal_2d", form="squared")
    with pytest.raises(ConfigError, match="variance"):
        from_conf("model/multimodal_2d", variance=0.0)


def test_task_rejects_bad_config():
    toy = ["experiment=acs/fig1_toy", "scale=smoke"]
    with pytest.raises(ConfigError, match=r"task.burn_in: must be < run.n_steps=100"):
        check_before_compute([*toy, "run.n_steps=100", "task.burn_in=100"])
    with pytest.raises(ConfigError, match="init"):
        from_conf("task/multimodal_2d", init="corner")
    with pytest.raises(ConfigError, match="run.eval_every: must be an integer >= 1"):
        check_before_compute([*toy, "run.eval_every=0"])


# ---------------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_multimodal_2d_end_to_end_and_figure(tmp_path):
    sweep = tmp_path / "sweep"
    for sampler in ("dmala", "acs"):
        run_cli([*EXP, f"sampler={sampler}", *TINY], sweep, multirun=True)
    runs = sorted(sweep.rglob("results.json"))
    assert len(runs) == 2
    for res in runs:
        m = json.loads(res.read_text())["metrics"]
        assert 1 <= m["modes_visited"] <= 25 and 0 <= m["mode_tv"] <= 1 and 0 <= m["tv"] <= 1
        visits = torch.load(res.parent / "visits.pt", weights_only=True)
        assert visits.shape == (451, 451) and float(visits.sum()) == pytest.approx(1.0)
        rows = [json.loads(x) for x in (res.parent / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == [20, 40, 60] and rows[-1]["mode_tv"] == m["mode_tv"]
    out = tmp_path / "fig.png"
    FIGURES["multimodal_2d"](collect(sweep), out, "ACS Fig. 1")
    assert out.is_file() and out.stat().st_size > 1000


@pytest.mark.slow
def test_multimodal_2d_resumes_bit_for_bit_after_a_kill(tmp_path):
    args = [*EXP, "sampler=acs", *TINY]
    full = run_cli(args, tmp_path / "full").results
    killed = run_cli(args, tmp_path / "kill", env={"EBMLAB_FAULT_KILL_AT_STEP": "30"}, check=False)
    assert killed.returncode != 0 and killed.results is None
    resumed = run_cli(args, tmp_path / "kill").results
    assert {k: v for k, v in resumed.items() if k != "seconds"} == {
        k: v for k, v in full.items() if k != "seconds"
    }
    a = torch.load(tmp_path / "full" / "visits.pt", weights_only=True)
    assert torch.equal(a, torch.load(tmp_path / "kill" / "visits.pt", weights_only=True))
