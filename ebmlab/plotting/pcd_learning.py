"""Figures of one PCD training run (RBM learning, deep-EBM learning): the loss at each
evaluation, the validation log-likelihood when there is one, and the persistent chains."""

from __future__ import annotations

from torch import Tensor

from ebmlab.utils.plotting import curves, image_grid


def pcd_figures(
    history, buffer: Tensor, image_shape: tuple, n_show: int, title: str, loss_label: str
) -> dict:
    """{figure name: figure}: ``loss`` (history's ``last_loss``), ``valid_ll`` (history rows
    with ``valid_ll``, if any) and ``buffer`` (the first ``n_show`` chains as images)."""
    steps = [r["step"] for r in history.rows if "last_loss" in r]
    series = {"PCD loss": (steps, history.column("last_loss"))}
    figs = {"loss": curves(series, "iteration", loss_label, title=title)}
    valid = [(r["step"], r["valid_ll"]) for r in history.rows if "valid_ll" in r]
    if valid:
        s, v = zip(*valid)
        figs["valid_ll"] = curves({"valid LL (AIS)": (s, v)}, "iteration", "nats", title=title)
    if n_show:
        show = buffer[:n_show].reshape(-1, *image_shape).float().cpu().numpy()
        figs["buffer"] = image_grid(show, title=f"{title}: persistent chains")
    return figs
