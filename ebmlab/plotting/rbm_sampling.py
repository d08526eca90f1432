"""RBM sampling figures (DLP Fig. 4; ACS Fig. 4, 6, 9): log-MMD against steps and seconds."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ebmlab.report.runs import group_runs, key_value, logged_rows


def comparison_figure(series: dict, log_floor: float | None, title: str = "", axes=None):
    """log-MMD against steps and seconds; series[label] = (steps, seconds, log_mmd)."""
    import matplotlib.pyplot as plt

    fig = None
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(10.4, 3.8))
    for label, (steps, secs, lm) in series.items():
        axes[0].plot(np.asarray(steps), np.asarray(lm), label=label)
        axes[1].plot(np.asarray(secs), np.asarray(lm), label=label)
    for ax, xl in zip(axes, ("step", "seconds")):
        if log_floor is not None:
            ax.axhline(log_floor, color="k", ls="--", lw=1, label="ground truth floor")
        ax.set_xlabel(xl)
        ax.set_ylabel("log MMD$^2$")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_title(f"{title}: vs steps" if title else "vs steps", fontsize=9)
    axes[1].set_title("vs wall-clock seconds", fontsize=9)
    if fig is not None:
        fig.tight_layout()
    return fig


def sweep_figure(runs: list[dict], title: str = ""):
    """One row per initialisation, every sampler's mean curve (over seeds), floor dashed."""
    import matplotlib.pyplot as plt

    inits = sorted({key_value(r, "task.init") for r in runs})
    fig, axes = plt.subplots(len(inits), 2, figsize=(10.4, 3.8 * len(inits)), squeeze=False)
    for row, init in zip(axes, inits):
        sub = [r for r in runs if key_value(r, "task.init") == init]
        series, floors = {}, []
        for (sampler,), members in group_runs(sub, ["sampler"]).items():
            curves = []
            for r in members:
                rows = logged_rows(r, "log_mmd")
                if not rows:
                    continue
                curves.append([(m["step"], m["seconds"], m["log_mmd"]) for m in rows])
                floors.append(r["metrics"]["log_mmd_floor"])
            if not curves:
                continue
            m = min(len(c) for c in curves)
            arr = np.array([c[:m] for c in curves], float).mean(0)
            series[sampler] = (arr[:, 0], arr[:, 1], arr[:, 2])
        split = sorted({str(r["metrics"].get("train_split")) for r in sub})
        t = f"{title} init={init} (RBM trained on {'/'.join(split)})"
        comparison_figure(series, float(np.mean(floors)) if floors else None, t, axes=row)
    fig.tight_layout()
    return fig


def make(runs: list[dict], out: Path, title: str = "") -> list[Path]:
    from ebmlab.utils.plotting import save

    fig = sweep_figure(runs, title)
    return [save(fig, out)]
