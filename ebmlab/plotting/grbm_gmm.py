"""GRBM Fig. 1: densities and samples of the 2-D Gaussian mixtures under five sampler settings."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from ebmlab.data.gmm_toy import KINDS
from ebmlab.metrics.density_2d import plot_grid

# Fig. 1 column order; a run's task.label (set by conf/grbm_gmm_setting/) picks its column.
SETTINGS = (
    ("gibbs", "Gibbs"),
    ("langevin_wo_adjust", "Langevin wo. adjust"),
    ("langevin_w_adjust", "Langevin w. adjust"),
    ("gibbs_langevin_wo_adjust", "Gibbs-Langevin wo. adjust"),
    ("gibbs_langevin_w_adjust", "Gibbs-Langevin w. adjust"),
)


def panel_density(ax, z: torch.Tensor, r: float, title: str) -> None:
    ax.imshow(z.numpy(), origin="lower", extent=(-r, r, -r, r), cmap="viridis")
    ax.set_title(title, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


def panel_samples(ax, s: torch.Tensor, r: float, title: str) -> None:
    s = s[torch.isfinite(s).all(1)].numpy()
    ax.scatter(s[:, 0], s[:, 1], s=2, alpha=0.5)
    ax.set_xlim(-r, r)
    ax.set_ylim(-r, r)
    ax.set_aspect("equal")
    ax.set_title(title, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


@torch.no_grad()
def run_arrays(data, model, x: Tensor, samples: Tensor, plot_range: float, n: int, label: str):
    """What :func:`figure` reads from a run (its ``gmm_arrays.pt``): the true density and the
    model's -F(v) on the n x n grid over [-plot_range, plot_range]^2, the data, the samples."""
    pts = plot_grid(plot_range, n, model.W.device)
    return {
        "kind": data.kind,
        "label": label,
        "plot_range": plot_range,
        "true_density": data.log_prob(pts.double().cpu()).exp().reshape(n, n).float(),
        "neg_energy": model.log_prob(pts).cpu().reshape(n, n).float(),
        "data": x.cpu().float(),
        "samples": samples.cpu().float(),
    }


def run_figure(a: dict, epochs: list, kl: list, scale: str):
    """One run's figure: true density, model -F(v), data, samples (``a``: the run's
    gmm_arrays.pt) and the KL curve over epochs."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 5, figsize=(17, 3.6))
    panel_density(axes[0], a["true_density"], a["plot_range"], "true density")
    panel_density(axes[1], a["neg_energy"], a["plot_range"], "GRBM -F(v)")
    panel_samples(axes[2], a["data"], a["plot_range"], "data")
    panel_samples(axes[3], a["samples"], a["plot_range"], "GRBM samples")
    axes[4].plot(epochs, kl)
    axes[4].set(xlabel="epoch", ylabel="KL(true || model)")
    axes[4].grid(alpha=0.3)
    fig.suptitle(f"GRBM on the {a['kind']} GMM ({a['label']}, {scale} scale)")
    fig.tight_layout()
    return fig


def figure(run_dirs: list[Path], out: Path) -> Path:
    """Fig. 1 from finished runs: rows iso density / samples / aniso density / samples, columns
    ground truth + the five settings (by label; missing runs leave a blank panel)."""
    from ebmlab.utils.plotting import plt, save

    runs = {}
    for d in run_dirs:
        for f in sorted(Path(d).rglob("gmm_arrays.pt")):
            a = torch.load(f, map_location="cpu", weights_only=True)
            runs[(a["kind"], a["label"])] = a
    if not runs:
        raise SystemExit(f"no gmm_arrays.pt under {', '.join(map(str, run_dirs))}")
    cols = [("truth", "(a) ground truth")] + [
        (k, f"({chr(98 + i)}) {t}") for i, (k, t) in enumerate(SETTINGS)
    ]
    fig, axes = plt.subplots(4, len(cols), figsize=(2.3 * len(cols), 9.4), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for row, kind in enumerate(KINDS):
        any_run = next((a for (k, _), a in runs.items() if k == kind), None)
        for c, (key, title) in enumerate(cols):
            a = any_run if key == "truth" else runs.get((kind, key))
            if a is None:
                continue
            top, bottom = axes[2 * row, c], axes[2 * row + 1, c]
            top.axis("on")
            bottom.axis("on")
            r = a["plot_range"]
            if key == "truth":
                panel_density(top, a["true_density"], r, f"{kind}: density")
                panel_samples(bottom, a["data"], r, "data")
            else:
                panel_density(top, a["neg_energy"], r, f"{kind}: -F(v)")
                panel_samples(bottom, a["samples"], r, "samples")
            if row == 0:
                top.set_title(title, fontsize=9)
    fig.tight_layout()
    return save(fig, out)
