"""Tests for the AB sampler's SDP for the diagonal D (ebmlab.samplers.ab.sdp)."""

import importlib.util
import math

import pytest
import torch

from ebmlab.errors import ConfigError
from ebmlab.samplers.ab import sdp as ab_sdp
from ebmlab.samplers.ab.sdp import solve_diagonal


def sym(n, seed, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(n, n, generator=g, dtype=torch.float64)
    return (A + A.T) / math.sqrt(2 * n) + shift * torch.eye(n, dtype=torch.float64)


def assert_certified(W, r):
    lam = torch.linalg.eigvalsh(W.double() + torch.diag(r.d))
    assert float(lam[0]) >= -1e-8
    assert abs(float(lam[0]) - r.lambda_min) < 1e-8
    assert bool((r.d >= 0).all())


@pytest.mark.parametrize("n,seed,shift", [(30, 0, 0.0), (80, 1, 0.0), (60, 2, -1.0), (50, 3, 0.8)])
def test_trace_certified_and_gap(n, seed, shift):
    W = sym(n, seed, shift)
    r = solve_diagonal(W, "trace", tol=1e-6)
    assert_certified(W, r)
    assert r.objective == pytest.approx(float(r.d.sum()), rel=1e-12)
    assert r.lower_bound is not None and r.lower_bound <= r.objective + 1e-9
    assert r.rel_gap <= 1e-6
    # never worse than the isotropic shift (a feasible point of the same problem)
    assert r.objective <= solve_diagonal(W, "shift").objective * (1 + 1e-9)


def test_trace_matches_barrier_method():
    """Burer-Monteiro and the interior-point method are independent; both certify."""
    W = sym(40, 5)
    bm = solve_diagonal(W, "trace", tol=1e-7)
    d, lb, _ = ab_sdp._barrier(W, "trace", 1e-9, 500)
    ref = float(d.sum())
    assert lb <= ref and (ref - lb) <= 1e-8 * ref
    assert bm.objective == pytest.approx(ref, rel=2e-7)
    assert torch.allclose(bm.d, d, atol=1e-3 * float(d.abs().max()))


def test_trace_known_answers():
    # diagonal W: D* = max(0, -W_ii) (the paper's motivating example, W11 = -100, Wjj = -1)
    W = -torch.diag(torch.tensor([100.0] + [1.0] * 9, dtype=torch.float64))
    r = solve_diagonal(W, "trace")
    assert torch.allclose(r.d, -W.diagonal(), atol=1e-3)
    assert solve_diagonal(W, "shift").objective == pytest.approx(1000.0)
    # PSD W needs no D
    P = sym(20, 1) @ sym(20, 1) + 0.1 * torch.eye(20, dtype=torch.float64)
    r = solve_diagonal(P, "trace")
    assert r.objective <= 1e-4 * float(P.diagonal().sum())
    assert_certified(P, r)
    # W = adjacency of the complete graph K_8 = J - I: D* = I (W + I = J is PSD, and the
    # dual point X = (n I - J) / (n - 1) gives -<W, X> = n: MaxCut of K_n)
    J = torch.ones(8, 8, dtype=torch.float64) - torch.eye(8, dtype=torch.float64)
    r = solve_diagonal(J, "trace", tol=1e-8)
    assert r.objective == pytest.approx(8.0, rel=1e-6)
    assert torch.allclose(r.d, torch.ones(8, dtype=torch.float64), atol=1e-4)


def test_max_certified_and_optimal():
    W = sym(40, 7)
    r = solve_diagonal(W, "max", tol=1e-7)
    assert_certified(W, r)
    lam = torch.linalg.eigvalsh(W + torch.diag(r.d))
    assert r.objective == pytest.approx(float(lam[-1]), rel=1e-9)
    assert r.lower_bound <= r.objective and r.rel_gap <= 1e-7
    # minimising the largest eigenvalue beats the shift choice on that criterion
    assert r.objective <= solve_diagonal(W, "shift").lambda_max + 1e-9
    # diagonal W: any D with 0 <= W + D <= lam I; optimum lam* = 0 (D = -W) when W <= 0
    Wd = -torch.diag(torch.tensor([3.0, 1.0, 2.0], dtype=torch.float64))
    r = solve_diagonal(Wd, "max", tol=1e-8)
    assert r.objective == pytest.approx(0.0, abs=1e-6)


def test_shift_closed_form():
    W = sym(25, 4)
    lmin = float(torch.linalg.eigvalsh(W)[0])
    r = solve_diagonal(W, "shift", eps=1e-3)
    assert torch.allclose(r.d, torch.full((25,), max(1e-3, -lmin), dtype=torch.float64))
    assert r.rel_gap is None and r.lower_bound is None and r.shift == 0.0
    pd = sym(25, 4, shift=10.0)  # positive definite: floor eps
    assert torch.allclose(solve_diagonal(pd, "shift", eps=1e-3).d, torch.full((25,), 1e-3).double())


def test_certificate_shifts_infeasible_d(monkeypatch):
    """Whatever a solver returns, the result is shifted until W + D is PSD."""
    W = sym(20, 8)
    monkeypatch.setattr(ab_sdp, "_trace_bm", lambda *a: (torch.zeros(20).double(), None, 1, "x"))
    r = solve_diagonal(W, "trace")
    lmin = float(torch.linalg.eigvalsh(W)[0])
    assert r.shift == pytest.approx(-lmin, rel=1e-9)
    assert_certified(W, r)


def test_errors():
    W = sym(5, 0)
    with pytest.raises(ConfigError, match="sdp.method"):
        solve_diagonal(W, method="min")
    with pytest.raises(ConfigError, match="sdp.solver"):
        solve_diagonal(W, solver="clarabel")
    with pytest.raises(ConfigError, match="sdp.tol"):
        solve_diagonal(W, tol=0.0)
    with pytest.raises(ConfigError, match="sdp.W"):
        solve_diagonal(torch.zeros(3, 4))


def test_mosek_without_licence_message(monkeypatch, tmp_path):
    monkeypatch.delenv("MOSEK_LICENSE_FILE", raising=False)
    monkeypatch.delenv("MOSEKLM_LICENSE_FILE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: object() if name == "mosek" else real(name, *a),
    )
    with pytest.raises(RuntimeError, match="MOSEK_LICENSE_FILE") as e:
        solve_diagonal(sym(5, 0), solver="mosek")
    assert "mosek.lic" in str(e.value) and "sdp.solver=auto" in str(e.value)
    # with a licence file present the check passes (the subprocess is not started here)
    (tmp_path / "mosek").mkdir()
    (tmp_path / "mosek" / "mosek.lic").write_text("x")
    assert ab_sdp.mosek_licence() == str(tmp_path / "mosek" / "mosek.lic")


def test_mosek_not_installed_message(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mosek" else real(name, *a)
    )
    with pytest.raises(RuntimeError, match="pip install mosek"):
        solve_diagonal(sym(5, 0), solver="mosek")


def test_external_crash_does_not_kill_caller(monkeypatch, tmp_path):
    """A solver that aborts its process (as Clarabel does at d=400) surfaces as an error."""
    W = sym(5, 0)
    W[0, 0] = float("nan")  # rejected before any subprocess
    with pytest.raises(ValueError, match="non-finite"):
        solve_diagonal(W, solver="scs")
    monkeypatch.setattr(ab_sdp, "_check_external", lambda solver: None)
    aborting = tmp_path / "python"
    aborting.write_text("#!/bin/sh\nkill -ABRT $$\n")
    aborting.chmod(0o755)
    monkeypatch.setattr(ab_sdp.sys, "executable", str(aborting))
    with pytest.raises(RuntimeError, match="subprocess"):
        solve_diagonal(sym(5, 0), solver="scs")


@pytest.mark.skipif(importlib.util.find_spec("scs") is None, reason="scs not installed")
def test_matches_scs_reference():
    W = sym(50, 11)
    ours = solve_diagonal(W, "trace", tol=1e-5)
    ref = solve_diagonal(W, "trace", solver="scs", tol=1e-6)
    assert ref.solver == "scs"
    assert_certified(W, ref)
    assert abs(ours.objective - ref.objective) <= 5e-3 * ref.objective
    # our certified lower bound holds for SCS's (certified) point too
    assert ours.lower_bound <= ref.objective + 1e-9


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("scs") is None, reason="scs not installed")
@pytest.mark.parametrize("method", ["trace", "max"])
def test_matches_scs_reference_d100(method):
    W = sym(100, 12)
    ours = solve_diagonal(W, method, tol=1e-6)
    ref = solve_diagonal(W, method, solver="scs", tol=1e-7)
    assert abs(ours.objective - ref.objective) <= 5e-3 * abs(ref.objective)
    assert ours.lower_bound <= ref.objective + 1e-7
