"""Gaussian-Bernoulli RBM (Liao et al. 2022, "Gaussian-Bernoulli RBMs Without Tears").

Energy (Eq. 1), with one variance per visible unit, learned as ``log_var``:

    E(v, h) = 1/2 sum_i (v_i - mu_i)^2 / var_i - (v / var)^T W h - b^T h

Marginal ("free") energy of the visibles (Eq. 5):

    F(v) = 1/2 sum_i (v_i - mu_i)^2 / var_i - sum_j softplus((W^T (v / var))_j + b_j)

``log_prob(v) = -F(v)`` (unnormalised). Conditionals: p(v|h) = N(W h + mu, diag(var))
(Eq. 3), p(h_j = 1|v) = sigmoid(W^T (v / var) + b)_j (Eq. 4).

Writing l(v) = W^T (v / var) + b for the hidden logits, E(v, h) = q(v) - h . l(v) with
q(v) = 1/2 sum (v - mu)^2 / var, so every energy below is computed from one matmul.
"""

from __future__ import annotations

import math
from itertools import product

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ebmlab.errors import ConfigError
from ebmlab.models.base import EnergyModel

VAR_MIN = 1e-8  # variances are clamped from below (log_var can drift very negative)


class GRBM(EnergyModel):
    """Gaussian-Bernoulli RBM over v in R^D with H binary hidden units.

    Parameters: ``W`` [D, H], ``b`` [H], ``mu`` [D], ``log_var`` [D]. Initialisation as in
    the paper's code: W ~ N(0, init_std^2) with init_std = 1 / sqrt(D + H) when it is null,
    b = mu = 0, log_var = log(init_var) (paper: init_var = 1).
    """

    state_kind = "continuous"

    def __init__(
        self,
        n_visible: int,
        n_hidden: int,
        init_std: float | None,
        init_var: float,
    ):
        super().__init__()
        if not isinstance(n_visible, int) or n_visible < 1:
            raise ConfigError("n_visible", f"a positive integer (got {n_visible!r})")
        if not isinstance(n_hidden, int) or n_hidden < 1:
            raise ConfigError("n_hidden", f"a positive integer (got {n_hidden!r})")
        if init_std is not None and not (init_std >= 0 and math.isfinite(init_std)):
            raise ConfigError("init_std", f"null or a finite float >= 0 (got {init_std!r})")
        if not (init_var > 0 and math.isfinite(init_var)):
            raise ConfigError("init_var", f"a finite float > 0 (got {init_var!r})")
        self.dim = n_visible
        self.n_visible = n_visible
        self.n_hidden = n_hidden
        self.init_std = 1.0 / math.sqrt(n_visible + n_hidden) if init_std is None else init_std
        self.init_var = float(init_var)
        self.W = nn.Parameter(torch.empty(n_visible, n_hidden))
        self.b = nn.Parameter(torch.zeros(n_hidden))
        self.mu = nn.Parameter(torch.zeros(n_visible))
        self.log_var = nn.Parameter(torch.full((n_visible,), math.log(self.init_var)))
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        with torch.no_grad():
            w = torch.randn(self.W.shape, generator=generator, dtype=self.W.dtype)
            self.W.copy_(w * self.init_std)
            self.b.zero_()
            self.mu.zero_()
            self.log_var.fill_(math.log(self.init_var))

    # ------------------------------------------------------------------ basics
    @property
    def var(self) -> Tensor:
        """sigma^2 [D] (exp(log_var), clamped at 1e-8)."""
        return self.log_var.exp().clamp(min=VAR_MIN)

    def _flat(self, v: Tensor) -> Tensor:
        return v.reshape(v.shape[0], -1)

    def hidden_logits(self, v: Tensor) -> Tensor:
        """l(v) = W^T (v / var) + b, [B, H] (the argument of the sigmoid in Eq. 4)."""
        return (self._flat(v) / self.var) @ self.W + self.b

    def _quad(self, v: Tensor) -> Tensor:
        return 0.5 * ((self._flat(v) - self.mu) ** 2 / self.var).sum(-1)

    def energy_joint(self, v: Tensor, h: Tensor) -> Tensor:
        """E(v, h) of Eq. 1, [B]."""
        return self._quad(v) - (h * self.hidden_logits(v)).sum(-1)

    def free_energy(self, v: Tensor) -> Tensor:
        """Marginal energy F(v) of Eq. 5 = -log sum_h exp(-E(v, h)), [B]."""
        return self._quad(v) - F.softplus(self.hidden_logits(v)).sum(-1)

    def log_prob(self, v: Tensor) -> Tensor:
        return -self.free_energy(v)

    def log_prob_and_grad(self, v: Tensor) -> tuple[Tensor, Tensor]:
        """(-F(v), -dF/dv) analytically (Eq. 21); no autograd graph."""
        with torch.no_grad():
            vf = self._flat(v)
            var = self.var
            logits = (vf / var) @ self.W + self.b
            lp = -(0.5 * ((vf - self.mu) ** 2 / var).sum(-1) - F.softplus(logits).sum(-1))
            g = (torch.sigmoid(logits) @ self.W.T - (vf - self.mu)) / var
        return lp, g.reshape(v.shape)

    def energy_grad_v(self, v: Tensor, h: Tensor) -> Tensor:
        """dE(v, h)/dv = (v - mu - W h) / var (Eq. 28)."""
        return (self._flat(v) - self.mean_v_given_h(h)) / self.var

    # ------------------------------------------------------------ conditionals
    def prob_h_given_v(self, v: Tensor) -> Tensor:
        return torch.sigmoid(self.hidden_logits(v))

    def sample_h_given_v(self, v: Tensor, generator: torch.Generator) -> Tensor:
        p = self.prob_h_given_v(v)
        return (torch.rand(p.shape, generator=generator, device=p.device, dtype=p.dtype) < p).to(
            p.dtype
        )

    def mean_v_given_h(self, h: Tensor) -> Tensor:
        """E[v|h] = W h + mu, [B, D] (also the displayed sample at the end of sampling)."""
        return h @ self.W.T + self.mu

    def sample_v_given_h(self, h: Tensor, generator: torch.Generator) -> Tensor:
        m = self.mean_v_given_h(h)
        noise = torch.randn(m.shape, generator=generator, device=m.device, dtype=m.dtype)
        return m + noise * self.var.sqrt()

    @staticmethod
    def log_bernoulli(h: Tensor, logits: Tensor) -> Tensor:
        """sum_j log Bernoulli(h_j; sigmoid(logits_j)) = sum_j h_j l_j - softplus(l_j), [B]."""
        return (h * logits - F.softplus(logits)).sum(-1)

    # ---------------------------------------------------------- param gradients
    def energy_param_grads(
        self, v: Tensor, h: Tensor | None = None, weights: Tensor | None = None
    ) -> dict[str, Tensor]:
        """Mean over the batch of dE/dtheta (Eq. 14-17), or of dF/dtheta when ``h`` is None
        (Eq. 33-36: h replaced by sigmoid(l(v))). ``weights`` [B] (summing to 1) replaces the
        plain mean. Keys match ``named_parameters``: W, b, mu, log_var."""
        with torch.no_grad():
            vf = self._flat(v)
            var = self.var
            vv = vf / var
            hh = torch.sigmoid(vv @ self.W + self.b) if h is None else h
            if weights is None:
                weights = torch.full((vf.shape[0],), 1.0 / vf.shape[0], device=vf.device)
            w = weights.to(vf.dtype).unsqueeze(1)
            grads = {
                "W": -(vv * w).T @ hh,
                "b": -(hh * w).sum(0),
                "mu": -(((vf - self.mu) / var) * w).sum(0),
                # d/dlog_var of [q(v) - (v/var)^T W h] = -(v-mu)^2/(2 var) + (v/var) * (W h)
                "log_var": ((-0.5 * (vf - self.mu) ** 2 / var + vv * (hh @ self.W.T)) * w).sum(0),
            }
        return grads

    def cd_grads(self, pos, neg) -> dict[str, Tensor]:
        """<dE/dtheta>_data - <dE/dtheta>_model: the gradient of the negative log-likelihood
        estimate (minus Eq. 13 / Eq. 18). ``pos`` and ``neg`` are each ``v`` (marginal
        energy) or a ``(v, h)`` pair (joint energy)."""
        gp = self.energy_param_grads(*_as_pair(pos))
        gn = self.energy_param_grads(*_as_pair(neg))
        return {k: gp[k] - gn[k] for k in gp}

    # ----------------------------------------------- exact results (tiny models)
    def mixture(self) -> tuple[Tensor, Tensor]:
        """The marginal p(v) as a Gaussian mixture over all 2^H hidden states.

        Returns (log_weights [2^H] normalised, means [2^H, D]); every component has
        covariance diag(var). Component h has mean W h + mu and unnormalised log weight
        b.h + 1/2 sum ((W h + mu)^2 - mu^2) / var. Only for H <= 20.
        """
        lw, means = self._mixture_unnormalised()
        return lw - torch.logsumexp(lw, 0), means

    def log_partition(self) -> Tensor:
        """Exact log Z by enumerating h (H <= 20)."""
        lw, _ = self._mixture_unnormalised()
        d = self.n_visible
        return (
            torch.logsumexp(lw, 0)
            + 0.5 * d * math.log(2 * math.pi)
            + 0.5 * torch.log(self.var).sum()
        )

    def _mixture_unnormalised(self) -> tuple[Tensor, Tensor]:
        if self.n_hidden > 20:
            raise ValueError(f"enumerating 2^{self.n_hidden} hidden states is not feasible")
        with torch.no_grad():
            hs = all_binary(self.n_hidden, device=self.W.device, dtype=self.W.dtype)
            means = self.mean_v_given_h(hs)
            lw = hs @ self.b + 0.5 * ((means**2 - self.mu**2) / self.var).sum(-1)
        return lw, means

    def log_partition_grid(self, low: float, high: float, n: int) -> Tensor:
        """log Z by the trapezoid rule on a regular grid over [low, high]^D (D <= 2); for
        models whose hidden layer is too large to enumerate (e.g. the 2-D GMM runs)."""
        if self.n_visible > 2:
            raise ValueError("grid quadrature is only for 1-D or 2-D visibles")
        with torch.no_grad():
            x = torch.linspace(low, high, n, device=self.W.device, dtype=torch.float64)
            wq = torch.full((n,), (high - low) / (n - 1), dtype=torch.float64, device=x.device)
            wq[0] = wq[-1] = wq[0] / 2
            if self.n_visible == 1:
                pts, logw = x[:, None], wq.log()
            else:
                gx, gy = torch.meshgrid(x, x, indexing="ij")
                pts = torch.stack([gx.reshape(-1), gy.reshape(-1)], 1)
                logw = (wq[:, None].log() + wq[None, :].log()).reshape(-1)
            lp = torch.cat([self.log_prob(c.to(self.W.dtype)).double() for c in pts.split(65536)])
            return torch.logsumexp(lp + logw, 0)


def _as_pair(x) -> tuple[Tensor, Tensor | None]:
    if isinstance(x, (tuple, list)):
        return x[0], x[1]
    return x, None


def all_binary(n: int, device=None, dtype=torch.float32) -> Tensor:
    """All 2^n binary vectors, [2^n, n]."""
    return torch.tensor(list(product([0.0, 1.0], repeat=n)), device=device, dtype=dtype).reshape(
        2**n, n
    )
