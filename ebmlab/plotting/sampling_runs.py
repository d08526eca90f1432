"""Per-run figures the sampling tasks share: a curve against steps and against seconds, and
the first chains of a run shown as images."""

from __future__ import annotations

from torch import Tensor

from ebmlab.utils.plotting import image_grid, side_by_side


def vs_steps_and_seconds(
    label: str, steps, seconds, values, ylabel: str, title: str, seconds_axis=("seconds", None)
):
    """``values`` against ``steps`` and against ``seconds``, side by side; ``seconds_axis``:
    (x label, y label) of the second panel (y label None: ``ylabel``)."""
    xlabel, y2 = seconds_axis
    return side_by_side(
        [
            ("vs steps", {label: (steps, values)}, "step", ylabel),
            ("vs seconds", {label: (seconds, values)}, xlabel, ylabel if y2 is None else y2),
        ],
        title=title,
    )


def chain_images(x: Tensor, n_show: int, image_shape, title: str, n_cols: int = 10):
    """The first ``n_show`` rows of ``x`` (states in [0, 1]) as an image grid."""
    show = x[:n_show].reshape(-1, *image_shape).float().cpu().numpy()
    return image_grid(show, n_cols=n_cols, title=title)
