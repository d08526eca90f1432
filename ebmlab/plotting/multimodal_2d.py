"""ACS Fig. 1, one run: the heat map of a 2-D distribution (ground truth or a sampler's visit
histogram on the multimodal toy); the cross-run figure is ebmlab/report/figures/multimodal_2d.py."""

from __future__ import annotations


def heatmap(prob, title: str = "", ax=None):
    """Heat map of a 2-D distribution (rows x[0], columns x[1]), like ACS Fig. 1."""
    import matplotlib.pyplot as plt

    fig = None
    if ax is None:
        fig, ax = plt.subplots(figsize=(3.2, 3.2))
    ax.imshow(prob.cpu().numpy(), cmap="Blues", origin="lower", interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=9)
    return fig
