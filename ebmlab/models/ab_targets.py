"""Synthetic sampling targets of the AB paper (Sun et al., ICLR 2023, Sec. 5.2-5.3, App. B).

* :class:`LatticeGaussian` - f(x) = -1/2 (x - b)^T A (x - b) on {0..20}^100 (Sec. 5.2), with
  a rotated (A = P^T Lambda P) or sparse cycle (A = Lambda M Lambda) precision of
  low / medium / high condition L = 2 / 10 / 50 (App. B.3, Tables 4-5).
* :class:`BayesianLogisticRegression` - posterior of beta in {0,1}^100 under a uniform prior
  with m = 50 observations (Eq. 22, App. B.4).
* :class:`QuarticMixture` - f(x) = log sum_k exp(-poly4_k(x)) on {0..20}^50 with K = 50
  components (Eq. 23, App. B.5).

Every target is generated from a fixed ``seed`` (float64 generation, stored in the default
dtype) and has an analytic ``log_prob_and_grad``. Where the paper's appendix text is
incomplete, the choice made here is stated in the class docstring and exposed as an option.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import functional as F

from ebmlab.errors import check
from ebmlab.models.base import EnergyModel

CONDITIONS = {"low": 2.0, "medium": 10.0, "high": 50.0}


def _pos_int(v, key: str, minimum: int = 1) -> None:
    check(
        isinstance(v, int) and not isinstance(v, bool) and v >= minimum,
        key,
        f"must be an integer >= {minimum} (got {v!r})",
    )


def _orthogonal(d: int, g: torch.Generator) -> Tensor:
    """Haar-random orthogonal matrix [d, d] (QR of a Gaussian with sign fix), float64."""
    q, r = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))[None, :]


class LatticeGaussian(EnergyModel):
    """Lattice Gaussian f(x) = -1/2 (x - b)^T A (x - b) on {0..n_states-1}^dim (AB Sec. 5.2).

    structure "rotated": A = P^T diag(lambda) P, P Haar-orthogonal, lambda linearly spaced
        from 1 to L, so cond(A) = L exactly. [Assumption: App. B.3's text for the rotated
        case is lost apart from "generate orthogonal P, W = -P Lambda P^T"; the spacing of
        Lambda is chosen to give condition number L like the sparse case.]
    structure "sparse": A = Lambda M Lambda, M = I + cyclic tridiagonal with off-diagonal
        entries N(0, 0.04) (variance 0.04), Lambda_ii = (1 + (i-1)(L-1)/(d-1))^(1/2), so
        diag(A) runs from 1 to L (App. B.3; the paper's d - 1 = 99). M is redrawn (next
        draws of the same generator) until positive definite.
    condition: L, or "low"/"medium"/"high" = 2/10/50 (Tables 4-5).
    center: b = center * 1; null = the paper's choice: 0 for sparse (App. B.3: "bias
        vector b = 0"), and the box centre (n_states-1)/2 for rotated [assumption].

    The paper writes W = -P Lambda P^T with f = 1/2 (x-b)^T W (x-b) in App. B.3 and
    f = -1/2 (x-b)^T W (x-b) with W = P^T Lambda P in Sec. 5.2; both mean precision A >= 0.
    """

    state_kind = "ordinal"

    def __init__(
        self,
        structure: str,
        condition: float | str,
        dim: int,
        n_states: int,
        center: float | None,
        seed: int,
    ):
        super().__init__()
        check(
            structure in ("rotated", "sparse"),
            "structure",
            f"must be 'rotated' or 'sparse' (got {structure!r})",
        )
        if isinstance(condition, str):
            check(
                condition in CONDITIONS,
                "condition",
                f"must be one of {list(CONDITIONS)} or a number >= 1 (got {condition!r})",
            )
            L = CONDITIONS[condition]
        else:
            L = condition
        check(
            isinstance(L, (int, float)) and not isinstance(L, bool) and 1 <= L < 1e8,
            "condition",
            f"must be one of {list(CONDITIONS)} or a number >= 1 (got {condition!r})",
        )
        _pos_int(dim, "dim", 3 if structure == "sparse" else 1)
        _pos_int(n_states, "n_states", 2)
        check(
            center is None or (isinstance(center, (int, float)) and math.isfinite(center)),
            "center",
            f"must be a finite number or null (got {center!r})",
        )
        _pos_int(seed, "seed", 0)
        self.structure, self.condition_value = structure, float(L)
        self.dim, self.n_states = dim, n_states
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(dim, dtype=torch.float64) / max(dim - 1, 1)
        if structure == "rotated":
            P = _orthogonal(dim, g)
            A = P.T @ torch.diag(1.0 + t * (L - 1.0)) @ P
            default_center = (n_states - 1) / 2
        else:
            lam = torch.sqrt(1.0 + t * (L - 1.0))
            for _ in range(100):
                off = torch.randn(dim, generator=g, dtype=torch.float64) * 0.2
                M = torch.eye(dim, dtype=torch.float64)
                i = torch.arange(dim)
                M[i, (i + 1) % dim] = off
                M[(i + 1) % dim, i] = off
                if torch.linalg.eigvalsh(M).min() > 0:
                    break
            else:  # pragma: no cover - essentially impossible for d >= 3
                raise RuntimeError("could not draw a positive definite cycle matrix M")
            A = lam[:, None] * M * lam[None, :]
            default_center = 0.0
        A = 0.5 * (A + A.T)
        c = default_center if center is None else float(center)
        dt = torch.get_default_dtype()
        self.register_buffer("A", A.to(dt))
        self.register_buffer("b", torch.full((dim,), float(c), dtype=dt))

    def precision(self) -> Tensor:
        return self.A

    def log_prob(self, x: Tensor) -> Tensor:
        z = x.to(self.A.dtype) - self.b
        return -0.5 * ((z @ self.A) * z).sum(-1)

    def log_prob_and_grad(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """f and grad f = -A (x - b)."""
        with torch.no_grad():
            z = x.to(self.A.dtype) - self.b
            Az = z @ self.A
            return -0.5 * (Az * z).sum(-1), -Az


class BayesianLogisticRegression(EnergyModel):
    """Posterior of beta in {0,1}^dim for y ~ Bernoulli(sigmoid(X beta)), uniform prior (AB Eq. 22).

    f(beta) = sum_i [y_i log sigmoid(v_i) + (1 - y_i) log sigmoid(-v_i)], v = X beta.
    Data (App. B.4): rows X_i ~ N(0, 0.25 Lambda Sigma Lambda), Sigma_ii = 1.25,
    Sigma_ij = 0.25, Lambda_ii = exp(-0.25 + (i-1)/(d-1)); true beta_i = 1 for the first
    ``n_active`` = 7 coordinates, 0 after; y_i ~ Bernoulli(sigmoid(X_i beta_true)).
    """

    state_kind = "binary"

    def __init__(self, dim: int, n_data: int, n_active: int, seed: int):
        super().__init__()
        _pos_int(dim, "dim", 2)
        _pos_int(n_data, "n_data")
        _pos_int(n_active, "n_active", 0)
        check(n_active <= dim, "n_active", f"must be <= dim = {dim} (got {n_active!r})")
        _pos_int(seed, "seed", 0)
        self.dim, self.n_data, self.n_active = dim, n_data, n_active
        g = torch.Generator().manual_seed(seed)
        lam = torch.exp(-0.25 + torch.arange(dim, dtype=torch.float64) / (dim - 1))
        sigma = torch.full((dim, dim), 0.25, dtype=torch.float64) + torch.eye(
            dim, dtype=torch.float64
        )
        cov = 0.25 * lam[:, None] * sigma * lam[None, :]
        chol = torch.linalg.cholesky(cov)
        X = torch.randn(n_data, dim, generator=g, dtype=torch.float64) @ chol.T
        beta = torch.zeros(dim, dtype=torch.float64)
        beta[:n_active] = 1.0
        y = (torch.rand(n_data, generator=g, dtype=torch.float64) < torch.sigmoid(X @ beta)).to(
            torch.float64
        )
        dt = torch.get_default_dtype()
        self.register_buffer("X", X.to(dt))
        self.register_buffer("y", y.to(dt))
        self.register_buffer("beta_true", beta.to(dt))

    def log_prob(self, x: Tensor) -> Tensor:
        v = x.to(self.X.dtype) @ self.X.T  # [batch, m]
        return (self.y * F.logsigmoid(v) + (1 - self.y) * F.logsigmoid(-v)).sum(-1)

    def log_prob_and_grad(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """f and grad f = X^T (y - sigmoid(X beta))."""
        with torch.no_grad():
            v = x.to(self.X.dtype) @ self.X.T
            lp = (self.y * F.logsigmoid(v) + (1 - self.y) * F.logsigmoid(-v)).sum(-1)
            return lp, (self.y - torch.sigmoid(v)) @ self.X


class QuarticMixture(EnergyModel):
    """Quartic mixture f(x) = log sum_k exp(-poly4_k(x)) on {0..n_states-1}^dim (AB Eq. 23).

    App. B.5 (following Rhodes & Gutmann 2022) gives component offsets b_k = (k-1)/(K-1) 1,
    scales s_i = scale * exp(-0.5 + (i-1)/(n-1)) with scale = 20 and a rotation P shared
    by all components; the defining formulas themselves are lost from the available text.
    Reconstruction used here [assumption, documented]: with x~ = x / (n_states - 1) in
    [0, 1]^d and s over all d coordinates,

        u_k = s * (P (x~ - b_k)),   poly4_k(x) = sum_i u_{k,i}^4,

    i.e. K quartic bumps centred on the diagonal of the box, of width about
    (n_states - 1) / s_i lattice units in the rotated coordinates.
    """

    state_kind = "ordinal"

    def __init__(
        self,
        dim: int,
        n_states: int,
        n_components: int,
        scale: float,
        seed: int,
    ):
        super().__init__()
        _pos_int(dim, "dim", 2)
        _pos_int(n_states, "n_states", 2)
        _pos_int(n_components, "n_components", 1)
        check(
            isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0,
            "scale",
            f"must be a finite number > 0 (got {scale!r})",
        )
        _pos_int(seed, "seed", 0)
        self.dim, self.n_states, self.n_components = dim, n_states, n_components
        g = torch.Generator().manual_seed(seed)
        K = n_components
        s = scale * torch.exp(-0.5 + torch.arange(dim, dtype=torch.float64) / (dim - 1))
        offs = torch.arange(K, dtype=torch.float64) / max(K - 1, 1)
        P = _orthogonal(dim, g)
        dt = torch.get_default_dtype()
        self.register_buffer("P", P.to(dt))
        self.register_buffer("s", s.to(dt))
        self.register_buffer("offsets", offs.to(dt))  # b_k = offsets[k] * 1
        self.register_buffer("P1", P.sum(1).to(dt))  # P @ 1

    def _u(self, x: Tensor) -> Tensor:
        """u [batch, K, d] = s * (P x~ - b_k P 1)."""
        xt = x.to(self.P.dtype) / (self.n_states - 1)
        px = xt @ self.P.T  # [batch, d]
        return self.s * (px[:, None, :] - self.offsets[None, :, None] * self.P1[None, None, :])

    def log_prob(self, x: Tensor) -> Tensor:
        u = self._u(x)
        return torch.logsumexp(-(u**4).sum(-1), dim=-1)

    def log_prob_and_grad(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """f and grad f = -sum_k w_k P^T (4 s u_k^3) / (n_states - 1), w = softmax(-poly4)."""
        with torch.no_grad():
            u = self._u(x)
            logits = -(u**4).sum(-1)  # [batch, K]
            lp = torch.logsumexp(logits, -1)
            w = torch.softmax(logits, -1)
            gu = (w[:, :, None] * 4 * u**3).sum(1) * self.s  # d/d(P x~) of sum_k w_k poly_k
            return lp, -(gu @ self.P) / (self.n_states - 1)
