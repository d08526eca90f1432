"""DLP Fig. 4, ACS Fig. 4, 6, 9 across runs: every sampler's mean log-MMD curve over seeds,
one row per initialisation."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ebmlab.plotting.rbm_sampling import comparison_figure
from ebmlab.report.grouping import group_runs
from ebmlab.runs.rundirs import key_value, logged_rows


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
