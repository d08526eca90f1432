"""ACS Fig. 1 across runs: ground truth and every sampler's visit histogram on the 2-D
multimodal toy (each run's ``visits.pt`` and ``ground_truth.pt``)."""

from __future__ import annotations

from pathlib import Path

import torch

from ebmlab.plotting.multimodal_2d import heatmap
from ebmlab.runs.rundirs import key_value

SAMPLER_ORDER = ("rwm", "gibbs", "dmala", "ab_1st", "acs")  # the paper's column order


def figure(runs: list[dict], title: str = ""):
    """Ground truth + one heat map per run (ACS Fig. 1), samplers in the paper's order."""
    import matplotlib.pyplot as plt

    def order(r):
        lab = key_value(r, "sampler")
        return (SAMPLER_ORDER.index(lab) if lab in SAMPLER_ORDER else len(SAMPLER_ORDER), lab)

    runs = sorted((r for r in runs if (r["run_dir"] / "visits.pt").is_file()), key=order)
    if not runs:
        raise SystemExit("no multimodal_2d runs (visits.pt) found")
    gt = torch.load(runs[0]["run_dir"] / "ground_truth.pt", map_location="cpu", weights_only=True)
    k = len(runs) + 1
    fig, axes = plt.subplots(1, k, figsize=(2.6 * k, 2.9), squeeze=False)
    heatmap(gt, "ground truth", axes[0, 0])
    for ax, r in zip(axes[0, 1:], runs):
        emp = torch.load(r["run_dir"] / "visits.pt", map_location="cpu", weights_only=True)
        m = r["metrics"]
        sub = (
            f"{key_value(r, 'sampler')}\n"
            f"modes {m['modes_visited']:.0f}/{m['n_modes']:.0f}, TV {m['mode_tv']:.2f}"
        )
        heatmap(emp, sub, ax)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def make(runs: list[dict], out: Path, title: str = "") -> list[Path]:
    from ebmlab.utils.plotting import save

    fig = figure(runs, title)
    return [save(fig, out)]
