"""GRBM image figures of one run (GRBM Fig. 2, 3b, 4): sample grids and learned filters.
Images are float [n, C, H, W] in [0, 1]."""

from __future__ import annotations

from torch import Tensor

from ebmlab.utils.plotting import curves, image_grid


def _hw(x: Tensor):
    """[n, C, H, W] -> numpy [n, H, W] (one channel) or [n, H, W, C] (colour)."""
    x = x.detach().cpu()
    return x[:, 0].numpy() if x.shape[1] == 1 else x.permute(0, 2, 3, 1).numpy()


def images_figure(images: Tensor, n_cols: int, title: str):
    return image_grid(_hw(images), n_cols=n_cols, title=title)


def filters_figure(w: Tensor, image_shape: tuple[int, ...], n: int, title: str):
    """The first ``n`` hidden units' weight vectors (columns of W [D, H]) as images, each
    min-max scaled to [0, 1] (Fig. 3b)."""
    w = w.detach().T[:n].cpu()
    lo, hi = w.min(1, keepdim=True).values, w.max(1, keepdim=True).values
    return images_figure(
        ((w - lo) / (hi - lo).clamp_min(1e-12)).reshape(-1, *image_shape), 10, title
    )


def run_figures(
    samples: Tensor, strip: Tensor, w: Tensor, image_shape, history, name: str, steps: int
):
    """One run's final figures by name: ``samples`` (Fig. 3c / 4), ``intermediate_samples``
    (Fig. 2: ``strip`` [chains, snapshots, C, H, W], a row per chain), ``filters`` (Fig. 3b:
    as many as ``samples``) and ``log_var`` (Fig. 3a: the history's log-variance columns)."""
    ep = history.column("step")
    series = {k: (ep, history.column(f"log_var_{k}")) for k in ("mean", "min", "max")}
    return {
        "samples": images_figure(samples, 10, f"GRBM samples, {name}"),
        "intermediate_samples": images_figure(
            strip.flatten(0, 1), strip.shape[1], f"Intermediate samples ({steps} steps), {name}"
        ),
        "filters": filters_figure(w, image_shape, len(samples), f"Learned filters, {name}"),
        "log_var": curves(
            series, "epoch", "log variance", f"Learning curve of log variance, {name}"
        ),
    }
