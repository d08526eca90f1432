"""RMwGGIS Fig. 1, 2, 4 across runs: a grid of the learned-density heat maps each run of the
sweep saved in ``heatmap.npz`` (ebmlab/plotting/density_modeling.py writes it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ebmlab.plotting.density_modeling import imshow_density
from ebmlab.report.grouping import sort_key
from ebmlab.runs.rundirs import key_value


def _label(run: dict, keys: list[str]) -> str:
    vals = [v for v in (key_value(run, k) for k in keys) if v != "-"]
    return ", ".join(vals) or "-"


def _snapshot_grid(cells: dict, row_labels: list[str], col_labels: list[str]):
    import matplotlib.pyplot as plt

    panels = []
    for rl in row_labels:
        for cl in col_labels:
            if (rl, cl) in cells:
                z = np.load(cells[(rl, cl)]["run_dir"] / "heatmap.npz", allow_pickle=False)
                panels.append((f"{rl}, {cl}".strip(", -"), z))
    n_cols = max(len(z["snap_steps"]) for _, z in panels)
    fig, axes = plt.subplots(
        len(panels), n_cols, figsize=(2.0 * n_cols, 2.2 * len(panels)), squeeze=False
    )
    for i, (lab, z) in enumerate(panels):
        for j in range(n_cols):
            ax = axes[i, j]
            ax.axis("off")
            if j < len(z["snap_steps"]):
                imshow_density(ax, z["snaps"][j], float(z["bound"]), f"iter {z['snap_steps'][j]}")
                ax.axis("on")
            if j == 0:
                ax.set_ylabel(lab, fontsize=8)
    return fig


def _final_grid(cells: dict, row_labels: list[str], col_labels: list[str]):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        len(row_labels),
        len(col_labels),
        figsize=(2.0 * len(col_labels), 2.1 * len(row_labels)),
        squeeze=False,
    )
    for i, rl in enumerate(row_labels):
        for j, cl in enumerate(col_labels):
            ax = axes[i, j]
            ax.axis("off")
            run = cells.get((rl, cl))
            if run is None:
                continue
            z = np.load(run["run_dir"] / "heatmap.npz", allow_pickle=False)
            mmd = run["metrics"].get("mmd", float("nan"))
            note = f"MMD {mmd:.3g}" if mmd == mmd else ""  # no MMD at d = 256
            imshow_density(ax, z["log_density"], float(z["bound"]), note)
            ax.axis("on")
            if i == 0:
                ax.set_title(f"{cl}\n{note}".strip(), fontsize=8)
            if j == 0:
                ax.set_ylabel(rl, fontsize=8)
    return fig


def grid_figure(runs: list[dict], rows: list[str], cols: list[str], snapshots: bool, title=""):
    """Heat-map grid from runs' heatmap.npz: one panel per (row label, column label) group
    (first run of each group), or with ``snapshots`` one row per group and one column per
    saved training iteration (Fig. 4)."""
    runs = [r for r in runs if (r["run_dir"] / "heatmap.npz").exists()]
    if not runs:
        raise SystemExit("no run with heatmap.npz")
    cells: dict[tuple[str, str], dict] = {}
    for r in runs:
        cells.setdefault((_label(r, rows), _label(r, cols)), r)
    row_labels = sorted({k[0] for k in cells}, key=sort_key)
    col_labels = sorted({k[1] for k in cells}, key=sort_key)
    grid = _snapshot_grid if snapshots else _final_grid
    fig = grid(cells, row_labels, col_labels)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def make(
    runs: list[dict],
    out: Path,
    title: str = "",
    rows: list[str] = ("dataset.name",),
    cols: list[str] = ("learner",),
    snapshots: bool = False,
) -> list[Path]:
    from ebmlab.utils.plotting import save

    fig = grid_figure(runs, list(rows), list(cols), snapshots, title)
    return [save(fig, out)]
