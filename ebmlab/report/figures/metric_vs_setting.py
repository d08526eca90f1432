"""A run's final metric against one numeric setting, one line per value of other keys: DLP
Fig. 5(c) (log-RMSE of J against sampler steps per iteration, one line per sampler), AB
Figs. 1-3 right (ESS against alpha, one line per sigma). Each point is the mean over the
runs that share it (seeds), with the standard deviation as an error bar where there are two
or more; runs at other command-line settings are never pooled with them (own line)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ebmlab.report.claims import declared
from ebmlab.runs.rundirs import MISSING, key_value


def points(runs: list[dict], metric: str, x: str, lines: list[str]) -> dict[str, tuple]:
    """{line label: (xs, means, sds, counts)} over the runs that have ``x`` and a finite
    ``metric``; the label joins the ``lines`` keys' values (``key=value``)."""
    cells: dict[tuple[str, float], list[float]] = {}
    for r in runs:
        xv, value = key_value(r, x), r["metrics"].get(metric)
        if xv == MISSING or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        try:
            xf = float(xv)
        except ValueError:
            raise SystemExit(f"{x} must be numeric to be an axis; a run has {xv!r}") from None
        label = ", ".join(f"{k.rsplit('.', 1)[-1]}={key_value(r, k)}" for k in lines)
        # runs at other command-line settings (a declared shorter run) get their own line
        other = declared(r, {x: None, **dict.fromkeys(lines)})
        label = ", ".join([label, *(f"{k}={v}" for k, v in other)]) if other else label
        cells.setdefault((label, xf), []).append(float(value))
    if not cells:
        raise SystemExit(f"no runs with {x!r} and a finite {metric!r}")
    out = {}
    for label in sorted({k[0] for k in cells}):
        xs = sorted(xv for (lb, xv) in cells if lb == label)
        vals = [np.asarray(cells[(label, xv)]) for xv in xs]
        out[label] = (
            xs,
            [float(v.mean()) for v in vals],
            [float(v.std(ddof=1)) if len(v) > 1 else 0.0 for v in vals],
            [len(v) for v in vals],
        )
    return out


def figure(runs: list[dict], metric: str, x: str, lines: list[str], title="", logx=False):
    from ebmlab.utils.plotting import plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    series = points(runs, metric, x, lines)
    for label, (xs, means, sds, counts) in series.items():
        lo, hi = min(counts), max(counts)
        n = f" (n={lo})" if lo == hi else f" (n={lo}-{hi})"
        ax.errorbar(xs, means, yerr=sds, marker="o", capsize=3, label=label + n)
    if logx:
        ax.set_xscale("log")
        ticks = sorted({v for xs, *_ in series.values() for v in xs})
        ax.set_xticks(ticks, [f"{v:g}" for v in ticks])
        ax.minorticks_off()
    ax.set_xlabel(x)
    ax.set_ylabel(f"{metric} (final; mean ± sd over seeds)")
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def make(
    runs: list[dict],
    out: Path,
    title: str = "",
    metric: str = "",
    x: str = "",
    lines: list[str] | None = None,
    logx: bool = False,
) -> list[Path]:
    from ebmlab.utils.plotting import save

    if not metric or not x:
        raise SystemExit("metric_vs_setting needs options metric and x")
    fig = figure(runs, metric, x, list(lines or []), title, logx)
    return [save(fig, out)]
