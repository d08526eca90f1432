"""The 2-D Gaussian-mixture toy data of the GRBM paper (Liao et al. 2022, Sec. 4.1, Fig. 1).

Three components with weights (.33, .33, .34) and means (-5, -5), (5, -5), (0, 5);
per-axis standard deviations (1, 1) for all three ("iso") or (1.25, 0.5), (1.25, 0.5),
(0.5, 1.25) ("aniso"). The paper uses 1,000 points.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ebmlab.errors import ConfigError, check

KINDS = ("iso", "aniso")
WEIGHTS = (0.33, 0.33, 0.34)
MEANS = ((-5.0, -5.0), (5.0, -5.0), (0.0, 5.0))
STDS = {
    "iso": ((1.0, 1.0), (1.0, 1.0), (1.0, 1.0)),
    "aniso": ((1.25, 0.5), (1.25, 0.5), (0.5, 1.25)),
}


def gmm_params(kind: str) -> tuple[Tensor, Tensor, Tensor]:
    """(weights [3], means [3, 2], stds [3, 2]) of the toy mixture."""
    if kind not in KINDS:
        raise ConfigError("kind", f"one of {list(KINDS)} (got {kind!r})")
    return torch.tensor(WEIGHTS), torch.tensor(MEANS), torch.tensor(STDS[kind])


def gmm_toy(kind: str, n: int, generator: torch.Generator | None) -> Tensor:
    """``n`` samples [n, 2] from the toy mixture."""
    if not isinstance(n, int) or n < 1:
        raise ConfigError("n", f"a positive integer (got {n!r})")
    w, m, s = gmm_params(kind)
    comp = torch.multinomial(w, n, replacement=True, generator=generator)
    eps = torch.randn(n, 2, generator=generator)
    return m[comp] + s[comp] * eps


def gmm_toy_log_prob(x: Tensor, kind: str) -> Tensor:
    """Exact (normalised) log density of the toy mixture at x [N, 2]."""
    w, m, s = (t.to(x.dtype).to(x.device) for t in gmm_params(kind))
    z = (x[:, None, :] - m[None]) / s[None]
    comp = -0.5 * (z**2).sum(-1) - torch.log(s).sum(-1) - math.log(2 * math.pi)
    return torch.logsumexp(comp + torch.log(w), dim=1)


class GMMToyDataset:
    """The 2-D mixture of ``ebmlab.data.gmm_toy`` as a config target: ``n_points`` drawn once
    from a generator seeded with ``seed`` (the same points for every sampler and run seed)."""

    def __init__(self, kind: str, n_points: int, seed: int, dim: int):
        if kind not in KINDS:
            raise ConfigError("kind", f"one of {list(KINDS)} (got {kind!r})")
        check(isinstance(n_points, int) and n_points >= 2, "n_points", f">= 2 (got {n_points})")
        check(dim == 2, "dim", f"the mixture is 2-D (got {dim})")
        self.kind, self.n_points, self.seed, self.dim = kind, n_points, int(seed), 2

    def points(self) -> Tensor:
        return gmm_toy(self.kind, self.n_points, torch.Generator().manual_seed(self.seed))

    def fresh(self, n: int, seed: int) -> Tensor:
        return gmm_toy(self.kind, n, torch.Generator().manual_seed(seed))

    def log_prob(self, x: Tensor) -> Tensor:
        return gmm_toy_log_prob(x, self.kind)
