"""Subprocess entry for the external SDP solvers of :mod:`ebmlab.samplers.ab.sdp`.

``python -m ebmlab.samplers.ab._sdp_worker IN.npy OUT.npz METHOD SOLVER TOL`` reads W, solves
the trace (19) or max (27) SDP with cvxpy + SCS/MOSEK and writes ``d`` and the duals ``X``
(of W + D >= 0) and ``Y`` (of lambda I - W - D >= 0, max only). It runs in its own process
so that a solver that crashes or aborts cannot take the caller down.
"""

from __future__ import annotations

import sys

import numpy as np


def solve(W: np.ndarray, method: str, solver: str, tol: float) -> dict:
    import cvxpy as cp

    n = W.shape[0]
    d = cp.Variable(n, nonneg=True)
    cons = [W + cp.diag(d) >> 0]
    if method == "trace":
        objective = cp.sum(d)
    else:
        lam = cp.Variable()
        cons.append(lam * np.eye(n) - W - cp.diag(d) >> 0)
        objective = lam
    prob = cp.Problem(cp.Minimize(objective), cons)
    if solver == "scs":
        prob.solve(solver=cp.SCS, eps_abs=tol, eps_rel=tol, max_iters=1_000_000)
    else:
        prob.solve(solver=cp.MOSEK)
    if d.value is None:
        raise RuntimeError(f"{solver} returned no solution (status {prob.status})")
    out = {"d": np.asarray(d.value, dtype=np.float64)}
    # duals of the PSD constraints: X for W + D >= 0, Y for lambda I - W - D >= 0
    if cons[0].dual_value is not None:
        out["X"] = _sym(cons[0].dual_value)
    if method == "max" and cons[1].dual_value is not None:
        out["Y"] = _sym(cons[1].dual_value)
    stats = prob.solver_stats
    if stats is not None and stats.num_iters is not None:
        out["iterations"] = np.array(int(stats.num_iters))
    return out


def _sym(X) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    return 0.5 * (X + X.T)


def main(argv: list[str]) -> int:
    inp, out, method, solver, tol = argv
    W = np.load(inp, allow_pickle=False)
    res = solve(W, method, solver, float(tol))
    np.savez(out, **res)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
