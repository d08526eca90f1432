"""Base class for energy models."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class EnergyModel(nn.Module):
    """An unnormalised density over a discrete (or continuous) space.

    Subclasses set ``dim`` (number of variables), ``state_kind`` ("binary",
    "ordinal", "categorical" or "continuous"), ``n_states`` (for ordinal or
    categorical) and implement ``log_prob``. They may add
    ``log_prob_and_grad(x)`` for an analytic gradient, and override ``l1_parameters`` /
    ``project_`` (used by the learners) when some parameters are penalised or constrained.
    Binary models may add exact single-flip updates for GWG-1 and Gibbs-1: ``flip_cache(x,
    with_grad)``, ``flip_update(y, idx, cache, with_grad)`` and ``flip_tag()`` (see
    :class:`ebmlab.models.rbm.BernoulliRBM`).
    """

    dim: int
    state_kind: str = "binary"
    n_states: int = 2

    def log_prob(self, x: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def energy(self, x: Tensor) -> Tensor:
        return -self.log_prob(x)

    def l1_parameters(self) -> list[Tensor]:
        """Parameters a learner's L1 penalty applies to (none unless a model says so)."""
        return []

    def project_(self) -> None:
        """Restore parameter constraints after an optimiser step (none unless a model says so)."""

    @property
    def device(self) -> torch.device:
        for p in self.parameters():
            return p.device
        for b in self.buffers():
            return b.device
        return torch.device("cpu")
