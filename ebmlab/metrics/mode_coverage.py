"""How well a visit histogram on a 2-D grid covers a multimodal target's modes (the ACS toy:
Pynadath et al., ICML 2024, Sec. 4.1, Fig. 1). Each grid point belongs to its nearest mode's
cell (``cells``); ``near`` marks the points within the mode radius of their mode."""

from __future__ import annotations

import torch
from torch import Tensor


def grid_cells(model) -> tuple[Tensor, Tensor]:
    """(nearest mode, distance to it) of every point of a 2-D grid model (``n_states`` values
    per axis, ``modes`` [n_modes, 2], ``nearest_mode``), row-major over [S, S]."""
    v = torch.arange(model.n_states, dtype=model.modes.dtype, device=model.modes.device)
    return model.nearest_mode(torch.cartesian_prod(v, v))


def mode_masses(cells: Tensor, n_modes: int, prob: Tensor) -> Tensor:
    """Mass of each mode's cell under ``prob`` [S, S] -> float64 [n_modes]."""
    flat = prob.reshape(-1).to(torch.float64)
    out = torch.zeros(n_modes, dtype=torch.float64, device=flat.device)
    return out.index_add_(0, cells.to(flat.device), flat)


def mode_scores(visits: Tensor, exact: Tensor, cells: Tensor, near: Tensor, n_modes: int) -> dict:
    """``visits`` [S * S] (row-major counts) against the exact probabilities ``exact`` [S, S]:

    * ``mode_tv``: total variation between the two distributions' masses per mode cell
      (0 = every mode weighted right, close to 1 = stuck in one mode);
    * ``modes_visited``: modes with at least one visit within the radius of their centre;
    * ``tv``: total variation between the visit distribution and ``exact``.
    """
    emp = (visits / visits.sum()).reshape(exact.shape)
    hit = cells[(visits > 0) & near]
    masses = mode_masses(cells, n_modes, emp) - mode_masses(cells, n_modes, exact)
    return {
        "mode_tv": 0.5 * float(masses.abs().sum()),
        "modes_visited": float(hit.unique().numel()),
        "tv": 0.5 * float((emp - exact).abs().sum()),
    }
