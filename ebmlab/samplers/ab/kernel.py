"""Any-scale balanced (AB) kernels with FIXED parameters (Sun, Dai, Xia & Schuurmans, ICLR 2023).

Every AB proposal is the factorised Langevin proposal of :mod:`ebmlab.samplers.proposals`
(possibly given an auxiliary variable) with gradient weight ``alpha`` and a precision ``P``:
per coordinate the log-weights are ``b_i (v - x_i) - P_i (v - x_i)^2 / 2`` with
``b = alpha grad f(x)`` (+ the auxiliary term below). The members differ in P:

- AB-1st (Eq. 11 with W = 0): ``P = 1/sigma``; alpha = 1/2 is DMALA with step size sigma.
- AB-diag (Sec. 5.4, App. B.6): ``P = 1/sigma - diag_sign * alpha * W_ii``, W_ii = 1 / (1 + var_i)
  from the data's per-coordinate variance (no Gaussian trick).
- DLP-trace (Sec. 5.1): alpha = 1/2 with the anisotropic kernel ``exp(-z^T D z / (2 sigma))``:
  ``P = D / sigma`` (the paper prints ``/ sigma``; the 2 is absorbed so that D = I is DLP).
- Quadratic AB (Eq. 11-15, App. A.5; AB-shift / -max / -trace by how D was chosen): the
  Gaussian integral trick with ``A = W + D = B^T B``. The auxiliary variable is
  ``u | x ~ N(B x, I / alpha)`` (variance 1/alpha gives Eq. 14's conditional; alpha = 1 is the
  text's N(., I)) and ``y | x, u`` factorises with ``P = alpha D + 1/sigma`` and
  ``b = alpha (g - W x + B^T u) + x / sigma - P x`` (Eq. 14 as printed drops the kernel's
  ``y.x / sigma`` term). Writing ``u = B x + xi / sqrt(alpha)``, ``eta = B^T xi ~ N(0, A)``:
  forward ``b = alpha g(x) + sqrt(alpha) eta``; reverse (same u)
  ``b' = alpha (g(y) + A (x - y)) + sqrt(alpha) eta``; the MH ratio of Eq. 15 adds
  ``log N(u; B y) - log N(u; B x) = -sqrt(alpha) eta.(x - y) - alpha/2 (x - y)^T A (x - y)``.
  An exact MH kernel on (x, u) for any W and D (Gibbs refresh of u, then MH on x). W is
  stored as ``B^T B - D`` so the formulas hold exactly. For a quadratic target with W its
  Hessian, alpha = 1 and sigma = inf, every proposal is accepted.

Every step costs one log_prob and one gradient evaluation, like DMALA. Adaptation of
(sigma, alpha), W and D lives in :mod:`ebmlab.samplers.ab.adapt`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from torch import Tensor

from ebmlab.errors import check
from ebmlab.samplers import proposals
from ebmlab.samplers.base import ChainState, Sampler, StepInfo, mh_accept, value_and_grad
from ebmlab.samplers.proposals import Langevin
from ebmlab.samplers.spaces import BINARY, ORDINAL, state_space


def _wide(t: Tensor) -> Tensor:
    dt = torch.promote_types(t.dtype, torch.float32)
    return t if t.dtype == dt else t.to(dt)


def _finite_positive(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf


@dataclass
class GaussianTrick:
    """The fixed pieces of the quadratic proposal: ``A = W + D = B^T B`` (float64, CPU).

    ``lambda_min`` is the smallest eigenvalue of W + D before clipping at 0.
    """

    W: Tensor
    D: Tensor
    A: Tensor
    B: Tensor
    lambda_min: float
    sqrt_seconds: float = 0.0
    _cache: tuple | None = field(default=None, repr=False)

    @classmethod
    def factor(cls, W: Tensor, D: Tensor) -> GaussianTrick:
        """Factor W + D (eigendecomposition, float64, clipped at 0); W becomes B^T B - D."""
        t0 = time.perf_counter()
        lam, V = torch.linalg.eigh(W + torch.diag(D))
        B = (V * lam.clamp_min(0.0).sqrt()).T  # B^T B = V diag(lam+) V^T
        A = B.T @ B
        A = 0.5 * (A + A.T)
        return cls(A - torch.diag(D), D, A, B, float(lam[0]), time.perf_counter() - t0)

    def on(self, dtype, device) -> tuple[Tensor, Tensor, Tensor]:
        """(A, B, D) cast to the chains' dtype and device (cached)."""
        key = (dtype, device)
        if self._cache is None or self._cache[0] != key:
            mats = tuple(m.to(device, dtype) for m in (self.A, self.B, self.D))
            self._cache = (key, *mats)
        return self._cache[1:]

    def state_dict(self) -> dict:
        return {"W": self.W, "D": self.D, "A": self.A, "B": self.B, "lambda_min": self.lambda_min}

    @classmethod
    def from_state_dict(cls, d: dict) -> GaussianTrick:
        W, D, A, B = (d[k].to("cpu", torch.float64) for k in ("W", "D", "A", "B"))
        return cls(W, D, A, B, float(d["lambda_min"]))


