"""Ising models on binary x in {0,1}^d with spins s = 2x - 1.

log p(x) = s^T J s + b.s   (each edge counted twice, PROTOCOLS.md "Ising models";
GWG/DLP lattice convention with J = sigma * adjacency).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ebmlab.data.lattices import ba_adjacency, lattice_adjacency
from ebmlab.errors import check
from ebmlab.models.base import EnergyModel


class _IsingBase(EnergyModel):
    state_kind = "binary"

    def _coupling(self) -> Tensor:
        raise NotImplementedError

    def _field(self) -> Tensor:
        raise NotImplementedError

    def log_prob(self, x: Tensor) -> Tensor:
        s = 2.0 * x - 1.0
        j, b = self._coupling(), self._field()
        return ((s @ j) * s).sum(-1) + s @ b

    def log_prob_and_grad(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Analytic gradient w.r.t. x: d/dx = 2 d/ds = 2 (2 J s + b) for symmetric J."""
        with torch.no_grad():
            s = 2.0 * x - 1.0
            j, b = self._coupling(), self._field()
            js = s @ j
            lp = (js * s).sum(-1) + s @ b
            return lp, 2.0 * (2.0 * js + b)

    def flip_deltas(self, x: Tensor, idx: Tensor | None = None) -> Tensor:
        """Closed form of every single flip: with s' = s - 2 s_i e_i and J_sym = (J + J^T)/2,
        log p(x') - log p(x) = -4 s_i (J_sym s)_i + 4 J_ii - 2 s_i b_i; one [n, d] x [d, d]
        product (generic: [n * d, d] x [d, d]). Same values and parameter gradients."""
        s = 2.0 * x - 1.0
        j, b = self._coupling(), self._field()
        js = s @ (0.5 * (j + j.t()))
        out = 4.0 * (torch.diagonal(j) - s * js) - 2.0 * s * b
        return out if idx is None else out.gather(1, idx)

    # -- single-coordinate flips (GWG-1, Gibbs-1) ----------------------------------------------
    def flip_tag(self) -> tuple:
        """Identifies the parameter values a flip cache belongs to (changes when they do)."""
        return tuple((id(t), t._version) for t in (self._coupling(), self._field()))

    @torch.no_grad()
    def flip_cache(self, x: Tensor, with_grad: bool) -> tuple[Tensor, Tensor | None, Tensor]:
        """(log p(x), its gradient or None, the flip cache s J in float64 [B, d])."""
        s = 2.0 * x - 1.0
        j, b = self._coupling(), self._field()
        js = s @ j
        lp = (js * s).sum(-1) + s @ b
        return lp, (2.0 * (2.0 * js + b) if with_grad else None), js.double()

    @torch.no_grad()
    def flip_update(
        self, y: Tensor, idx: Tensor, cache: Tensor, with_grad: bool
    ) -> tuple[Tensor, Tensor | None, Tensor]:
        """(log p(y), its gradient or None, the cache at y) for ``y`` = the state of ``cache``
        with coordinate ``idx[b]`` of chain b flipped: s_y J = s_x J + 2 s_{y,i} J[i, :], so
        no d x d product (float64 cache: no drift over many flips)."""
        j, b = self._coupling(), self._field()
        rows = torch.arange(y.shape[0], device=y.device)
        s = 2.0 * y - 1.0
        coef = (2.0 * s[rows, idx]).to(cache.dtype)
        cache_y = torch.addcmul(cache, coef[:, None], j[idx].to(cache.dtype))
        js = cache_y.to(j.dtype)
        lp = (js * s).sum(-1) + s @ b
        return lp, (2.0 * (2.0 * js + b) if with_grad else None), cache_y


class LatticeIsing(_IsingBase):
    """Periodic n_side x n_side lattice Ising with J = sigma * adjacency and uniform bias."""

    def __init__(self, n_side: int, sigma: float, bias: float):
        super().__init__()
        check(n_side >= 2, "n_side", f"lattice side must be an integer >= 2 (got {n_side})")
        check(sigma == sigma and abs(sigma) < 1e6, "sigma", f"must be finite (got {sigma})")
        self.n_side, self.sigma, self.bias_value = n_side, sigma, bias
        self.dim = n_side * n_side
        self.register_buffer("adjacency", lattice_adjacency(n_side))
        self.register_buffer("J", sigma * self.adjacency)
        self.register_buffer("b", torch.full((self.dim,), float(bias)))

    def _coupling(self) -> Tensor:
        return self.J

    def _field(self) -> Tensor:
        return self.b


class BAIsing(_IsingBase):
    """Ising model on a Barabasi-Albert graph (AB paper App. B): J = sigma * adjacency."""

    def __init__(
        self,
        n_nodes: int,
        n_attach: int,
        sigma: float,
        bias: float,
        graph_seed: int,
    ):
        super().__init__()
        check(n_nodes >= 2, "n_nodes", f"must be >= 2 (got {n_nodes})")
        check(1 <= n_attach < n_nodes, "n_attach", f"must be in [1, n_nodes) (got {n_attach})")
        self.dim = n_nodes
        self.register_buffer("adjacency", ba_adjacency(n_nodes, n_attach, graph_seed))
        self.register_buffer("J", sigma * self.adjacency)
        self.register_buffer("b", torch.full((n_nodes,), float(bias)))

    def _coupling(self) -> Tensor:
        return self.J

    def _field(self) -> Tensor:
        return self.b


class DenseIsing(_IsingBase):
    """Learnable dense Ising (DLP 7.3.1): J init N(0,1)*init_scale, symmetric, zero diagonal."""

    def __init__(self, dim: int, init_scale: float, learn_bias: bool):
        super().__init__()
        check(dim >= 2, "dim", f"must be >= 2 (got {dim})")
        check(init_scale >= 0, "init_scale", f"must be >= 0 (got {init_scale})")
        self.dim = dim
        self.J_raw = nn.Parameter(torch.randn(dim, dim) * init_scale)
        self.bias = nn.Parameter(torch.zeros(dim), requires_grad=learn_bias)
        self.project_()

    def _coupling(self) -> Tensor:
        return self.J_raw

    def _field(self) -> Tensor:
        return self.bias

    @property
    def J(self) -> Tensor:
        return self.J_raw

    def l1_parameters(self) -> list[Tensor]:
        return [self.J_raw]

    @torch.no_grad()
    def project_(self) -> None:
        """Symmetrise J and zero its diagonal (after every optimiser step)."""
        j = 0.5 * (self.J_raw + self.J_raw.t())
        j.fill_diagonal_(0.0)
        self.J_raw.copy_(j)
