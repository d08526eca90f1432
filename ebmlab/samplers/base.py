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

import math

import torch
from torch import Tensor

from ebmlab.core.state import RESTORED, ChainState, StepInfo

__all__ = [
    "ChainState",
    "StepInfo",
    "Sampler",
    "value_and_grad",
    "log_prob_only",
    "bernoulli",
    "mh_accept",
    "has_flip_updates",
    "with_flip_cache",
    "flip_state",
]


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
    model_type: str | None = None  # import path of the one model class a kernel needs
    pcd_schedule: str | None = None  # a learner-side parameter schedule it brings ("acs")
    uses_data_variance: bool = False  # takes the data's variance (core.protocols.UsesDataVariance)

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
    """Metropolis-Hastings test in log space. Returns (accepted bool, accept prob).

    A NaN log-ratio (a proposal whose density ratio is undefined, e.g. inf - inf after a
    numerically exploded proposal) is rejected with acceptance probability 0, so the chain
    keeps its state and the reported acceptance stays a number."""
    log_ratio = log_ratio.float()
    log_ratio = torch.where(torch.isnan(log_ratio), -math.inf, log_ratio)
    u = torch.rand(log_ratio.shape, generator=generator, device=log_ratio.device)
    accepted = torch.log(u) < log_ratio
    return accepted, torch.exp(torch.clamp(log_ratio, max=0.0))


def has_flip_updates(model) -> bool:
    """Whether ``model`` offers exact single-flip updates (``flip_cache``, ``flip_update``,
    ``flip_tag``; see :class:`ebmlab.models.rbm.BernoulliRBM`) for GWG-1 and Gibbs-1."""
    return all(callable(getattr(model, m, None)) for m in ("flip_cache", "flip_update", "flip_tag"))


def flip_state(model, x: Tensor, with_grad: bool) -> ChainState:
    """The chain state at ``x`` with the model's flip cache in ``aux["flip"]``: one forward
    (+ backward when ``with_grad``), like :func:`value_and_grad`."""
    lp, g, cache = model.flip_cache(x.reshape(x.shape[0], -1), with_grad)
    g = None if g is None else g.reshape(x.shape)
    return ChainState(x=x, log_prob=lp, grad=g, aux={"flip": (model.flip_tag(), (cache,))})


def _checked_restored_cache(model, state: ChainState, saved: tuple) -> tuple[ChainState, tuple]:
    """A checkpointed flip cache, used (so a resumed chain continues exactly as an uninterrupted
    one, evaluation counts included) only if it agrees with a fresh one for the current
    parameters; otherwise dropped and rebuilt by the caller."""
    fresh = model.flip_cache(state.x.reshape(state.x.shape[0], -1), False)[2]
    ok = len(saved) == 1 and saved[0].shape == fresh.shape
    ok = ok and torch.allclose(saved[0].to(fresh.dtype), fresh, rtol=1e-6, atol=1e-6)
    entry = (model.flip_tag(), (saved[0].to(fresh.dtype),)) if ok else None
    aux = {k: v for k, v in state.aux.items() if k != "flip"}
    if entry is not None:
        aux["flip"] = entry
    return state.replace(aux=aux), entry


def with_flip_cache(model, state: ChainState, with_grad: bool) -> tuple[ChainState, int]:
    """``state`` with the model's flip cache in ``aux["flip"]``, and the evaluations that
    cost: 0 when the cache is there for the current parameters, else 1 (log_prob, and the
    gradient when ``with_grad``, are re-evaluated in the same pass and replace the state's)."""
    entry = state.aux.get("flip")
    if entry is not None and entry[0] == RESTORED:  # from a checkpoint
        state, entry = _checked_restored_cache(model, state, entry[1])
    if entry is not None and entry[0] == model.flip_tag():
        if state.grad is not None or not with_grad:
            return state, 0
    new = flip_state(model, state.x, with_grad)
    return new.replace(grad=state.grad if new.grad is None else new.grad, aux=new.aux), 1
