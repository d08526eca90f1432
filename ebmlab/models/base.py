"""Base class for energy models."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class EnergyModel(nn.Module):
    """An unnormalised density over a discrete (or continuous) space.

    Subclasses set ``dim`` (number of variables), ``state_kind`` ("binary",
    "ordinal", "categorical" or "continuous"), ``n_states`` (for ordinal or
    categorical) and implement ``log_prob``. They may add
    ``log_prob_and_grad(x)`` for an analytic gradient.
    """

    dim: int
    state_kind: str = "binary"
    n_states: int = 2

    def log_prob(self, x: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def energy(self, x: Tensor) -> Tensor:
        return -self.log_prob(x)

    @property
    def device(self) -> torch.device:
        for p in self.parameters():
            return p.device
        for b in self.buffers():
            return b.device
        return torch.device("cpu")
