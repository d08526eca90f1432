"""MLP energy for binary vectors (RMwGGIS Sec. 5.1; ALOE/GWG synthetic experiments)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ebmlab.errors import check
from ebmlab.models.base import EnergyModel


class Swish(nn.Module):
    """x * sigmoid(beta * x) with a learnable scalar beta (initialised to 1)."""

    def __init__(self, learn_beta: bool):
        super().__init__()
        beta = torch.tensor(1.0)
        if learn_beta:
            self.beta = nn.Parameter(beta)
        else:
            self.register_buffer("beta", beta)

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.sigmoid(self.beta * x)


class MLPEnergy(EnergyModel):
    """E(x) = MLP(x): dim -> hidden_dim (x num_layers, Swish) -> 1; ``log_prob = -E``.

    As in the RMwGGIS reference code, ONE Swish module (so one learnable beta) is shared
    by every hidden layer. The input is the raw {0,1} vector.
    """

    state_kind = "binary"

    def __init__(self, dim: int, hidden_dim: int, num_layers: int, learn_beta: bool):
        super().__init__()
        check(dim >= 1, "dim", f"must be a positive integer (got {dim})")
        check(hidden_dim >= 1, "hidden_dim", f"must be a positive integer (got {hidden_dim})")
        check(num_layers >= 1, "num_layers", f"must be an integer >= 1 (got {num_layers})")
        self.dim = dim
        self.act = Swish(learn_beta)
        sizes = [dim] + [hidden_dim] * num_layers
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.out = nn.Linear(hidden_dim, 1)

    def energy(self, x: Tensor) -> Tensor:
        return self._energy_from_first(self.hidden[0](x))

    def _energy_from_first(self, pre: Tensor) -> Tensor:
        """The energy given the first layer's pre-activations W1 x + b1."""
        h = self.act(pre)
        for layer in self.hidden[1:]:
            h = self.act(layer(h))
        return self.out(h).squeeze(-1)

    def flip_deltas(self, x: Tensor, idx: Tensor | None = None) -> Tensor:
        """Flipped neighbours through the first layer's linearity: flipping bit i adds
        (1 - 2 x_i) W1[:, i] to W1 x + b1, so no [n * s, d] input is built or multiplied."""
        pre = self.hidden[0](x)  # [n, H]
        cols = self.hidden[0].weight.t()  # [d, H]
        if idx is None:
            nb = pre[:, None, :] + (1.0 - 2.0 * x)[..., None] * cols
        else:
            nb = pre[:, None, :] + (1.0 - 2.0 * x.gather(1, idx))[..., None] * cols[idx]
        return self._energy_from_first(pre)[:, None] - self._energy_from_first(nb)

    def log_prob(self, x: Tensor) -> Tensor:
        return -self.energy(x)
