"""Automatic Cyclical Sampler kernels with FIXED schedules (ACS; Pynadath et al., ICML 2024).

The proposal (Eq. 5-6) is the discrete Langevin proposal of :mod:`ebmlab.samplers.proposals`
with a balancing weight ``beta`` on the gradient in place of DLP's 1/2 and step size
``alpha``: on binary states an independent flip with probability
``sigmoid(beta * d~_i - 1/(2 alpha))`` (beta = 1/2 is DMALA); on one-hot categorical states
``||e_v - e_{x_i}||^2 = 2 [v != x_i]`` (DLP App. B). The Metropolis-Hastings test (Eq. 7) uses
the same (alpha, beta) for the reverse move, so every fixed-(alpha, beta) kernel is exact; a
cycle of such kernels (Algorithm 1) is a composition of exact kernels and therefore exact.

Schedules (Eq. 8-9): ``alpha_k = max(alpha_max (cos(pi k / s) + 1) / 2, alpha_min)`` for the
cycle position ``k = 0..s-1``; the balancing schedule comes from the tuner (Algorithm 5,
:mod:`ebmlab.samplers.acs.tune`) or, without tuning, the same cosine interpolation between
beta_max and beta_min (as Algorithm 3). Eq. 8 is printed as ``alpha_max cos(pi k/s) + 1``; we
use the cyclical form of Zhang et al. (2020) that the paper cites (and the reference code uses).

Every proposal costs one forward and one backward at the proposed state (the state caches
log_prob and grad at the current state), exactly like DMALA.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ebmlab.errors import ConfigError, check
from ebmlab.samplers import proposals
from ebmlab.samplers.base import ChainState, Sampler, StepInfo, mh_accept, value_and_grad
from ebmlab.samplers.proposals import Langevin
from ebmlab.samplers.spaces import BINARY, CATEGORICAL, ORDINAL, StateSpace, state_space

STATE_KINDS = ("auto", BINARY, ORDINAL, CATEGORICAL)


def cyclical_value(k: int, steps_per_cycle: int, v_max: float, v_min: float) -> float:
    """Eq. 8 at cycle position ``k mod s``: max(v_max (cos(pi k / s) + 1) / 2, v_min)."""
    k = k % steps_per_cycle
    return max(v_max * (math.cos(math.pi * k / steps_per_cycle) + 1.0) / 2.0, v_min)


def alpha_schedule(alpha_max: float, alpha_min: float, steps_per_cycle: int) -> list[float]:
    """The step sizes of one cycle, Eq. 8, positions 0..s-1."""
    return [
        cyclical_value(k, steps_per_cycle, alpha_max, alpha_min) for k in range(steps_per_cycle)
    ]


def cosine_beta_schedule(beta_max: float, beta_min: float, steps_per_cycle: int) -> list[float]:
    """Balancing schedule interpolated with Eq. 8 (Algorithm 3, line 5; used without tuning)."""
    return [cyclical_value(k, steps_per_cycle, beta_max, beta_min) for k in range(steps_per_cycle)]


def _flat(x: Tensor, space: StateSpace) -> Tensor:
    n = x.shape[0]
    return x.reshape(n, -1, x.shape[-1]) if space.kind == CATEGORICAL else x.reshape(n, -1)


def log_proposal(space: StateSpace, x, grad, y, alpha: float, beta: float) -> Tensor:
    """log q_{alpha,beta}(y | x) [batch] (grad = grad log_prob at x)."""
    p = Langevin(beta, step=alpha)
    return proposals.log_q(space, _flat(x, space), _flat(grad, space), p, _flat(y, space))


def kernel_step(
    model,
    state: ChainState,
    generator: torch.Generator,
    alpha: float,
    beta: float,
    mh: bool,
    space: StateSpace,
) -> tuple[ChainState, StepInfo]:
    """One step of the fixed-(alpha, beta) ACS kernel (Eq. 6 proposal, Eq. 7 MH test).

    Costs one forward and one backward (at the proposal); with ``mh=False`` the move is
    always taken (unadjusted, as in InitBurnin and the PCD exploration step).
    """
    p = Langevin(beta, step=alpha)
    x, gx = _flat(state.x, space), _flat(state.grad, space)
    if space.kind == BINARY:
        mv = proposals.binary_move(model, state, x, gx, p, generator, mh)
        jump = mv.flip.sum(-1)
        if not mh:
            ones = torch.ones_like(mv.proposed.log_prob, dtype=torch.float32)
            return mv.proposed, StepInfo(ones, ones.bool(), jump, n_log_prob=1, n_grad=1)
        lp_y = mv.proposed.log_prob
        wide = torch.float64 if lp_y.dtype == torch.float64 else torch.float32
        log_ratio = (lp_y.to(wide) - state.log_prob.to(wide)) + (mv.rev.to(wide) - mv.fwd.to(wide))
        accepted, accept_prob = mh_accept(log_ratio, generator)
        new = mv.current.merge(accepted, mv.proposed)
        return new, StepInfo(accept_prob, accepted, jump * accepted, n_log_prob=1, n_grad=1)
    y, lq_fwd, jump = proposals.propose(space, x, gx, p, generator)
    lp_y, g_y = value_and_grad(model, y.reshape(state.x.shape))
    prop = ChainState(x=y.reshape(state.x.shape), log_prob=lp_y, grad=g_y, extra=state.extra)
    if not mh:
        ones = torch.ones_like(lp_y, dtype=torch.float32)
        return prop, StepInfo(ones, ones.bool(), jump, n_log_prob=1, n_grad=1)
    lq_rev = proposals.log_q(space, y, _flat(g_y, space), p, x)
    wide = torch.float64 if lp_y.dtype == torch.float64 else torch.float32
    log_ratio = (lp_y.to(wide) - state.log_prob.to(wide)) + (lq_rev.to(wide) - lq_fwd.to(wide))
    accepted, accept_prob = mh_accept(log_ratio, generator)
    new = state.select(accepted, prop)
    return new, StepInfo(accept_prob, accepted, jump * accepted, n_log_prob=1, n_grad=1)


class _ACSBase(Sampler):
    """State-space resolution shared by the ACS kernels (``state_kind`` auto = the model's)."""

    needs_grad = True
    state_spaces = (BINARY, ORDINAL, CATEGORICAL)

    def _init_space(self, state_kind: str, mh: bool) -> None:
        check(
            state_kind in STATE_KINDS,
            "state_kind",
            f"must be one of {list(STATE_KINDS)} (got {state_kind!r})",
        )
        self.state_kind, self.mh, self.exact = state_kind, bool(mh), bool(mh)

    def space(self, model) -> StateSpace:
        kind = None if self.state_kind == "auto" else self.state_kind
        return state_space(model, self, kind, key="sampler.state_kind")

    def init(self, model, x: Tensor) -> ChainState:
        self.space(model)
        return super().init(model, x)


class ACSKernel(_ACSBase):
    """One fixed-(alpha, beta) kernel of the ACS cycle (an MH sampler when ``mh``).

    beta = 0.5 gives DMALA; ``log_proposal(model, x, grad, y)`` exposes log q for exact-kernel
    tests.
    """

    def __init__(self, alpha: float, beta: float, mh: bool, state_kind: str):
        check(alpha > 0, "alpha", f"must be > 0 (got {alpha})")
        check(0 < beta <= 1, "beta", f"must be in (0, 1] (got {beta})")
        self.alpha, self.beta = float(alpha), float(beta)
        self._init_space(state_kind, mh)

    def log_proposal(self, model, x: Tensor, grad: Tensor, y: Tensor) -> Tensor:
        return log_proposal(self.space(model), x, grad, y, self.alpha, self.beta)

    def step(self, model, state: ChainState, generator: torch.Generator):
        space = self.space(model)
        return kernel_step(model, state, generator, self.alpha, self.beta, self.mh, space)


class CyclicalKernel(_ACSBase):
    """Algorithm 1 with a fixed schedule: step k uses (alpha_k, beta_k), k = step mod s.

    The schedule is Eq. 8 from (alpha_max, alpha_min) and the cosine beta interpolation until
    :meth:`set_schedule` installs tuned values (:mod:`ebmlab.samplers.acs.tune`).
    """

    def __init__(
        self,
        steps_per_cycle: int,
        alpha_max: float,
        alpha_min: float,
        beta_max: float,
        beta_min: float,
        mh: bool,
        state_kind: str,
    ):
        s = steps_per_cycle
        check(s >= 1, "steps_per_cycle", f"must be >= 1 (got {s})")
        check(alpha_max > 0, "alpha_max", f"must be > 0 (got {alpha_max})")
        check(alpha_min > 0, "alpha_min", f"must be > 0 (got {alpha_min})")
        check(
            alpha_max >= alpha_min,
            "alpha_max",
            f"must be >= alpha_min={alpha_min} (got {alpha_max})",
        )
        check(0 < beta_min <= 1, "beta_min", f"must be in (0, 1] (got {beta_min})")
        check(
            beta_min <= beta_max <= 1,
            "beta_max",
            f"must be in [beta_min={beta_min}, 1] (got {beta_max})",
        )
        self._init_space(state_kind, mh)
        self.steps_per_cycle = int(s)
        self.beta_max, self.beta_min = float(beta_max), float(beta_min)
        self.beta_sched = cosine_beta_schedule(self.beta_max, self.beta_min, s)
        self.set_schedule(alpha_max, alpha_min)
        self.step_count = 0  # position in the schedule: k = step_count mod s

    @property
    def cycle_position(self) -> int:
        return self.step_count % self.steps_per_cycle

    def current_params(self) -> tuple[float, float]:
        """(alpha, beta) the next ``step`` will use."""
        k = self.cycle_position
        return self.alpha_sched[k], self.beta_sched[k]

    def set_schedule(
        self, alpha_max: float, alpha_min: float, beta_sched: list[float] | None = None
    ) -> None:
        """Rebuild the cycle from (alpha_max, alpha_min) by Eq. 8 (and a given beta schedule)."""
        self.alpha_max, self.alpha_min = float(alpha_max), float(alpha_min)
        self.alpha_sched = alpha_schedule(self.alpha_max, self.alpha_min, self.steps_per_cycle)
        if beta_sched is not None:
            assert len(beta_sched) == self.steps_per_cycle
            self.beta_sched = [float(b) for b in beta_sched]

    def reset_cycle(self) -> None:
        self.step_count = 0

    def step(self, model, state: ChainState, generator: torch.Generator):
        """One step of Algorithm 1 at cycle position k = step_count mod s."""
        space = self.space(model)
        alpha, beta = self.current_params()
        self.step_count += 1
        return kernel_step(model, state, generator, alpha, beta, self.mh, space)

    def capture_key(self) -> tuple:
        """What the next steps compute with besides the chains (:mod:`ebmlab.core.graphs`):
        the schedule and the cycle position; a captured block of n steps is replayed
        wherever the cycle stands at the same position."""
        return (
            tuple(self.alpha_sched),
            tuple(self.beta_sched),
            self.mh,
            self.state_kind,
            self.cycle_position,
        )

    def advance_captured(self, n: int) -> None:
        """The Python side of n replayed steps: the cycle moves on n positions."""
        self.step_count += n

    def log_proposal_at(self, k: int, model, x: Tensor, grad: Tensor, y: Tensor) -> Tensor:
        """log q(y | x) of the kernel at cycle position k (for exact-kernel tests)."""
        k = k % self.steps_per_cycle
        return log_proposal(self.space(model), x, grad, y, self.alpha_sched[k], self.beta_sched[k])

    def kernels(self) -> list[ACSKernel]:
        """The s fixed-(alpha, beta) kernels of one cycle, in order (P_1 ... P_s of Sec. 5.2)."""
        return [
            ACSKernel(a, b, self.mh, self.state_kind)
            for a, b in zip(self.alpha_sched, self.beta_sched)
        ]

    def state_dict(self) -> dict:
        return {
            "alpha_max": self.alpha_max,
            "alpha_min": self.alpha_min,
            "alpha_schedule": list(self.alpha_sched),
            "beta_schedule": list(self.beta_sched),
            "step_count": self.step_count,
        }

    def load_state_dict(self, d: dict) -> None:
        s = self.steps_per_cycle
        if len(d["alpha_schedule"]) != s or len(d["beta_schedule"]) != s:
            raise ConfigError(
                "steps_per_cycle",
                f"checkpoint has a schedule of length {len(d['alpha_schedule'])}, config has {s}",
            )
        self.alpha_max, self.alpha_min = float(d["alpha_max"]), float(d["alpha_min"])
        self.alpha_sched = [float(a) for a in d["alpha_schedule"]]
        self.beta_sched = [float(b) for b in d["beta_schedule"]]
        self.step_count = int(d["step_count"])