class ABProposal(NamedTuple):
    """One AB proposal: flat (wide) x, y and gradients, the standard normal ``xi`` behind the
    auxiliary variable (None without the Gaussian trick), the proposed chain state, the MH
    log-ratio (Eq. 15 for the quadratic proposal) and the jump |y - x|_1 [chains].
    ``current`` is the input state with the proposal's forward terms cached in ``aux``
    (None: the input state as it was)."""

    x: Tensor
    y: Tensor
    gx: Tensor
    gy: Tensor
    xi: Tensor | None
    proposed: ChainState
    log_ratio: Tensor
    jump: Tensor
    current: ChainState | None = None


class AB1stKernel(Sampler):
    """AB-1st with fixed (sigma, alpha): weight alpha, precision 1/sigma (AB Eq. 11, W = 0)."""

    needs_grad = True
    exact = True
    state_spaces = (BINARY, ORDINAL)

    def __init__(self, sigma: float, alpha: float):
        check(_finite_positive(sigma), "sigma", f"must be a finite number > 0 (got {sigma!r})")
        check(_finite_positive(alpha), "alpha", f"must be a finite number > 0 (got {alpha!r})")
        self.sigma, self.alpha = float(sigma), float(alpha)

    def precision(self, sigma: float, alpha: float, device, dtype):
        """P of the factorised (auxiliary-free) proposal: a float or a [d] tensor."""
        return 1.0 / sigma

    def _proposal(self, sigma: float, alpha: float, x: Tensor) -> Langevin:
        return Langevin(alpha, precision=self.precision(sigma, alpha, x.device, x.dtype))

    def log_proposal(self, model, x: Tensor, grad: Tensor, y: Tensor) -> Tensor:
        """log q(y|x) [batch] (for exact-kernel tests)."""
        space = state_space(model, self)
        x, grad, y = (_wide(t.reshape(t.shape[0], -1)) for t in (x, grad, y))
        return proposals.log_q(space, x, grad, self._proposal(self.sigma, self.alpha, x), y)

    def propose(self, model, state: ChainState, generator, sigma: float, alpha: float):
        """One proposal at (sigma, alpha) and its MH log-ratio; ``state`` carries the grad."""
        space = state_space(model, self)
        shape, n = state.x.shape, state.x.shape[0]
        x = _wide(state.x.reshape(n, -1))
        gx = _wide(state.grad.reshape(n, -1))
        p = self._proposal(sigma, alpha, x)
        if space.kind == BINARY:
            mv = proposals.binary_move(model, state, x, gx, p, generator, True)
            lp_y = mv.proposed.log_prob
            log_ratio = _wide(lp_y) - _wide(state.log_prob) + mv.rev - mv.fwd
            jump = mv.flip.sum(-1)
            return ABProposal(x, mv.y, gx, mv.gy, None, mv.proposed, log_ratio, jump, mv.current)
        y, fwd, jump = proposals.propose(space, x, gx, p, generator)
        lp_y, g_y = value_and_grad(model, y.to(state.x.dtype).reshape(shape))
        gy = _wide(g_y.reshape(n, -1))
        rev = proposals.log_q(space, y, gy, p, x)
        log_ratio = _wide(lp_y) - _wide(state.log_prob) + rev - fwd
        proposed = ChainState(x=y.to(state.x.dtype).reshape(shape), log_prob=lp_y, grad=g_y)
        return ABProposal(x, y, gx, gy, None, proposed, log_ratio, jump)

    def move(self, model, state: ChainState, generator, sigma: float, alpha: float, observe):
        """One MH step at (sigma, alpha): (new state, StepInfo, the ABProposal).

        ``observe`` (a callable or None) sees the ABProposal before the move is taken; after
        it, the proposal's tensors may hold the kept states in the rows of rejected chains
        (the binary kernels reuse them for the new state)."""
        extra = 0
        if state.grad is None:  # state built by a gradient-free sampler: fill the cache
            lp, g = value_and_grad(model, state.x)
            state, extra = state.replace(log_prob=lp, grad=g), 1
        pr = self.propose(model, state, generator, sigma, alpha)
        accepted, accept_prob = mh_accept(pr.log_ratio, generator)
        if observe is not None:
            observe(pr)
        if pr.current is None:
            new = state.select(accepted, pr.proposed)
        else:
            new = pr.current.merge(accepted, pr.proposed)
        jump = pr.jump * accepted.to(pr.jump.dtype)
        info = StepInfo(accept_prob, accepted, jump, n_log_prob=1 + extra, n_grad=1 + extra)
        return new, info, pr

    def step(self, model, state: ChainState, generator: torch.Generator):
        new, info, _ = self.move(model, state, generator, self.sigma, self.alpha, None)
        return new, info

    def state_dict(self) -> dict:
        return {"sigma": self.sigma, "alpha": self.alpha}

    def load_state_dict(self, d: dict) -> None:
        self.sigma, self.alpha = float(d["sigma"]), float(d["alpha"])


