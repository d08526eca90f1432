"""Figures (matplotlib, Agg backend): curves and sample grids."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

_STYLES = ("-", "--", ":", "-.")


def save(fig, path) -> Path:
    """Write ``fig`` to ``path`` (parents created) and free it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def _plot_series(ax, series: dict[str, tuple]) -> None:
    """One line per label; past the 10 colours of the cycle the line style changes, so that no
    two series look alike."""
    for i, (label, (x, y)) in enumerate(series.items()):
        ax.plot(np.asarray(x), np.asarray(y), label=label, linestyle=_STYLES[i // 10 % 4])


def curves(series: dict[str, tuple], xlabel: str, ylabel: str, title: str = "", logy=False):
    """One line per label: series[label] = (x, y)."""
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    _plot_series(ax, series)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    if len(series) > 1 or any(series):
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


LEGEND_INSIDE = 8  # most series a panel's own legend names


def side_by_side(items: list[tuple[str, dict[str, tuple], str, str]], title: str = ""):
    """Several curve panels in one row: items = [(panel title, series, xlabel, ylabel)].
    Past ``LEGEND_INSIDE`` series one legend, right of the panels, names them all (inside
    a panel it would hide the curves)."""
    fig, axes = plt.subplots(1, len(items), figsize=(5.2 * len(items), 3.8), squeeze=False)
    outside = max((len(series) for _, series, _, _ in items), default=0) > LEGEND_INSIDE
    for ax, (ptitle, series, xlabel, ylabel) in zip(axes[0], items):
        _plot_series(ax, series)
        ax.set_title(ptitle)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if series and not outside:
            ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if outside:
        shown = {}
        for ax in axes[0]:
            for handle, label in zip(*ax.get_legend_handles_labels()):
                shown.setdefault(label, handle)
        fig.legend(
            list(shown.values()),
            list(shown),
            loc="center left",
            bbox_to_anchor=(1.0, 0.5),
            fontsize=8,
        )
    return fig


def image_grid(images, n_cols: int = 10, title: str = "", cmap="gray"):
    """images: array [n, H, W] (or [n, H, W, C]) in [0, 1]."""
    images = np.asarray(images)
    n = images.shape[0]
    n_rows = int(np.ceil(n / n_cols))
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(n_cols * 0.8, n_rows * 0.8), squeeze=False)
    for k, ax in enumerate(axes.flat):
        ax.axis("off")
        if k < n:
            ax.imshow(images[k], cmap=cmap, vmin=0, vmax=1)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
