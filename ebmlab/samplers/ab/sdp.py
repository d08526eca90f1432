"""The diagonal D of the AB sampler's Gaussian integral trick (AB paper Sec. 3.2, App. A.1).

The quadratic AB proposal needs a diagonal ``D`` with ``W + D`` positive semi-definite
(PSD). Three choices from the paper:

- ``shift``: ``D = max(eps, -lambda_min(W)) I`` (Martens & Sutskever 2010; paper eq. before (19)).
- ``trace``: ``min tr(D) s.t. D >= 0, W + D >= 0`` (paper eq. (19)/(26)).
- ``max``: ``min lambda s.t. D >= 0, lambda I >= W + D >= 0`` (paper eq. (27)).

``solver="auto"`` uses ebmlab's own solvers, which need nothing beyond torch:

- trace: Burer-Monteiro on the dual ``max -<W, X> s.t. X >= 0, diag(X) <= 1`` with
  ``X = V V^T`` (rows of V in the unit ball, rank ~ sqrt(2 d)), solved by spectral
  projected gradient with exact line search; D is recovered from the KKT conditions
  ``(W + D) V = 0``. If it does not reach ``tol`` it hands over to the barrier method.
- max (and the trace fallback): a primal log-barrier interior-point method with Newton
  steps on the ``d`` (+1) unknowns; ``X = S^-1 / t`` gives a dual point.

Every result is certified the same way, whichever solver produced it: ``lambda_min(W + D)``
is computed in float64 (``eigvalsh``); if negative, ``D`` is shifted by ``-lambda_min`` so
``W + D`` is PSD; the objective is recomputed for the certified D and compared with a
lower bound from a dual-feasible point (weak duality), giving ``rel_gap``, a bound on the
relative distance to the optimum that needs no reference solver.

``solver="mosek"`` / ``"scs"`` run cvxpy in a subprocess (``ebmlab.samplers.ab._sdp_worker``)
so that a crash or abort of the external solver cannot take the caller down.
"""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ebmlab.errors import ConfigError

METHODS = ("trace", "max", "shift")
SOLVERS = ("auto", "mosek", "scs")

MOSEK_LICENCE_HELP = (
    "MOSEK needs a licence file. Get one (free for academic use) at "
    "https://www.mosek.com/products/academic-licenses/ and save it as ~/mosek/mosek.lic, "
    "or point the environment variable MOSEK_LICENSE_FILE at it (MOSEKLM_LICENSE_FILE for a "
    "licence server). Without a licence use sdp.solver=auto (ebmlab's own certified solver) "
    "or sdp.solver=scs."
)


@dataclass(frozen=True)
class DiagonalSolution:
    """A certified diagonal D for the Gaussian integral trick.

    d: the diagonal of D [d] (float64, >= 0), with ``W + diag(d)`` PSD (``lambda_min`` >= 0
    up to float64 rounding). objective: ``tr(D)`` (trace, shift) or ``lambda_max(W + D)``
    (max) of the certified D. lower_bound: a dual bound on the optimum (None for shift or
    when the solver gave no dual). rel_gap: ``(objective - lower_bound) /
    max(|objective|, |lower_bound|, ||W||)`` (``||W||``: largest absolute row sum, so that an
    optimum of 0 is reachable), a bound on the relative sub-optimality. shift: what
    certification added to every ``d_i``. seconds: wall time of the whole call (solve and
    certificate).
    """

    d: Tensor
    objective: float
    lower_bound: float | None
    rel_gap: float | None
    shift: float
    lambda_min: float
    seconds: float
    solver: str
    method: str = "trace"
    lambda_max: float = float("nan")
    iterations: int = 0


