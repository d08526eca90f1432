"""Learned-density heat maps of the RMwGGIS synthetic benchmark (RMwGGIS Fig. 1, 2, 4)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from ebmlab.report.runs import key_value, sort_key


def imshow_density(ax, log_p: np.ndarray, bound: float, title: str = "") -> None:
    """exp(log_p) of a square grid on [-bound, bound]^2 as an image."""
    r = int(round(math.sqrt(log_p.size)))
    ax.imshow(
        np.exp(log_p.reshape(r, r)),
        origin="lower",
        extent=(-bound, bound, -bound, bound),
        cmap="viridis",
        interpolation="nearest",
    )
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=8)


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


# ---- one run's outputs (written by ebmlab/tasks/density_modeling.py) ----------------------
def write_heatmaps(path: Path, snaps: list[tuple[int, torch.Tensor]], bound: float) -> None:
    """``heatmap.npz`` of one run (read by :func:`grid_figure`): the final log density, and
    every snapshot (step, log density over the grid) taken during training."""
    np.savez(
        path,
        log_density=snaps[-1][1].numpy(),
        snap_steps=np.array([s for s, _ in snaps]),
        snaps=np.stack([t.numpy() for _, t in snaps]),
        bound=np.array(bound),
    )


def _hist2d(ax, xy: np.ndarray, bound: float, title: str, bins: int = 100) -> None:
    ax.hist2d(xy[:, 0], xy[:, 1], bins=bins, range=[[-bound, bound], [-bound, bound]])
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_aspect("equal")
    ax.set_title(title, fontsize=8)


def _density(snaps, bound: float, pairs: dict, samples_title: str, title: str):
    import matplotlib.pyplot as plt

    n = 3 if pairs else 1
    fig, axes = plt.subplots(1, n, figsize=(3.2 * n, 3.4), squeeze=False)
    imshow_density(axes[0, 0], snaps[-1][1].numpy(), bound, "learned exp(-E)")
    if pairs:
        _hist2d(axes[0, 1], pairs["truth"], bound, "data")
        _hist2d(axes[0, 2], pairs["samples"], bound, samples_title)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def _over_training(snaps, bound: float, title: str):
    import matplotlib.pyplot as plt

    k = len(snaps)
    fig, axes = plt.subplots(1, k, figsize=(2.2 * k, 2.5), squeeze=False)
    for ax, (s, t) in zip(axes[0], snaps):
        imshow_density(ax, t.numpy(), bound, f"iter {s}")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def _scores(rows: list[dict], title: str):
    from ebmlab.utils.plotting import side_by_side

    panels = [
        (label, {key: ([r["step"] for r in rows], [r[key] for r in rows])}, "iteration", y)
        for key, label, y in (("mmd", "MMD", "MMD^2"), ("rm_objective", "RM objective", "value"))
        if key in rows[-1]
    ]
    return side_by_side(panels, title)


def run_figures(
    snaps, bound: float, pairs: dict, evals: list[dict], title: str, scale: str, sweeps: int
) -> dict:
    """One run's figures by name: ``density`` (Fig. 1: the learned exp(-E) of the last
    snapshot; with ``pairs`` = decoded ``truth`` and ``samples`` [n, 2], their histograms),
    ``density_over_training`` (Fig. 4, when several snapshots) and ``eval`` (the MMD / RM
    objective of ``evals``, the history rows holding them, when several)."""
    mmd = f" (MMD {evals[-1]['mmd']:.4g})" if evals and "mmd" in evals[-1] else ""
    samples_title = f"Gibbs samples ({sweeps} sweeps)"
    figs = {"density": _density(snaps, bound, pairs, samples_title, f"{title}, {scale} scale{mmd}")}
    if len(snaps) > 1:
        figs["density_over_training"] = _over_training(snaps, bound, title)
    if len(evals) > 1:
        figs["eval"] = _scores(evals, f"{title}, {scale}")
    return figs
