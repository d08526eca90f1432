"""scripts/investigations/ab_max_diagonal.py: lowering D within AB-max's optimum keeps W + D PSD
and lambda_max(W + D) where it was, leaves every d_i at its smallest PSD value, and reaches the
unique optimum D = -diag(W) when W is diagonal; the report reads a table run's checkpoint."""

import json

import pytest
import torch

from ebmlab.samplers.ab.sdp import solve_diagonal
from ebmlab.utils.workspace import Workspace
from tests.investigations.script import load_script

pytestmark = pytest.mark.usefixtures("one_thread")


def sparse_w(d=20, seed=0):
    """Minus a cycle precision Lambda M Lambda with a diagonal from 1 to 50, as the AB target."""
    g = torch.Generator().manual_seed(seed)
    M = torch.eye(d, dtype=torch.float64)
    off = 0.2 * torch.randn(d, generator=g, dtype=torch.float64)
    for i in range(d):
        M[i, (i + 1) % d] = M[(i + 1) % d, i] = off[i]
    lam = torch.linspace(1.0, 50.0, d, dtype=torch.float64).sqrt()
    return -(lam[:, None] * M * lam[None, :])


def test_diagonal_w_reaches_the_unique_optimum():
    script = load_script("ab_max_diagonal")
    a = torch.tensor([1.0, 4.0, 9.0, 25.0], dtype=torch.float64)
    low = script.lower_within_optimum(-torch.diag(a), a + 5.0)
    assert torch.allclose(low, a, atol=1e-6)


def test_lowered_d_stays_optimal_and_is_minimal():
    script = load_script("ab_max_diagonal")
    W = sparse_w()
    sol = solve_diagonal(W, "max", "auto")
    low = script.lower_within_optimum(W, sol.d)
    eig = torch.linalg.eigvalsh(W + torch.diag(low))
    assert eig[0] >= -1e-8
    assert eig[-1] <= sol.lambda_max + 1e-8  # still min-max optimal
    assert low.sum() < sol.d.sum()
    assert low[0] < 0.5 * sol.d[0]  # the softest coordinate: the optimum leaves it free
    for i in range(len(low)):  # no coordinate can go lower
        trial = low.clone()
        trial[i] -= 1e-3
        assert torch.linalg.eigvalsh(W + torch.diag(trial))[0] < 0


def test_not_psd_start_is_refused():
    script = load_script("ab_max_diagonal")
    with pytest.raises(ValueError, match="not PSD"):
        script.lower_within_optimum(-torch.eye(3, dtype=torch.float64), torch.zeros(3))


def test_report_reads_a_table_run(tmp_path, monkeypatch):
    script = load_script("ab_max_diagonal")
    W = sparse_w()
    d = solve_diagonal(W, "max", "auto").d
    run = tmp_path / "ab_target=sparse_high,sampler=ab_max,seed=0,run.n_steps=40000"
    Workspace(run).save({"task": {"sampler": {"trick": {"W": W, "D": d}}}})
    metrics = {"ess_n": 155.0, "jump": 0.12, "accept_rate": 0.85, "sigma": 2.0, "alpha": 0.5}
    (run / "results.json").write_text(json.dumps({"metrics": metrics}))
    monkeypatch.setattr(script, "TABLE_RUNS", tmp_path)
    (row,) = script.investigate(["sparse_high"])
    soft = int(W.diag().abs().argmin())
    assert row["softest_d"] == pytest.approx(float(d[soft]))
    assert row["softest_proposal_precision"] == pytest.approx(0.5 * float(d[soft]) + 0.5)
    assert row["lowered"]["trace_d"] < row["trace_d"]
    text = script.summary([row])
    assert "ab_max: D lowered within the optimum" in text and "| 155.0 |" in text
