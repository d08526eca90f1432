"""Exact quantities of small binary models by enumerating all 2^d states in chunks."""

from __future__ import annotations

import torch
from torch import Tensor


def binary_states(start: int, stop: int, d: int, device=None) -> Tensor:
    """States start..stop-1 as rows of bits (most significant bit first) [n, d]."""
    idx = torch.arange(start, stop, device=device, dtype=torch.long)
    shifts = torch.arange(d - 1, -1, -1, device=device, dtype=torch.long)
    return ((idx[:, None] >> shifts) & 1).float()


@torch.no_grad()
def exact_log_z_and_mean(model, chunk: int = 1 << 18) -> tuple[float, Tensor]:
    """log Z and E[x] of ``exp(model.log_prob)`` over {0,1}^d (d <= 30)."""
    d = model.dim
    if d > 30:
        raise ValueError(f"exact enumeration needs d <= 30 (got {d})")
    device = model.device
    total = 1 << d
    log_z = torch.tensor(-float("inf"), dtype=torch.float64, device=device)
    weighted = torch.zeros(d, dtype=torch.float64, device=device)  # sum_x p~(x) x / exp(shift)
    for a in range(0, total, chunk):
        x = binary_states(a, min(a + chunk, total), d, device)
        lp = model.log_prob(x).double()
        new_log_z = torch.logaddexp(log_z, torch.logsumexp(lp, 0))
        weighted = weighted * torch.exp(log_z - new_log_z) + (
            torch.exp(lp - new_log_z)[:, None] * x.double()
        ).sum(0)
        log_z = new_log_z
    return float(log_z), weighted.float()
