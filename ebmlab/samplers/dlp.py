"""Discrete Langevin Proposal samplers (DLP; Zhang, Liu & Liu, ICML 2022).

The proposal factorises over coordinates (DLP Eq. 2; :mod:`ebmlab.samplers.proposals`):

    q_i(y_i|x) = softmax_{y_i}( 1/2 grad_i f(x) (y_i - x_i) - (y_i - x_i)^2 / (2 alpha_i) ).

Binary {0,1}: each coordinate flips independently with
p_i = sigmoid(d~_i(x)/2 - 1/(2 alpha_i)), d~_i = grad_i f(x) (1 - 2 x_i).
Ordinal {0..S-1} (DLP App. B): a categorical over the S values per coordinate.

DMALA applies the MH test of Alg. 1 with forward and reverse proposal
probabilities; DULA accepts every proposal (unadjusted, biased: ``exact =
False``). Both cost one forward + one backward per step.

Preconditioning (DLP App. H): a constant diagonal G = diag(g) turns into a
per-coordinate step size alpha_i = alpha * g_i^2 (substituting eta = theta / g
in Eq. 2). Pass ``precond`` as the list g (length = model dimension) or None.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ebmlab.errors import ConfigError, check
from ebmlab.samplers import proposals
from ebmlab.samplers.base import ChainState, Sampler, StepInfo, mh_accept, value_and_grad
from ebmlab.samplers.proposals import Langevin
from ebmlab.samplers.spaces import BINARY, ORDINAL, state_space


def _wide(t: Tensor) -> Tensor:
    dt = torch.promote_types(t.dtype, torch.float32)
    return t if t.dtype == dt else t.to(dt)


class _DLP(Sampler):
    needs_grad = True
    adjusted = True
    state_spaces = (BINARY, ORDINAL)

    def __init__(self, step_size: float, precond: list[float] | None):
        check(
            isinstance(step_size, (int, float))
            and not isinstance(step_size, bool)
            and step_size > 0
            and step_size < float("inf"),
            "step_size",
            f"must be a finite number > 0 (got {step_size!r})",
        )
        self.step_size = float(step_size)
        self.precond: list[float] | None = None
        if precond is not None:
            try:
                g = [float(v) for v in precond]
            except (TypeError, ValueError):
                raise ConfigError(
                    "precond", f"must be null or a list of positive numbers (got {precond!r})"
                ) from None
            check(
                len(g) > 0 and all(v > 0 and v < float("inf") for v in g),
                "precond",
                f"must be null or a list of positive finite numbers (got {precond!r})",
            )
            self.precond = g
        self._alpha_cache: tuple | None = None

    def proposal(self, D: int, device, dtype) -> Langevin:
        """Weight 1/2 and step alpha: a float, or alpha * g^2 [D] with a preconditioner."""
        if self.precond is None:
            return Langevin(0.5, step=self.step_size)
        if len(self.precond) != D:
            raise ConfigError(
                "precond",
                f"needs one entry per model coordinate ({D}), got {len(self.precond)}",
            )
        key = (D, device, dtype)
        if self._alpha_cache is None or self._alpha_cache[0] != key:
            g = torch.tensor(self.precond, device=device, dtype=dtype)
            self._alpha_cache = (key, self.step_size * g**2)
        return Langevin(0.5, step=self._alpha_cache[1])

    def log_proposal(self, model, x: Tensor, grad: Tensor, y: Tensor) -> Tensor:
        """log q(y|x) [batch] given grad f at x (used by exact-kernel tests)."""
        space = state_space(model, self)
        x, grad, y = (_wide(t.reshape(t.shape[0], -1)) for t in (x, grad, y))
        return proposals.log_q(space, x, grad, self.proposal(x.shape[1], x.device, x.dtype), y)

    def step(self, model, state: ChainState, generator: torch.Generator):
        space = state_space(model, self)
        extra = 0
        if state.grad is None:  # state built by a gradient-free sampler: fill the cache
            lp, g = value_and_grad(model, state.x)
            state, extra = state.replace(log_prob=lp, grad=g), 1
        shape = state.x.shape
        n = shape[0]
        x = _wide(state.x.reshape(n, -1))
        gx = _wide(state.grad.reshape(n, -1))
        p = self.proposal(x.shape[1], x.device, x.dtype)
        if space.kind == BINARY:
            return self._binary_step(model, state, x, gx, p, generator, extra)
        y, fwd, jump_all = proposals.propose(space, x, gx, p, generator)
        y_state = y.to(state.x.dtype).reshape(shape)
        lp_y, g_y = value_and_grad(model, y_state)
        prop = ChainState(x=y_state, log_prob=lp_y, grad=g_y)
        if not self.adjusted:
            ones = torch.ones(n, device=x.device)
            info = StepInfo(ones, ones.bool(), jump_all, n_log_prob=1 + extra, n_grad=1 + extra)
            return prop.replace(extra=state.extra), info
        rev = proposals.log_q(space, y, _wide(g_y.reshape(n, -1)), p, x)
        log_ratio = _wide(lp_y) - _wide(state.log_prob) + rev - fwd
        accepted, accept_prob = mh_accept(log_ratio, generator)
        new = state.select(accepted, prop)
        info = StepInfo(
            accept_prob=accept_prob,
            accepted=accepted,
            jump=jump_all * accepted.to(jump_all.dtype),
            n_log_prob=1 + extra,
            n_grad=1 + extra,
            proposed_jump=jump_all,
        )
        return new, info

    def _binary_step(self, model, state, x, gx, p, generator, extra):
        """Binary flips; the reverse terms at y are kept for the next step (proposals)."""
        mv = proposals.binary_move(model, state, x, gx, p, generator, self.adjusted)
        jump = mv.flip.sum(-1)
        if not self.adjusted:
            ones = torch.ones(x.shape[0], device=x.device)
            info = StepInfo(ones, ones.bool(), jump, n_log_prob=1 + extra, n_grad=1 + extra)
            return mv.proposed, info
        log_ratio = _wide(mv.proposed.log_prob) - _wide(state.log_prob) + mv.rev - mv.fwd
        accepted, accept_prob = mh_accept(log_ratio, generator)
        new = mv.current.merge(accepted, mv.proposed)
        info = StepInfo(
            accept_prob=accept_prob,
            accepted=accepted,
            jump=jump * accepted.to(jump.dtype),
            n_log_prob=1 + extra,
            n_grad=1 + extra,
            proposed_jump=jump,
        )
        return new, info


class DMALA(_DLP):
    """Discrete Metropolis-adjusted Langevin (DLP Alg. 1 with the MH step). Exact.

    step_size: alpha > 0 (paper: 0.2 RBM sampling, 0.4 5x5 Ising, 0.15 deep EBMs).
    precond: optional constant diagonal preconditioner g (App. H), alpha_i = alpha g_i^2.
    """

    exact = True
    adjusted = True


class DULA(_DLP):
    """Discrete *unadjusted* Langevin (DLP Alg. 1 without MH): always accepts; biased.

    step_size: alpha > 0 (paper: 0.1 RBM sampling, 0.2 5x5 Ising). precond as in DMALA.
    """

    exact = False
    adjusted = False
