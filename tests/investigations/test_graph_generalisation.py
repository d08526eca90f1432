"""scripts/investigations/graph_generalisation.py: a graph energy's objective on the training
and the test graphs, and its generated graphs scored against both, per checkpoint."""

import json
import math
from types import SimpleNamespace

import pytest
import torch

from tests.exactness import DenseIsing, frustrated_ising
from tests.helpers import run_cli
from tests.investigations.script import load_script
from tests.tasks.test_graph_generation import FIXTURE, TINY

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("objective", ["hyvarinen", "eq3"])
def test_the_split_objective_is_the_exact_one_on_each_split(objective):
    """Independent bits with log p(x) = -a/2 sum(2x - 1): the all-zeros training graph is
    favoured, the all-ones test graph is not. Each bit flip changes log p by a, so the exact
    objectives are known: Hyvarinen d * sigmoid(-+a)^2, Eq. (3) d * exp(-+2a); the energy gap is
    E(ones) - E(zeros) = a d."""
    d, a = 6, 1.5
    model = DenseIsing(
        torch.zeros(d, d, dtype=torch.float64), torch.full((d,), -a / 2, dtype=torch.float64)
    )
    data = SimpleNamespace(train_x=torch.zeros(3, d), test_x=torch.ones(2, d))
    run = {"config": {"learner": {"objective": objective}}}
    out = load_script("graph_generalisation").objective_split(run, model, data)
    if objective == "hyvarinen":
        train, test = d / (1 + math.exp(a)) ** 2, d / (1 + math.exp(-a)) ** 2
    else:
        train, test = d * math.exp(-2 * a), d * math.exp(2 * a)
    assert out["loss_train"] == pytest.approx(train)
    assert out["loss_test"] == pytest.approx(test)
    assert out["energy_gap"] == pytest.approx(a * d)


def test_the_proposal_covers_a_pairwise_model_and_its_estimate_is_the_objective():
    """On a pairwise Ising model the first-order flip deltas are exact (correlation 1), so the
    Hyvarinen proposal n(i) prop. to t(delta_hat_i) is proportional to the terms themselves:
    no rare neighbour carries any of the objective, and the basic estimate is the objective."""
    model = frustrated_ising(8, seed=3)
    data = SimpleNamespace(
        train_x=(torch.rand(40, 8, generator=torch.Generator().manual_seed(1)) < 0.5).float(),
        test_x=torch.ones(2, 8),
    )
    lr = {
        "objective": "hyvarinen",
        "estimator": "ggis",
        "s": 3,
        "variant": "basic",
        "replacement": True,
        "proposal": "value",
    }
    out = load_script("graph_generalisation").objective_split(
        {"config": {"learner": lr}}, model, data
    )
    assert out["delta_corr"] == pytest.approx(1.0)
    assert out["missed_share"] < 8 * 1e-4 / 3  # q_i prop. to t_i: rare terms are tiny ones
    assert out["estimate"] == pytest.approx(out["loss_train"], rel=1e-9)


def test_a_proposal_blind_to_the_large_terms_misses_them(monkeypatch):
    """First-order deltas of the wrong sign on all but one bit send the proposal away from the
    terms that carry the objective: from the all-zeros state every flip raises log p by 2 h_i
    (h_i from 4 to 9), so each Hyvarinen term is about 1, and the proposal draws all but the
    first with probability about exp(-8) or less: (d - 1) / d of the objective is missed."""
    import ebmlab.learning.ratio_matching as rm

    script = load_script("graph_generalisation")
    d = 6
    h = torch.linspace(4.0, 9.0, d, dtype=torch.float64)
    model = DenseIsing(torch.zeros(d, d, dtype=torch.float64), h)
    x = torch.zeros(5, d, dtype=torch.float64)
    lr = {
        "objective": "hyvarinen",
        "estimator": "ggis",
        "s": 2,
        "variant": "basic",
        "replacement": True,
        "proposal": "value",
    }
    honest = script.proposal_coverage(lr, model, x)
    assert honest["missed_share"] == 0.0 and honest["delta_corr"] == pytest.approx(1.0)

    real = rm.first_order_deltas

    def wrong_way(m, xx):
        e, dh = real(m, xx)
        return e, torch.cat([dh[:, :1], -dh[:, 1:]], dim=1)

    monkeypatch.setattr(rm, "first_order_deltas", wrong_way)
    monkeypatch.setattr(script, "first_order_deltas", wrong_way)
    blind = script.proposal_coverage(lr, model, x)
    t = torch.sigmoid(2 * h) ** 2
    assert blind["missed_share"] == pytest.approx(float(t[1:].sum() / t.sum()), rel=1e-6)
    assert blind["delta_corr"] < 0
    assert blind["estimate"] < 0.5 * float(t.sum())  # the typical estimate misses them


def test_rows_per_checkpoint_sweeps_and_seed(tmp_path, monkeypatch):
    """Each (checkpoint, sweeps, seed) gets a row named by the checkpoint's iteration; the
    objective is the checkpoint's (the same for every draw of it), the draws differ by seed;
    rows already there are kept on a second call."""
    run_dir = tmp_path / "run"
    run_cli(TINY + [f"dataset.data_dir={FIXTURE}", "dataset.n_test=1"], run_dir)
    script = load_script("graph_generalisation")
    monkeypatch.setattr(script, "OUT", tmp_path / "out")
    ck = run_dir / "checkpoints"
    argv = [
        str(run_dir),
        "--checkpoints",
        str(min(ck.glob("last.*.pt"))),  # the generation before the last (docs/runs.md)
        str(ck / "last.pt"),
        "--seeds",
        "0",
        "1",
        "--sweeps",
        "1",
        "3",
        "--samples",
        "16",
    ]
    script.main(argv)
    done = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(done) == 2 * 2 * 2
    assert sorted({r["step"] for r in done.values()}) == [2, 3]
    assert {(r["sweeps"], r["seed"]) for r in done.values()} == {(1, 0), (1, 1), (3, 0), (3, 1)}
    for step in (2, 3):
        rows = [r for r in done.values() if r["step"] == step]
        assert len({(r["loss_train"], r["loss_test"], r["energy_gap"]) for r in rows}) == 1
        assert all(math.isfinite(r["loss_test"]) and r["loss_train"] >= 0 for r in rows)
    assert any("iteration 2 of 3" in k for k in done) and any("3 iterations" in k for k in done)
    draws = {(r["edges"], r["avg"]) for r in done.values() if r["step"] == 3 and r["sweeps"] == 3}
    assert len(draws) == 2
    assert all(r["avg"] >= 0 and r["train_avg"] >= 0 for r in done.values())
    assert all(math.isfinite(r["energy_gen"]) for r in done.values())
    assert (tmp_path / "out" / "generalisation.png").stat().st_size > 0
    assert "| avg vs train |" in (tmp_path / "out" / "table.md").read_text()
    script.main(argv)
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == done
    with pytest.raises(SystemExit, match="--samples must be"):
        script.main([str(run_dir), "--samples", "1"])