class ABDiagKernel(AB1stKernel):
    """AB-diag (Sec. 5.4): P = 1/sigma - diag_sign * alpha * W_ii, W_ii = 1 / (1 + var_i)."""

    def __init__(self, sigma: float, alpha: float, data_variance: list[float], diag_sign: int):
        super().__init__(sigma, alpha)
        self.data_variance, self.diag_sign = list(data_variance), int(diag_sign)
        self._w_cache: tuple | None = None

    def _w_diag(self, device, dtype) -> Tensor:
        key = (device, dtype)
        if self._w_cache is None or self._w_cache[0] != key:
            var = torch.tensor(self.data_variance, device=device, dtype=dtype)
            self._w_cache = (key, 1.0 / (1.0 + var))
        return self._w_cache[1]

    def precision(self, sigma, alpha, device, dtype):
        return 1.0 / sigma - self.diag_sign * alpha * self._w_diag(device, dtype)


class _WithTrick(AB1stKernel):
    """A kernel that carries the fixed :class:`GaussianTrick` pieces (W, D, A, B)."""

    def __init__(self, sigma: float, alpha: float, trick: GaussianTrick):
        super().__init__(sigma, alpha)
        self.trick = trick

    def state_dict(self) -> dict:
        return {**super().state_dict(), "trick": self.trick.state_dict()}

    def load_state_dict(self, d: dict) -> None:
        super().load_state_dict(d)
        self.trick = GaussianTrick.from_state_dict(d["trick"])


class DLPTraceKernel(_WithTrick):
    """DLP-trace (Sec. 5.1): alpha = 1/2, P = D / sigma (D from the trace SDP)."""

    def __init__(self, sigma: float, trick: GaussianTrick):
        super().__init__(sigma, 0.5, trick)

    def precision(self, sigma, alpha, device, dtype):
        return self.trick.on(dtype, device)[2] / sigma


class ABQuadraticKernel(_WithTrick):
    """Quadratic AB with the Gaussian integral trick (Eq. 11-15): fixed sigma, alpha, W, D."""

    def log_proposal(self, model, x, grad, y):
        raise NotImplementedError(
            "the quadratic AB proposal has an auxiliary variable: q(y|x) is not tractable"
        )

    @staticmethod
    def reverse(x, y, gy, eta, A, alpha) -> tuple[Tensor, Tensor]:
        """The reverse move's gradient term g(y) + A (x - y) (same u) and
        log N(u; B y) - log N(u; B x) (Eq. 15)."""
        sa = math.sqrt(alpha)
        delta = x - y
        dA = delta @ A
        aux = -sa * (eta * delta).sum(-1) - 0.5 * alpha * (dA * delta).sum(-1)
        return gy + dA, aux

    def propose(self, model, state: ChainState, generator, sigma: float, alpha: float):
        space = state_space(model, self)
        shape, n = state.x.shape, state.x.shape[0]
        x = _wide(state.x.reshape(n, -1))
        gx = _wide(state.grad.reshape(n, -1))
        A, B, Dv = self.trick.on(x.dtype, x.device)
        p = Langevin(alpha, precision=alpha * Dv + 1.0 / sigma)
        xi = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
        eta = xi @ B  # rows ~ N(0, A)
        shift = math.sqrt(alpha) * eta
        y, fwd, jump = proposals.propose(space, x, gx, p, generator, shift)
        lp_y, g_y = value_and_grad(model, y.to(state.x.dtype).reshape(shape))
        gy = _wide(g_y.reshape(n, -1))
        g_rev, aux = self.reverse(x, y, gy, eta, A, alpha)
        rev = proposals.log_q(space, y, g_rev, p, x, shift)
        log_ratio = _wide(lp_y) - _wide(state.log_prob) + aux + rev - fwd
        proposed = ChainState(x=y.to(state.x.dtype).reshape(shape), log_prob=lp_y, grad=g_y)
        return ABProposal(x, y, gx, gy, xi, proposed, log_ratio, jump)