def solve_diagonal(
    W: Tensor,
    method: str = "trace",
    solver: str = "auto",
    tol: float = 1e-4,
    eps: float = 1e-8,
    max_iter: int = 5000,
    seed: int = 0,
    timeout: float = 3600.0,
) -> DiagonalSolution:
    """Choose the diagonal D of the AB sampler's Gaussian integral trick (AB App. A.1).

    ``W`` is the symmetric quadratic term of the target (``f(x) ~ 1/2 x^T W x + ...``).
    ``tol`` is the target relative duality gap; ``eps`` the floor of the shift method;
    ``max_iter`` bounds the iterations of the own solvers; ``seed`` seeds the
    Burer-Monteiro start; ``timeout`` (seconds) bounds an external solver's subprocess.
    """
    if method not in METHODS:
        raise ConfigError("sdp.method", f"must be one of {list(METHODS)} (got {method!r})")
    if solver not in SOLVERS:
        raise ConfigError("sdp.solver", f"must be one of {list(SOLVERS)} (got {solver!r})")
    if not (isinstance(tol, (int, float)) and 0 < tol < 1):
        raise ConfigError("sdp.tol", f"must be a number in (0, 1) (got {tol!r})")
    if not (isinstance(eps, (int, float)) and eps >= 0):
        raise ConfigError("sdp.eps", f"must be a number >= 0 (got {eps!r})")
    if not (isinstance(max_iter, int) and max_iter >= 1):
        raise ConfigError("sdp.max_iter", f"must be an integer >= 1 (got {max_iter!r})")
    W = torch.as_tensor(W)
    if W.dim() != 2 or W.shape[0] != W.shape[1] or W.shape[0] == 0:
        raise ConfigError(
            "sdp.W", f"must be a non-empty square matrix (got shape {tuple(W.shape)})"
        )
    W = W.detach().to(device="cpu", dtype=torch.float64)
    if not torch.isfinite(W).all():
        raise ValueError("solve_diagonal: W has non-finite entries")
    W = 0.5 * (W + W.T)

    t0 = time.perf_counter()
    if method == "shift":
        lam = torch.linalg.eigvalsh(W)
        c = max(eps, -float(lam[0]))
        d = torch.full((W.shape[0],), c, dtype=torch.float64)
        return DiagonalSolution(
            d=d,
            objective=float(d.sum()),
            lower_bound=None,
            rel_gap=None,
            shift=0.0,
            lambda_min=float(lam[0]) + c,
            seconds=time.perf_counter() - t0,
            solver="closed-form",
            method=method,
            lambda_max=float(lam[-1]) + c,
        )

    if solver == "auto":
        lam0 = float(torch.linalg.eigvalsh(W)[0])
        if lam0 >= 0.0:
            # W is already PSD: D = 0 is optimal for both objectives (adding a PSD
            # diagonal never lowers tr(D) below 0 nor lambda_max(W + D) below lambda_max(W)).
            zero = torch.zeros(W.shape[0], dtype=torch.float64)
            lb = 0.0 if method == "trace" else float(torch.linalg.eigvalsh(W)[-1])
            return _certify(W, zero, lb, method, "auto:psd", 0, t0)
        if method == "trace":
            d, lb, it, name = _trace_bm(W, tol, max_iter, seed)
            if d is None:  # Burer-Monteiro did not certify tol: hand over to the barrier method
                d, lb, it2 = _barrier(W, "trace", tol, max_iter)
                it, name = it + it2, "auto:bm+ipm"
        else:
            d, lb, it = _barrier(W, "max", tol, max_iter)
            name = "auto:ipm"
    else:
        d, lb, it = _external(W, method, solver, tol, timeout)
        name = solver
    return _certify(W, d, lb, method, name, it, t0)


# ----------------------------------------------------------------------------- certificate


def _certify(W, d, lb, method, name, iterations, t0) -> DiagonalSolution:
    """Make D >= 0 and W + D PSD (float64 eigenvalues), then report objective and gap."""
    d = d.to(torch.float64).clamp_min(0.0)
    lam = torch.linalg.eigvalsh(W + torch.diag(d))
    shift = max(0.0, -float(lam[0]))
    d = d + shift
    lmin, lmax = float(lam[0]) + shift, float(lam[-1]) + shift
    obj = float(d.sum()) if method == "trace" else lmax
    rel = None
    if lb is not None:
        rel = max(0.0, obj - lb) / max(abs(obj), abs(lb), _wnorm(W))
    return DiagonalSolution(
        d=d,
        objective=obj,
        lower_bound=lb,
        rel_gap=rel,
        shift=shift,
        lambda_min=lmin,
        seconds=time.perf_counter() - t0,
        solver=name,
        method=method,
        lambda_max=lmax,
        iterations=iterations,
    )


def _wnorm(W: Tensor) -> float:
    """max_i sum_j |W_ij| >= ||W||_2: the scale of W, floor of the relative-gap denominator."""
    return float(W.abs().sum(1).max()) + 1e-300


def _trace_lower_bound(wx: float, dx: Tensor) -> float:
    """Weak duality for (19): for X PSD with diag(X) <= 1, -<W, X> <= tr(D*).
    Takes <W, X> and diag(X) of a PSD X; rescales X when a diagonal entry exceeds 1."""
    return -wx / max(1.0, float(dx.max()))


