"""Random-walk Metropolis (RWM) on binary {0,1}^d and ordinal {0..S-1}^d models.

The AB paper's RWM baseline (Sec. 5.1): an uninformed symmetric proposal whose
scale is tuned until the average acceptance is 0.234 (Roberts & Rosenthal 2001;
Sun et al. 2022b). Since the proposal is symmetric the MH ratio is p(y)/p(x).

* binary: flip ``r`` distinct uniformly random coordinates, with
  r = 1 + Binomial(d - 1, (rho - 1) / (d - 1)) (mean rho = ``radius``, clipped to
  [1, d - 1]) drawn independently of the state, so the proposal is symmetric.
  A random r keeps the chain irreducible (a fixed even r would preserve the
  parity of |x|) and makes the acceptance rate vary smoothly with rho.
* ordinal: y = x + round(radius * N(0, I)) in every coordinate (a symmetric
  random walk on Z^d); proposals that leave {0..S-1}^d have target mass 0 and
  are rejected without a model evaluation.

:class:`RWMKernel` is the kernel with a fixed radius. :class:`RWM` (``conf/sampler/rwm.yaml``)
is its warm-up, an :class:`~ebmlab.samplers.acceptance_tuning.AcceptanceTuning` of the radius
(Robbins-Monro on log radius towards ``target_accept``) for the first ``adapt_steps`` steps;
its frozen kernel is an exact MH chain.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ebmlab.errors import check
from ebmlab.samplers.acceptance_tuning import AcceptanceTuning
from ebmlab.samplers.base import ChainState, Sampler, StepInfo, log_prob_only, mh_accept
from ebmlab.samplers.spaces import BINARY, ORDINAL, state_space


class RWMKernel(Sampler):
    """Random-walk Metropolis with a fixed ``radius``: binary - mean number of flipped
    coordinates (>= 1); ordinal - std of the rounded-Gaussian step per coordinate."""

    needs_grad = False
    exact = True
    state_spaces = (BINARY, ORDINAL)

    def __init__(self, radius: float):
        check(
            isinstance(radius, (int, float)) and math.isfinite(radius) and radius > 0,
            "radius",
            f"must be a finite number > 0 (got {radius!r})",
        )
        self.radius = float(radius)

    def radius_range(self, model, state: ChainState) -> tuple[float, float]:
        """The range the warm-up keeps the radius in: [1, d - 1] flips (binary), [0.05, S]."""
        kind, S = state_space(model, self)
        D = state.x.reshape(state.x.shape[0], -1).shape[1]
        return (1.0, float(max(D - 1, 1))) if kind == "binary" else (0.05, float(S))

    def _flip_p(self, D: int) -> float:
        """Per-coordinate probability of the d - 1 optional extra flips (binary)."""
        if D <= 1:
            return 0.0
        rho = min(max(self.radius, 1.0), float(D - 1))
        return (rho - 1.0) / (D - 1)

    def propose(self, x: Tensor, kind: str, S: int, generator: torch.Generator):
        """Symmetric proposal y [chains, D] and an in-domain mask [chains]."""
        n, D = x.shape
        if kind == "binary":
            p = self._flip_p(D)
            extra = torch.rand(n, max(D - 1, 1), generator=generator, device=x.device) < p
            r = 1 + extra.sum(1)  # [chains] number of coordinates to flip
            # r distinct uniform coordinates: the r smallest of D iid uniform keys
            keys = torch.rand(n, D, generator=generator, device=x.device)
            rank = keys.argsort(1).argsort(1)
            mask = (rank < r[:, None]).to(x.dtype)
            return x + mask * (1 - 2 * x), torch.ones(n, dtype=torch.bool, device=x.device)
        z = torch.randn(x.shape, generator=generator, device=x.device, dtype=torch.float32)
        y = x + torch.round(self.radius * z).to(x.dtype)
        inside = ((y >= 0) & (y <= S - 1)).all(1)
        return y, inside

    def log_proposal(self, model, x: Tensor, grad: Tensor | None, y: Tensor) -> Tensor:
        """log q(y|x) [batch] of the current (frozen) proposal, for exact kernel tests.

        Rows need not sum to one on the domain (ordinal: mass leaving the box is a
        rejection, which the kernel builder puts on the diagonal).
        """
        kind, S = state_space(model, self)
        xf = x.reshape(x.shape[0], -1).double()
        yf = y.reshape(y.shape[0], -1).double()
        D = xf.shape[1]
        if kind == "binary":
            p, m = self._flip_p(D), max(D - 1, 1)
            r = (xf != yf).sum(-1)
            j = r - 1  # extra flips ~ Binomial(m, p)
            lg = torch.lgamma
            log_binom = lg(torch.tensor(m + 1.0)) - lg(j + 1) - lg(m - j + 1)
            with torch.no_grad():
                lp_j = log_binom + (
                    j * math.log(p) if p > 0 else torch.where(j == 0, 0.0, -torch.inf)
                )
                lp_j = lp_j + (
                    (m - j) * math.log1p(-p) if p < 1 else torch.where(j == m, 0.0, -torch.inf)
                )
            log_comb = lg(torch.tensor(D + 1.0)) - lg(r + 1) - lg(D - r + 1)
            ok = (r >= 1) & (r <= m + 1)
            out = lp_j - log_comb
            return torch.where(ok, out, torch.full_like(out, -torch.inf))
        # P(round(radius z) = delta) = Phi((delta + 1/2) / radius) - Phi((delta - 1/2) / radius)
        delta = yf - xf
        sd = self.radius * math.sqrt(2.0)
        p = 0.5 * (torch.erf((delta + 0.5) / sd) - torch.erf((delta - 0.5) / sd))
        return torch.log(p).sum(-1)

    def step(self, model, state: ChainState, generator: torch.Generator):
        kind, S = state_space(model, self)
        shape = state.x.shape
        x = state.x.reshape(shape[0], -1)
        y, inside = self.propose(x, kind, S, generator)
        y_eval = torch.where(inside[:, None], y, x)  # never evaluate outside the domain
        lp_y = log_prob_only(model, y_eval.reshape(shape))
        wide = torch.promote_types(lp_y.dtype, torch.float32)
        log_ratio = lp_y.to(wide) - state.log_prob.to(wide)
        log_ratio = torch.where(inside, log_ratio, torch.full_like(log_ratio, -torch.inf))
        accepted, accept_prob = mh_accept(log_ratio, generator)
        prop = ChainState(x=y_eval.reshape(shape), log_prob=lp_y)
        new = state.select(accepted, prop)
        jump = (new.x - state.x).abs().reshape(shape[0], -1).sum(-1)
        info = StepInfo(
            accept_prob=accept_prob, accepted=accepted, jump=jump, n_log_prob=1, n_grad=0
        )
        return new, info

    def state_dict(self) -> dict:
        return {"radius": self.radius}

    def load_state_dict(self, d: dict) -> None:
        self.radius = float(d["radius"])


class RWM(AcceptanceTuning):
    """Random-walk Metropolis whose radius is tuned during the first ``adapt_steps`` steps
    (0 = fixed), then frozen: an Adaptation whose frozen kernel is :class:`RWMKernel`.

    radius: the starting radius (see RWMKernel).
    target_accept: acceptance rate the adaptation aims for (0.234, AB Sec. 5.1).
    adapt_rate: Robbins-Monro gain c; log radius += c t^-0.6 (accept - target).
    """

    needs_grad = False
    exact = True  # the frozen kernel
    state_spaces = (BINARY, ORDINAL)
    model_type = None

    def __init__(self, radius: float, adapt_steps: int, target_accept: float, adapt_rate: float):
        kernel = RWMKernel(radius)
        check(
            isinstance(adapt_steps, int) and not isinstance(adapt_steps, bool) and adapt_steps >= 0,
            "adapt_steps",
            f"must be an integer >= 0 (got {adapt_steps!r})",
        )
        check(
            isinstance(target_accept, (int, float)) and 0.0 < target_accept < 1.0,
            "target_accept",
            f"must be in (0, 1) (got {target_accept!r})",
        )
        check(
            isinstance(adapt_rate, (int, float)) and math.isfinite(adapt_rate) and adapt_rate > 0,
            "adapt_rate",
            f"must be a finite number > 0 (got {adapt_rate!r})",
        )
        rate, n = float(adapt_rate), adapt_steps
        super().__init__(kernel, float(target_accept), rate, n, "radius", kernel.radius_range)
