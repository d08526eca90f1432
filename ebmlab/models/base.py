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
    :class:`ebmlab.models.rbm.BernoulliRBM`), and may override :meth:`flip_deltas` (the
    neighbour terms of ratio matching) with a cheaper exact form.
    """

    dim: int
    state_kind: str = "binary"
    n_states: int = 2

    def log_prob(self, x: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def energy(self, x: Tensor) -> Tensor:
        return -self.log_prob(x)

    def flip_deltas(self, x: Tensor, idx: Tensor | None = None) -> Tensor:
        """log p(x_b with bit idx[b, t] flipped) - log p(x_b) for binary ``x`` [n, d],
        differentiable in the parameters: [n, s], or [n, d] over every bit when ``idx`` is
        None. This generic form evaluates the flipped vectors as one batch."""
        n, d = x.shape
        nb = flip_all(x) if idx is None else flip_at(x, idx)
        return self.log_prob(nb.reshape(-1, d)).reshape(n, -1) - self.log_prob(x)[:, None]

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


def flip_all(x: Tensor) -> Tensor:
    """All single-bit flips: [n, d] -> [n, d, d] with out[b, i] = x_b with bit i flipped."""
    d = x.shape[-1]
    out = x[:, None, :].repeat(1, d, 1)
    out.diagonal(dim1=1, dim2=2).copy_(1.0 - x)  # one [n, d, d] allocation, no temporaries
    return out


def flip_at(x: Tensor, idx: Tensor) -> Tensor:
    """x [n, d], idx [n, s] -> [n, s, d] with out[b, t] = flip_{idx[b, t]}(x_b)."""
    out = x[:, None, :].repeat(1, idx.shape[1], 1)  # one [n, s, d] allocation, no one-hot
    return out.scatter_(2, idx[..., None], (1.0 - x.gather(1, idx))[..., None])
