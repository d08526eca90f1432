"""Learned-density heat maps of one run of the RMwGGIS synthetic benchmark (RMwGGIS Fig. 1, 2,
4) and its ``heatmap.npz``; the cross-run grid is ebmlab/report/figures/density_modeling.py."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch


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


def write_heatmaps(path: Path, snaps: list[tuple[int, torch.Tensor]], bound: float) -> None:
    """``heatmap.npz`` of one run (read by ebmlab/report/figures/density_modeling.py): the final
    log density, and every snapshot (step, log density over the grid) taken during training."""
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


def method_label(learner_name: str, sampler_name: str, learner) -> str:
    """The learner as titles name it: PCD by its sampler, ratio matching by its objective
    (when not Eq. 3) and estimator (when not the full sum: variant and s)."""
    if learner.needs_sampler:
        return f"{learner_name} ({sampler_name})"
    name = learner_name if learner.objective == "eq3" else f"{learner_name} ({learner.objective})"
    return name if learner.estimator == "full" else f"{name} {learner.variant}, s={learner.s}"


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
