"""Metrics of a learned 2-D density against a known Gaussian mixture (GRBM Fig. 1, quantified).

- :func:`grid_metrics`: KL(p_true || p_model) by quadrature on a square grid, the NLL of fresh
  true points, and the model's log Z by the trapezoid rule on a grid twice as wide;
- :func:`mode_stats`: how the model's samples cover the mixture's components;
- :func:`log_density_grid`: a (binary-coded) model's normalised log-density over grid cells
  (RMwGGIS heat maps, tasks/density_modeling.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor


def plot_grid(r: float, n: int, device) -> Tensor:
    """The n x n grid over [-r, r]^2 ([n * n, 2]; x varies fastest)."""
    x = torch.linspace(-r, r, n, device=device)
    gx, gy = torch.meshgrid(x, x, indexing="xy")
    return torch.stack([gx.reshape(-1), gy.reshape(-1)], 1)


@torch.no_grad()
def grid_metrics(
    model,
    true_log_prob: Callable[[Tensor], Tensor],
    test_points: Tensor,
    plot_range: float,
    grid_points: int,
) -> dict[str, float]:
    """``model``: a 2-D GRBM (``log_prob``, ``log_partition_grid``, ``var``); ``true_log_prob``:
    the normalised true log density (float64, CPU). Returns kl = sum_grid p (log p - log q)
    * cell area on [-r, r]^2, test_nll of ``test_points``, log_z (quadrature over [-2r, 2r]^2
    with 2 n - 1 points a side) and the mean visible variance."""
    r, n = plot_range, grid_points
    log_z = float(model.log_partition_grid(-2 * r, 2 * r, 2 * n - 1))
    pts = plot_grid(r, n, model.W.device)
    lp_true = true_log_prob(pts.double().cpu())
    lp_model = model.log_prob(pts).double().cpu() - log_z
    kl = float((lp_true.exp() * (lp_true - lp_model)).sum() * (2 * r / (n - 1)) ** 2)
    test = test_points.to(model.W.device)
    nll = float(-(model.log_prob(test).double() - log_z).mean())
    return {"kl": kl, "test_nll": nll, "log_z": log_z, "mean_var": float(model.var.mean())}


def mode_stats(
    samples: Tensor, weights: Tensor, means: Tensor, stds: Tensor, radius: float
) -> dict[str, float]:
    """Mode coverage of 2-D samples under a mixture (weights [K], means [K, 2], stds [K, 2]).
    A sample is "in" component k when k has the nearest mean and the sample lies within
    ``radius`` standard deviations of it (per-axis Mahalanobis). Returns in_mode (fraction of
    samples in some component), modes_covered (components holding >= 5% of all samples) and
    mode_tv (total variation between the in-mode samples' component frequencies and the
    weights; 1 when no sample is in a mode; collapse onto one of three equal modes gives 0.66)."""
    s = samples.detach().cpu().float()
    k = torch.cdist(s, means).argmin(1)
    inside = (((s - means[k]) / stds[k]) ** 2).sum(1) <= radius**2
    counts = torch.bincount(k[inside], minlength=means.shape[0]).float()
    n_in = float(counts.sum())
    tv = 0.5 * float((counts / n_in - weights).abs().sum()) if n_in > 0 else 1.0
    return {
        "in_mode": n_in / max(s.shape[0], 1),
        "modes_covered": int((counts / max(s.shape[0], 1) >= 0.05).sum()),
        "mode_tv": tv,
    }


def sample_mode_metrics(
    samples: Tensor, shown: Tensor, mixture: tuple, radius: float, true_log_prob: Callable
) -> dict[str, float]:
    """:func:`mode_stats` under ``mixture`` (weights, means, stds) of a sampler's final states
    ``samples`` and of ``shown`` (what GRBM Fig. 1 plots: the conditional means W h + mu at
    those states), each over its finite rows and scaled by their fraction; the samples' mean
    true log density (``true_log_prob``: float64, CPU) and finite fraction."""
    finite, finite_shown = torch.isfinite(samples).all(1), torch.isfinite(shown).all(1)
    ms = mode_stats(samples[finite], *mixture, radius)
    ms_shown = mode_stats(shown[finite_shown], *mixture, radius)
    return {
        "sample_in_mode": ms["in_mode"] * float(finite.float().mean()),
        "sample_modes_covered": ms["modes_covered"],
        "sample_mode_tv": ms["mode_tv"],
        "shown_in_mode": ms_shown["in_mode"] * float(finite_shown.float().mean()),
        "shown_modes_covered": ms_shown["modes_covered"],
        "sample_true_ll": float(true_log_prob(samples[finite].double().cpu()).mean()),
        "sample_finite_fraction": float(finite.float().mean()),
    }


def log_density_grid(model, bits: Tensor, chunk: int = 16384) -> Tensor:
    """Normalised log-density over grid cells: log softmax(-E(grid)) (float64, CPU); ``chunk``:
    rows per forward (memory only)."""
    with torch.no_grad():
        lp = torch.cat([model.log_prob(c) for c in bits.split(chunk)])
    return torch.log_softmax(lp.double().cpu(), dim=0)
