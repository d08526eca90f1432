"""AB Fig. 1-3 (right): ESS over a fixed (sigma, alpha) grid, one line per sigma."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ebmlab.report.runs import key_value


def grid_figure(runs: list[dict], metric: str = "ess_n", title: str = ""):
    """``metric`` against alpha, one line per sigma, averaged over seeds; sigma and alpha are
    the runs' ``sampler.sigma`` / ``sampler.alpha``."""
    from ebmlab.utils.plotting import curves

    cells: dict = {}
    for r in runs:
        sigma, alpha = key_value(r, "sampler.sigma"), key_value(r, "sampler.alpha")
        if "-" in (sigma, alpha) or metric not in r["metrics"]:
            continue
        cells.setdefault((float(sigma), float(alpha)), []).append(float(r["metrics"][metric]))
    if not cells:
        raise SystemExit(f"no runs with sampler.sigma / sampler.alpha and {metric!r}")
    series = {}
    for s in sorted({k[0] for k in cells}):
        alphas = sorted(a for (sg, a) in cells if sg == s)
        series[f"sigma={s:g}"] = (alphas, [float(np.mean(cells[(s, a)])) for a in alphas])
    return curves(series, "alpha", metric, title=title)


def make(runs: list[dict], out: Path, title: str = "", metric: str = "ess_n") -> list[Path]:
    import matplotlib.pyplot as plt

    fig = grid_figure(runs, metric, title)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return [out]
