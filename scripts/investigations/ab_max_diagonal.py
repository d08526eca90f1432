"""AB Table 5 finding: why AB-max (and AB-shift) fall behind LB on the sparse lattice Gaussian at
the high condition, while AB-trace leads by far.

The quadratic AB proposal moves coordinate i with precision ``alpha D_i + 1/sigma`` (AB Eq. 14;
the variance of y - x is 2 D^-1 in the paper's relaxation, Eq. 17). The target's conditional
precision of coordinate i is ``-W_ii`` (W: the fitted quadratic term, here equal to minus the
precision, 1 to L on the diagonal). A D_i far above -W_ii makes coordinate i's moves far
smaller than the target's spread there. AB-shift's D = lambda I does that by construction
(the paper's own D = 100 I example); AB-max minimises lambda_max(W + D) (App. A.1, Eq. 27),
which pins only the largest eigenvalue, set by the stiff coordinates, and leaves the rest of
D free within its optimal set. The solver then picks a point of that set: ebmlab's barrier
method its analytic centre, SCS another interior point.

This reads the table's own runs (``ab/tables1to5_ess``, 20,000 + 20,000 steps, seed 0, their
last checkpoints) on ``sparse_low/medium/high`` and reports, per quadratic AB sampler: the
adapted (sigma, alpha), tr(D), D_i / (-W_ii) over coordinates, D and the proposal precision on
the softest coordinate, and ESS_n. For AB-max it re-solves the same W with SCS (where cvxpy is
installed) and lowers D coordinate by coordinate as far as W + D stays PSD
(:func:`lower_within_optimum`), which keeps lambda_max(W + D) at its optimum: that shows how
much of AB-max's D the criterion leaves undetermined.

    python scripts/investigations/ab_max_diagonal.py [--targets sparse_low sparse_high ...]

Writes outputs/investigations/ab_max_diagonal/summary.md (and .json).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import torch

from ebmlab.samplers.ab.sdp import solve_diagonal
from ebmlab.utils.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "outputs" / "investigations" / "ab_max_diagonal"
TABLE_RUNS = ROOT / "outputs" / "multirun" / "ab" / "tables1to5_ess" / "paper"
QUADRATIC = ("ab_shift", "ab_max", "ab_trace")
CONTEXT = ("ab_1st", "dmala", "rwm", "gibbs")


def _psd(W: torch.Tensor, d: torch.Tensor, tol: float) -> bool:
    return float(torch.linalg.eigvalsh(W + torch.diag(d))[0]) >= -tol


def lower_within_optimum(
    W: torch.Tensor, d: torch.Tensor, sweeps: int = 2, bisections: int = 40, tol: float = 1e-9
) -> torch.Tensor:
    """Lower each d_i (largest d_i / -W_ii first) by bisection to the smallest value keeping
    W + diag(d) PSD (lambda_min >= -tol). Lowering a diagonal entry never raises
    lambda_max(W + D), so a min-max optimal d stays optimal; the result shows how far the
    criterion leaves d undetermined."""
    W, d = W.double(), d.double().clone()
    if not _psd(W, d, tol):
        raise ValueError("lower_within_optimum: W + diag(d) is not PSD to begin with")
    order = torch.argsort(-(d / W.diag().abs().clamp_min(1e-12))).tolist()
    for _ in range(sweeps):
        for i in order:
            lo, hi = 0.0, float(d[i])
            for _ in range(bisections):
                mid = 0.5 * (lo + hi)
                trial = d.clone()
                trial[i] = mid
                if _psd(W, trial, tol):
                    hi = mid
                else:
                    lo = mid
            d[i] = hi
    return d


def describe(W: torch.Tensor, d: torch.Tensor, sigma: float, alpha: float) -> dict:
    """D against the target's diagonal precision -W_ii, and the softest coordinate's proposal
    precision alpha D_i + 1/sigma (AB Eq. 14)."""
    prec = W.diag().abs()
    ratio = d / prec
    soft = int(prec.argmin())
    eig = torch.linalg.eigvalsh(W + torch.diag(d))
    return {
        "trace_d": float(d.sum()),
        "d_min": float(d.min()),
        "d_max": float(d.max()),
        "ratio_min": float(ratio.min()),
        "ratio_median": float(ratio.median()),
        "ratio_max": float(ratio.max()),
        "softest_precision": float(prec[soft]),
        "softest_d": float(d[soft]),
        "softest_proposal_precision": alpha * float(d[soft]) + 1.0 / sigma,
        "lambda_max": float(eig[-1]),
        "lambda_min": float(eig[0]),
    }


def read_run(run_dir: Path) -> dict | None:
    """The adapted parameters, W and D of one finished table run, and its ESS."""
    res = run_dir / "results.json"
    ck = Workspace(run_dir).load()
    if not res.exists() or not isinstance(ck, dict):
        return None
    m = json.loads(res.read_text())["metrics"]
    out = {
        "ess_n": float(m["ess_n"]),
        "jump": float(m["jump"]),
        "accept_rate": float(m["accept_rate"]),
    }
    trick = ck["task"].get("sampler", {}).get("trick") if isinstance(ck["task"], dict) else None
    if trick is not None:
        out.update(
            sigma=float(m["sigma"]),
            alpha=float(m["alpha"]),
            W=trick["W"].double(),
            D=trick["D"].double(),
        )
    return out


def run_dir(target: str, sampler: str) -> Path:
    name = f"ab_target={target},sampler={sampler},seed=0,run.n_steps=40000"
    old = TABLE_RUNS / name.replace("run.n_steps", "task.n_steps")  # made before issue 44
    return old if old.is_dir() else TABLE_RUNS / name


def investigate(targets: list[str]) -> list[dict]:
    have_scs = importlib.util.find_spec("cvxpy") is not None
    rows = []
    for target in targets:
        for sampler in QUADRATIC + CONTEXT:
            r = read_run(run_dir(target, sampler))
            if r is None:
                continue
            row = {
                "target": target,
                "sampler": sampler,
                "ess_n": r["ess_n"],
                "jump": r["jump"],
                "accept_rate": r["accept_rate"],
            }
            if "D" in r:
                row.update(
                    sigma=r["sigma"],
                    alpha=r["alpha"],
                    **describe(r["W"], r["D"], r["sigma"], r["alpha"]),
                )
                if sampler == "ab_max":
                    low = lower_within_optimum(r["W"], r["D"])
                    row["lowered"] = describe(r["W"], low, r["sigma"], r["alpha"])
                    if have_scs:
                        s = solve_diagonal(r["W"], "max", "scs")
                        row["scs"] = describe(r["W"], s.d, r["sigma"], r["alpha"])
            rows.append(row)
    return rows


def summary(rows: list[dict]) -> str:
    lines = [
        "# AB-max's and AB-shift's D on the sparse lattice Gaussian",
        "",
        "`python scripts/investigations/ab_max_diagonal.py`, from the table runs' last "
        "checkpoints (20,000 + 20,000 steps, seed 0). ESS_n per 10,000 queries. -W_ii: the "
        "target's diagonal precision (1 to L). Softest coordinate: the one with the smallest "
        "-W_ii; its proposal precision is alpha D_i + 1/sigma (AB Eq. 14).",
        "",
        "| target | sampler | ESS_n | jump | sigma | alpha | tr(D) | D_i / -W_ii min / median "
        "/ max | softest: -W_ii, D_i, proposal precision | lambda_max(W + D) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "trace_d" not in r:
            lines.append(
                f"| {r['target']} | {r['sampler']} | {r['ess_n']:,.1f} | {r['jump']:.3f} "
                "| | | | | | |"
            )
            continue
        variants = [(r["sampler"], r)]
        variants += [(f"{r['sampler']}: D from SCS", r["scs"])] if "scs" in r else []
        variants += (
            [(f"{r['sampler']}: D lowered within the optimum", r["lowered"])]
            if "lowered" in r
            else []
        )
        for name, v in variants:
            own = v is r
            lines.append(
                f"| {r['target']} | {name} | {r['ess_n']:,.1f} | {r['jump']:.3f} | "
                if own
                else f"| {r['target']} | {name} | not run | | "
            )
            lines[-1] += (
                f"{r['sigma']:.2f} | {r['alpha']:.2f} | {v['trace_d']:,.0f} | {v['ratio_min']:.2f} "
                f"/ {v['ratio_median']:.2f} / {v['ratio_max']:.2f} | {v['softest_precision']:.2f}, "
                f"{v['softest_d']:.2f}, {v['softest_proposal_precision']:.2f} | "
                f"{v['lambda_max']:.2f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", nargs="+", default=["sparse_low", "sparse_medium", "sparse_high"])
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = investigate(a.targets)
    if not rows:
        raise SystemExit(f"no finished table runs under {TABLE_RUNS} for {a.targets}")
    OUT.mkdir(parents=True, exist_ok=True)
    text = summary(rows)
    (OUT / "summary.md").write_text(text)
    (OUT / "summary.json").write_text(json.dumps(rows, indent=2))
    print(text)


if __name__ == "__main__":
    main()
