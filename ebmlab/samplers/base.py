"""The sampler interface shared by every sampler.

A sampler is a small object holding its hyperparameters (and, for adaptive
samplers, its tuned parameters). It acts on an explicit :class:`ChainState`:

    state = sampler.init(model, x0)
    state, info = sampler.step(model, state, generator)

``model`` is anything with ``log_prob(x) -> Tensor[chains]`` (the unnormalised
log density, = -energy). Gradient-based samplers call
:func:`value_and_grad`, which uses the model's analytic
``log_prob_and_grad`` when it has one and autograd otherwise.

The state caches ``log_prob(x)`` and ``grad log_prob(x)`` so that a
Metropolis-Hastings step costs one forward and one backward: the proposal's
quantities become the next state's when it is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
from torch import Tensor


@dataclass
class ChainState:
    """Per-chain state: ``x`` [chains, ...], ``log_prob`` [chains], ``grad`` like x or None."""

    x: Tensor
    log_prob: Tensor
    grad: Tensor | None = None
    extra: dict = field(default_factory=dict)

    def replace(self, **kw) -> ChainState:
        return replace(self, **kw)

    def select(self, accept: Tensor, other: ChainState) -> ChainState:
        """Take ``other``'s values where ``accept`` [chains] is True, else keep ours."""
        a = accept.view(-1, *([1] * (self.x.dim() - 1)))
        x = torch.where(a, other.x, self.x)
        lp = torch.where(accept, other.log_prob, self.log_prob)
        g = None
        if self.grad is not None and other.grad is not None:
            g = torch.where(a, other.grad, self.grad)
        return ChainState(x=x, log_prob=lp, grad=g, extra=self.extra)


@dataclass
class StepInfo:
    """What one step did, per chain where it makes sense.

    accept_prob: MH acceptance probability [chains] (1 for always-accept moves).
    accepted: whether the move was taken [chains] (bool).
    jump: Hamming distance (or L1 for ordinal states) between old and new x [chains].
    n_log_prob: batched log_prob evaluations this step cost (one per chain each).
    n_grad: batched gradient evaluations this step cost.
    """

    accept_prob: Tensor
    accepted: Tensor
    jump: Tensor
    n_log_prob: int
    n_grad: int

    def scalars(self) -> dict[str, float]:
        return {
            "accept_rate": float(self.accept_prob.float().mean()),
            "jump": float(self.jump.float().mean()),
            "n_log_prob": float(self.n_log_prob),
            "n_grad": float(self.n_grad),
        }


def value_and_grad(model, x: Tensor) -> tuple[Tensor, Tensor]:
    """Return (log_prob(x) [chains], d log_prob / dx) detached: one forward + one backward."""
    f = getattr(model, "log_prob_and_grad", None)
    if f is not None:
        lp, g = f(x)
        return lp.detach(), g.detach()
    with torch.enable_grad():
        xg = x.detach().requires_grad_(True)
        lp = model.log_prob(xg)
        (g,) = torch.autograd.grad(lp.sum(), xg)
    return lp.detach(), g.detach()


def log_prob_only(model, x: Tensor) -> Tensor:
    with torch.no_grad():
        return model.log_prob(x).detach()


class Sampler:
    """Base class. Subclasses set ``needs_grad`` and implement ``step``.

    Hyperparameters are constructor arguments (validated there, raising
    :class:`ebmlab.errors.ConfigError`). Adaptive samplers keep their tuned
    values as attributes and expose them through ``state_dict`` so runs resume.
    """

    needs_grad: bool = True
    exact: bool = True  # False for unadjusted samplers (DULA, ULA)

    def init(self, model, x: Tensor) -> ChainState:
        x = x.detach()
        if self.needs_grad:
            lp, g = value_and_grad(model, x)
            return ChainState(x=x, log_prob=lp, grad=g)
        return ChainState(x=x, log_prob=log_prob_only(model, x))

    def step(self, model, state: ChainState, generator: torch.Generator):
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, d: dict) -> None:  # noqa: B027 - optional hook
        pass

    def init_cost(self) -> tuple[int, int]:
        """(n_log_prob, n_grad) spent by ``init``."""
        return (1, 1) if self.needs_grad else (1, 0)


def bernoulli(p: Tensor, generator: torch.Generator) -> Tensor:
    """Bernoulli draws with an explicit generator (same shape/dtype as p)."""
    return (torch.rand(p.shape, generator=generator, device=p.device, dtype=p.dtype) < p).to(
        p.dtype
    )


def mh_accept(log_ratio: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Metropolis-Hastings test in log space. Returns (accepted bool, accept prob)."""
    log_ratio = log_ratio.float()
    u = torch.rand(log_ratio.shape, generator=generator, device=log_ratio.device)
    accepted = torch.log(u) < log_ratio
    return accepted, torch.exp(torch.clamp(log_ratio, max=0.0))