def _max_lower_bound(wy: float, dy: Tensor, wx: float, dx: Tensor) -> float:
    """Weak duality for (27): <W, Y - X> <= lambda* for Y, X PSD with tr(Y) = 1 and
    diag(X) <= diag(Y). Takes <W, Y>, diag(Y), <W, X>, diag(X) of PSD Y, X; rescales."""
    tr = float(dy.sum())
    if not tr > 0:
        return -math.inf
    c = min(1.0, float((dy / dx.clamp_min(1e-300)).min()))
    return (wy - c * wx) / tr


# ----------------------------------------------------------------- Burer-Monteiro (trace)


def _trace_bm(W: Tensor, tol: float, max_iter: int, seed: int):
    """Dual of (19), max -<W, V V^T> over rows ||v_i|| <= 1 (Burer & Monteiro 2003), by
    spectral projected gradient (Birgin, Martinez & Raydan 2000) with exact line search
    (the objective is quadratic along a segment); float32 iterations when ``tol`` allows.
    Every check recovers D by KKT, certifies it in float64 and stops once the certified gap
    is <= ``tol``. Returns (d, lower bound, iterations, name), or (None, None, iterations,
    name) when ``max_iter`` is spent first."""
    n = W.shape[0]
    k = min(n, int(math.ceil(math.sqrt(2 * n))) + 1)  # k(k+1)/2 > n: no spurious local optima
    dtype = torch.float32 if tol >= 1e-5 else torch.float64
    Wk = W.to(dtype)
    g = torch.Generator().manual_seed(seed)
    V = torch.randn(n, k, generator=g, dtype=torch.float64).to(dtype)
    V = V / V.norm(dim=1, keepdim=True)
    G = Wk @ V  # minimise f(V) = <V, W V>, i.e. maximise -<W, V V^T>
    wnorm = _wnorm(W)
    step = 1.0 / wnorm
    it, next_check, pg_target = 0, 50, 0.0
    while it < max_iter:
        it += 1
        D = V - step * 2.0 * G
        D = D / D.norm(dim=1, keepdim=True).clamp_min(1.0) - V  # projected-gradient direction
        WD = Wk @ D
        slope = 2.0 * float((D * G).sum())  # f(V + s D) = f + slope s + curv s^2
        curv = float((D * WD).sum())
        if slope >= 0:  # stationary up to rounding
            s = 0.0
        elif curv > 0:
            s = min(1.0, -slope / (2.0 * curv))
        else:
            s = 1.0
        V = V + s * D
        G = G + s * WD
        # Barzilai-Borwein step from the changes of V and of the gradient 2 W V
        ss = float((D * D).sum())
        step = ss / (2.0 * curv) if curv > 0 else 10.0 / wnorm
        step = min(max(step, 1e-6 / wnorm), 1e6 / wnorm)
        # fixed-step projected-gradient norm: a cheap stationarity measure; the certified gap
        # shrinks roughly in proportion to it, so it schedules the (costly) certificates
        P = V - G * (2.0 / wnorm)
        pg = float((P / P.norm(dim=1, keepdim=True).clamp_min(1.0) - V).norm())
        if it >= next_check or pg <= pg_target or it == max_iter or s == 0.0:
            next_check = it + max(50, it // 2)
            V64 = V.to(torch.float64)
            V64 = V64 / V64.norm(dim=1, keepdim=True).clamp_min(1.0)
            G64 = W @ V64
            lb = -float((V64 * G64).sum())  # exact dual value: rows of V64 lie in the ball
            d = _kkt_diagonal(V64, G64)
            lam = float(torch.linalg.eigvalsh(W + torch.diag(d))[0])
            ub = float(d.sum()) + n * max(0.0, -lam)
            want = tol * max(abs(ub), abs(lb), wnorm)
            if ub - lb <= want:
                return d, lb, it, "auto:bm"
            pg_target = 0.7 * pg * want / (ub - lb)
            if s == 0.0:
                break
    return None, None, it, "auto:bm"


def _kkt_diagonal(V: Tensor, G: Tensor) -> Tensor:
    """D from (W + D) V = 0 row by row: d_i = -<(W V)_i, v_i> / ||v_i||^2, clipped at 0."""
    nv = (V * V).sum(1)
    d = -(G * V).sum(1) / nv.clamp_min(1e-30)
    return torch.where(nv > 1e-20, d, torch.zeros_like(d)).clamp_min(0.0)


# --------------------------------------------------------------- barrier interior point


def _barrier(W: Tensor, method: str, tol: float, max_iter: int, kappa: float = 8.0):
    """Primal log-barrier method (Boyd & Vandenberghe Sec. 11.3) for (19) or (27).

    Unknowns z = d (trace) or (d, lambda) (max). Centering minimises
    t c^T z - log det(W + D) [- log det(lambda I - W - D)] - sum log d_i by damped Newton;
    on the central path X = S1^-1 / t (and Y = S2^-1 / t) are dual feasible, which gives
    the lower bound used for stopping. Returns (d, lower bound, Newton steps)."""
    n = W.shape[0]
    is_max = method == "max"
    wd = W.diagonal()
    off = W.abs().sum(1) - wd.abs()
    scale = max(float(W.abs().max()), 1e-12)
    wnorm = _wnorm(W)
    d = (off - wd).clamp_min(0.0) + scale  # W + D strictly diagonally dominant: PD, d > 0
    lam = float((wd + d + off).max()) + scale if is_max else 0.0
    eye = torch.eye(n, dtype=torch.float64)
    nu = 3 * n if is_max else 2 * n  # barrier parameter

    def factor(d, lam):
        L1, info1 = torch.linalg.cholesky_ex(W + torch.diag(d))
        if int(info1) != 0:
            return None
        if not is_max:
            return L1, None
        L2, info2 = torch.linalg.cholesky_ex(lam * eye - W - torch.diag(d))
        return (L1, L2) if int(info2) == 0 else None

    def phi(t, d, lam, Ls):
        v = -2.0 * float(Ls[0].diagonal().log().sum()) - float(d.log().sum())
        if is_max:
            return t * lam + v - 2.0 * float(Ls[1].diagonal().log().sum())
        return t * float(d.sum()) + v

    obj0 = lam if is_max else float(d.sum())
    t = nu / max(abs(obj0), scale)
    Ls = factor(d, lam)
    lb, it = -math.inf, 0
    while it < max_iter:
        it += 1
        S1i = torch.cholesky_inverse(Ls[0])
        if is_max:
            S2i = torch.cholesky_inverse(Ls[1])
            gd = -S1i.diagonal() + S2i.diagonal() - 1.0 / d
            g = torch.cat(
                [gd, torch.tensor([t - float(S2i.diagonal().sum())], dtype=torch.float64)]
            )
            H = torch.empty(n + 1, n + 1, dtype=torch.float64)
            H[:n, :n] = S1i * S1i + S2i * S2i
            H[:n, :n].diagonal().add_(1.0 / (d * d))
            cross = -(S2i * S2i).sum(1)
            H[:n, n] = cross
            H[n, :n] = cross
            H[n, n] = float((S2i * S2i).sum())
        else:
            g = t - S1i.diagonal() - 1.0 / d
            H = S1i * S1i
            H.diagonal().add_(1.0 / (d * d))
        LH, info = torch.linalg.cholesky_ex(H)
        if int(info) != 0:
            H.diagonal().mul_(1.0 + 1e-10).add_(1e-12 * float(H.diagonal().max()))
            LH = torch.linalg.cholesky(H)
        step = -torch.cholesky_solve(g.unsqueeze(1), LH).squeeze(1)
        dec2 = -float(g @ step)
        if dec2 < 1.0:
            # Newton-corrected dual point X = (S^-1 - S^-1 dS S^-1) / t (~ S(z + step)^-1 / t):
            # PSD with diag(X) <= 1 whenever the step lies in the Dikin ellipsoid (dec2 < 1).
            # <W, X> and diag(X) in O(n^2) using W = S1 - D (and W = lambda I - D - S2).
            sd = step[:n]
            P1 = S1i * S1i
            wx = (float((W * S1i).sum()) - float(sd @ S1i.diagonal()) + float(sd @ (P1 @ d))) / t
            dx = (S1i.diagonal() - P1 @ sd) / t
            if is_max:
                P2 = S2i * S2i
                e = float(step[n]) - sd
                s2w = lam * P2.sum(1) - P2 @ d - S2i.diagonal()  # diag(S2^-1 W S2^-1)
                wy = (float((W * S2i).sum()) - float(e @ s2w)) / t
                dy = (S2i.diagonal() - P2 @ e) / t
                lb = max(lb, _max_lower_bound(wy, dy, wx, dx))
                ub = lam
            else:
                lb = max(lb, _trace_lower_bound(wx, dx))
                ub = float(d.sum())
            if ub - lb <= tol * max(abs(ub), abs(lb), wnorm):
                break
            if dec2 < 0.5:  # centred enough: move along the central path
                t *= kappa
                continue
        # damped Newton with backtracking: stay strictly feasible, Armijo decrease
        sd = step[:n]
        neg = sd < 0
        smax = float((-d[neg] / sd[neg]).min()) * 0.99 if bool(neg.any()) else 1.0
        s = min(1.0, smax)
        f0 = phi(t, d, lam, Ls)
        while True:
            dn = d + s * sd
            lamn = lam + s * float(step[n]) if is_max else 0.0
            Ln = factor(dn, lamn)
            if Ln is not None and phi(t, dn, lamn, Ln) <= f0 - 0.25 * s * dec2:
                break
            s *= 0.5
            if s < 1e-12:
                Ln = None
                break
        if Ln is None:  # no progress possible at this t (rounding): accept the current point
            t *= kappa
            continue
        d, lam, Ls = dn, lamn, Ln
    return d, (lb if math.isfinite(lb) else None), it


# ------------------------------------------------------------------- external solvers


def mosek_licence() -> str | None:
    """Where MOSEK would find a licence (env var or ~/mosek/mosek.lic), or None."""
    for var in ("MOSEK_LICENSE_FILE", "MOSEKLM_LICENSE_FILE"):
        v = os.environ.get(var)
        if v and ("@" in v or Path(v).is_file()):
            return v
    p = Path.home() / "mosek" / "mosek.lic"
    return str(p) if p.is_file() else None


def _check_external(solver: str) -> None:
    if importlib.util.find_spec("cvxpy") is None:
        raise RuntimeError(
            f"sdp.solver={solver} needs cvxpy (pip install cvxpy scs); "
            "or use sdp.solver=auto, which needs nothing else"
        )
    if solver == "scs" and importlib.util.find_spec("scs") is None:
        raise RuntimeError("sdp.solver=scs needs the scs package (pip install scs)")
    if solver == "mosek":
        if importlib.util.find_spec("mosek") is None:
            raise RuntimeError(
                "sdp.solver=mosek needs the mosek package (pip install mosek). "
                + MOSEK_LICENCE_HELP
            )
        if mosek_licence() is None:
            raise RuntimeError("sdp.solver=mosek: no MOSEK licence found. " + MOSEK_LICENCE_HELP)


def _external(W: Tensor, method: str, solver: str, tol: float, timeout: float):
    """Solve with cvxpy + SCS/MOSEK in a subprocess; returns (d, lower bound, iterations)."""
    _check_external(solver)
    with tempfile.TemporaryDirectory(prefix="ebmlab_sdp_") as tmp:
        inp, out = Path(tmp) / "in.npy", Path(tmp) / "out.npz"
        np.save(inp, W.numpy())
        cmd = [
            sys.executable,
            "-m",
            "ebmlab.samplers.ab._sdp_worker",
            str(inp),
            str(out),
            method,
            solver,
            repr(float(tol)),
        ]
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"sdp.solver={solver}: no answer within {timeout} s") from e
        if proc.returncode != 0 or not out.is_file():
            msg = (proc.stderr or proc.stdout).strip().splitlines()
            tail = msg[-1] if msg else f"exit status {proc.returncode}"
            if solver == "mosek" and "licen" in (proc.stderr + proc.stdout).lower():
                raise RuntimeError(f"sdp.solver=mosek failed: {tail}. " + MOSEK_LICENCE_HELP)
            raise RuntimeError(
                f"sdp.solver={solver} failed in its subprocess "
                f"(exit status {proc.returncode}): {tail}"
            )
        with np.load(out, allow_pickle=False) as z:
            d = torch.from_numpy(z["d"].astype(np.float64))
            X = torch.from_numpy(z["X"].astype(np.float64)) if "X" in z else None
            Y = torch.from_numpy(z["Y"].astype(np.float64)) if "Y" in z else None
            iters = int(z["iterations"]) if "iterations" in z else 0
    lb = None
    if X is not None:  # project the solver's dual onto the PSD cone, then bound
        X = _psd_part(X)
        if method == "trace":
            lb = _trace_lower_bound(float((W * X).sum()), X.diagonal())
        elif Y is not None:
            Y = _psd_part(Y)
            lb = _max_lower_bound(
                float((W * Y).sum()), Y.diagonal(), float((W * X).sum()), X.diagonal()
            )
    return d, lb, iters


def _psd_part(X: Tensor) -> Tensor:
    X = 0.5 * (X + X.T)
    ev, U = torch.linalg.eigh(X)
    return (U * ev.clamp_min(0.0)) @ U.T
