"""A trained model at another temperature: p_theta(x)^beta (beta > 1 cools, beta < 1 heats).

Ratio matching with the RMwGGIS paper's Eq. (3) learns p_data^(1/4) (docs/ratio_matching.md):
the investigations sample ``Tempered(model, 4)`` to see whether cooling such a model by the
predicted factor gives back the data, and ``Tempered(model, 1/4)`` to see what the data at
temperature 4 looks like under a consistently trained model.
"""

from __future__ import annotations

from torch import Tensor

from ebmlab.models.base import EnergyModel


class Tempered(EnergyModel):
    """log p_beta(x) = beta log p_theta(x) (unnormalised); no parameters of its own."""

    def __init__(self, inner: EnergyModel, beta: float):
        super().__init__()
        if not beta > 0:
            raise ValueError(f"beta must be positive (got {beta})")
        self.inner, self.beta = inner, float(beta)
        self.dim, self.state_kind, self.n_states = inner.dim, inner.state_kind, inner.n_states

    def log_prob(self, x: Tensor) -> Tensor:
        return self.beta * self.inner.log_prob(x)

    def flip_deltas(self, x: Tensor, idx: Tensor | None = None) -> Tensor:
        return self.beta * self.inner.flip_deltas(x, idx)
