"""Automatic Cyclical Sampler (ACS; Pynadath et al., ICML 2024).

The proposal (paper Eq. 5-6) is the discrete Langevin proposal with a
balancing exponent ``beta`` in place of DLP's 1/2: per coordinate,

    q_i(y_i | x) = softmax_v( beta * g_i * (v - x_i) - (v - x_i)^2 / (2 alpha) ),  g = grad f(x)

which on binary states is an independent flip with probability
``sigmoid(beta * d~_i - 1/(2 alpha))``, ``d~ = g * (1 - 2x)`` (beta = 1/2 is DMALA),
and on one-hot categorical states uses ``||e_v - e_{x_i}||^2 = 2 [v != x_i]``
(DLP App. B). The Metropolis-Hastings test (Eq. 7) uses the same (alpha, beta) for the
reverse move, so every fixed-(alpha, beta) kernel is exact; a cycle of such kernels
(Algorithm 1) is a composition of exact kernels and therefore exact too.

Schedules (Eq. 8-9): ``alpha_k = max(alpha_max (cos(pi k / s) + 1) / 2, alpha_min)`` for the
cycle position ``k = 0..s-1``; the balancing schedule comes from the tuner (Algorithm 5) or,
without tuning, the same cosine interpolation between beta_max and beta_min (as Algorithm 3).
Eq. 8 is printed as ``alpha_max cos(pi k/s) + 1``; we use the cyclical form of Zhang et al.
(2020) that the paper cites (and the reference code uses).

Automatic tuning (Algorithm 2): InitBurnin (Alg. 3), EstimateAlpha for alpha_min and alpha_max
(Alg. 4), EstimateBalSched (Alg. 5). ACS for PCD (Algorithm 6, App. B) is exposed through
``pcd_step_params`` / ``pcd_tune_action`` / ``pcd_retune`` / ``pcd_step``; the learner owns the
training loop.

Every proposal costs one forward and one backward at the proposed state (the state caches
log_prob and grad at the current state), exactly like DMALA.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor
from torch.nn import functional as F

from ebmlab.errors import ConfigError, check
from ebmlab.samplers.base import ChainState, Sampler, StepInfo, mh_accept, value_and_grad

StateKind = Literal["auto", "binary", "ordinal", "categorical"]

# ---------------------------------------------------------------------------
# schedules (Eq. 8)


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


# ---------------------------------------------------------------------------
# proposal math (Eq. 6), one function per state space; all take (alpha, beta)


def _flat_sum(t: Tensor) -> Tensor:
    return t.reshape(t.shape[0], -1).sum(1)


def binary_flip_logits(x: Tensor, grad: Tensor, alpha: float, beta: float) -> Tensor:
    """Logit of flipping each coordinate: beta * grad * (1 - 2x) - 1/(2 alpha)."""
    return beta * grad * (1 - 2 * x) - 1.0 / (2.0 * alpha)


def binary_log_proposal(x: Tensor, grad: Tensor, y: Tensor, alpha: float, beta: float) -> Tensor:
    """log q(y | x) [batch] for binary states (product of independent flips)."""
    logits = binary_flip_logits(x, grad, alpha, beta)
    flip = (y != x).to(logits.dtype)
    return _flat_sum(flip * F.logsigmoid(logits) + (1 - flip) * F.logsigmoid(-logits))


def ordinal_logits(x: Tensor, grad: Tensor, alpha: float, beta: float, n_states: int) -> Tensor:
    """Unnormalised log q_i(v | x) [..., S] for integer states v in {0..S-1} (Eq. 6)."""
    v = torch.arange(n_states, device=x.device, dtype=x.dtype)
    diff = v - x.unsqueeze(-1)
    return beta * grad.unsqueeze(-1) * diff - diff * diff / (2.0 * alpha)


def ordinal_log_proposal(
    x: Tensor, grad: Tensor, y: Tensor, alpha: float, beta: float, n_states: int
) -> Tensor:
    """log q(y | x) [batch] for ordinal states."""
    logp = torch.log_softmax(ordinal_logits(x, grad, alpha, beta, n_states), -1)
    return _flat_sum(logp.gather(-1, y.round().long().unsqueeze(-1)).squeeze(-1))


def categorical_logits(x: Tensor, grad: Tensor, alpha: float, beta: float) -> Tensor:
    """Unnormalised log q_i(c | x) [..., S] for one-hot x [..., S] (DLP App. B with beta)."""
    g_cur = (grad * x).sum(-1, keepdim=True)
    return beta * (grad - g_cur) - (1 - x) / alpha


def categorical_log_proposal(x: Tensor, grad: Tensor, y: Tensor, alpha: float, beta: float):
    """log q(y | x) [batch] for one-hot categorical states."""
    logp = torch.log_softmax(categorical_logits(x, grad, alpha, beta), -1)
    return _flat_sum((logp * y).sum(-1))


def _gumbel_argmax(logits: Tensor, generator: torch.Generator) -> Tensor:
    u = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=logits.dtype)
    tiny = torch.finfo(logits.dtype).tiny
    gumbel = -torch.log((-torch.log(u.clamp(min=tiny))).clamp(min=tiny))
    return torch.argmax(logits + gumbel, -1)


def log_proposal(
    kind: str, x: Tensor, grad: Tensor, y: Tensor, alpha: float, beta: float, n_states: int = 2
) -> Tensor:
    """log q_{alpha,beta}(y | x) [batch] for ``kind`` in binary / ordinal / categorical."""
    if kind == "binary":
        return binary_log_proposal(x, grad, y, alpha, beta)
    if kind == "ordinal":
        return ordinal_log_proposal(x, grad, y, alpha, beta, n_states)
    return categorical_log_proposal(x, grad, y, alpha, beta)


def propose(
    kind: str,
    x: Tensor,
    grad: Tensor,
    alpha: float,
    beta: float,
    generator: torch.Generator,
    n_states: int = 2,
) -> tuple[Tensor, Tensor, Tensor]:
    """Draw y ~ q_{alpha,beta}(. | x). Returns (y, log q(y | x) [batch], jump [batch])."""
    if kind == "binary":
        logits = binary_flip_logits(x, grad, alpha, beta)
        u = torch.rand(logits.shape, generator=generator, device=x.device, dtype=logits.dtype)
        flip = (torch.log(u) < F.logsigmoid(logits)).to(x.dtype)
        y = x + flip * (1 - 2 * x)
        lq = F.logsigmoid(logits) * flip + F.logsigmoid(-logits) * (1 - flip)
        return y, _flat_sum(lq), _flat_sum(flip)
    if kind == "ordinal":
        logp = torch.log_softmax(ordinal_logits(x, grad, alpha, beta, n_states), -1)
        idx = _gumbel_argmax(logp, generator)
        y = idx.to(x.dtype)
        lq = logp.gather(-1, idx.unsqueeze(-1)).squeeze(-1)
        return y, _flat_sum(lq), _flat_sum((y - x).abs())
    logp = torch.log_softmax(categorical_logits(x, grad, alpha, beta), -1)
    y = F.one_hot(_gumbel_argmax(logp, generator), x.shape[-1]).to(x.dtype)
    return y, _flat_sum((logp * y).sum(-1)), _flat_sum((y - x).abs()) / 2


def kernel_step(
    model,
    state: ChainState,
    generator: torch.Generator,
    alpha: float,
    beta: float,
    mh: bool = True,
    kind: str = "binary",
    n_states: int = 2,
) -> tuple[ChainState, StepInfo]:
    """One step of the fixed-(alpha, beta) ACS kernel (Eq. 6 proposal, Eq. 7 MH test).

    Costs one forward and one backward (at the proposal); with ``mh=False`` the move is
    always taken (unadjusted, as in InitBurnin and the PCD exploration step).
    """
    y, lq_fwd, jump = propose(kind, state.x, state.grad, alpha, beta, generator, n_states)
    lp_y, g_y = value_and_grad(model, y)
    prop = ChainState(x=y, log_prob=lp_y, grad=g_y, extra=state.extra)
    if not mh:
        ones = torch.ones_like(lp_y, dtype=torch.float32)
        return prop, StepInfo(ones, ones.bool(), jump, n_log_prob=1, n_grad=1)
    lq_rev = log_proposal(kind, y, g_y, state.x, alpha, beta, n_states)
    wide = torch.float64 if lp_y.dtype == torch.float64 else torch.float32
    log_ratio = (lp_y.to(wide) - state.log_prob.to(wide)) + (lq_rev.to(wide) - lq_fwd.to(wide))
    accepted, accept_prob = mh_accept(log_ratio, generator)
    new = state.select(accepted, prop)
    return new, StepInfo(accept_prob, accepted, jump * accepted, n_log_prob=1, n_grad=1)


def _resolve_kind(model, state_kind: str) -> tuple[str, int]:
    kind = getattr(model, "state_kind", "binary") if state_kind == "auto" else state_kind
    if kind not in ("binary", "ordinal", "categorical"):
        raise ConfigError(
            "sampler.state_kind",
            f"ACS supports binary, ordinal and categorical state spaces (got {kind!r})",
        )
    n_states = 2 if kind == "binary" else int(getattr(model, "n_states", 2))
    return kind, n_states


class ACSKernel(Sampler):
    """One fixed-(alpha, beta) kernel of the ACS cycle (an MH sampler when ``mh``).

    beta = 0.5 gives DMALA; ``log_proposal(model, x, grad, y)`` exposes log q for exact-kernel
    tests.
    """

    def __init__(
        self,
        alpha: float,
        beta: float = 0.5,
        mh: bool = True,
        state_kind: StateKind = "auto",
        n_states: int = 0,
    ):
        check(alpha > 0, "alpha", f"must be > 0 (got {alpha})")
        check(0 < beta <= 1, "beta", f"must be in (0, 1] (got {beta})")
        self.alpha, self.beta, self.mh = float(alpha), float(beta), bool(mh)
        self.exact = self.mh
        self.state_kind, self.n_states = state_kind, int(n_states)
        self._space: tuple[str, int] | None = None

    def _kind(self, model=None) -> tuple[str, int]:
        if model is not None:
            kind, s = _resolve_kind(model, self.state_kind)
            self._space = (kind, self.n_states or s)
        elif self._space is None:
            kind = "binary" if self.state_kind == "auto" else self.state_kind
            self._space = (kind, self.n_states or 2)
        return self._space

    def log_proposal(self, model, x: Tensor, grad: Tensor, y: Tensor) -> Tensor:
        """log q_{alpha,beta}(y | x) [batch] (grad = grad log_prob at x)."""
        kind, s = self._kind(model)
        return log_proposal(kind, x, grad, y, self.alpha, self.beta, s)

    def init(self, model, x: Tensor) -> ChainState:
        self._kind(model)
        return super().init(model, x)

    def step(self, model, state: ChainState, generator: torch.Generator):
        kind, s = self._kind(model)
        return kernel_step(model, state, generator, self.alpha, self.beta, self.mh, kind, s)


# ---------------------------------------------------------------------------
# the cyclical sampler with automatic tuning


@dataclass
class TuneResult:
    """What :meth:`ACS.tune` / :meth:`ACS.pcd_retune` found and what it cost."""

    alpha_max: float
    alpha_min: float
    alpha_schedule: list[float]
    beta_schedule: list[float]
    n_steps: int = 0  # sampler steps (proposals) spent, each one forward + one backward
    n_log_prob: int = 0  # includes the initial evaluation when tune() got a bare tensor
    n_grad: int = 0
    budget: int = 0
    trace: list[dict] = field(default_factory=list)  # one entry per tuning round


class ACS(Sampler):
    """Automatic Cyclical Sampler (Algorithms 1-6).

    Call :meth:`tune` before sampling when ``tune`` is true (Algorithm 2); ``step`` then
    follows the cyclical schedule (Algorithm 1). With ``tune=False`` the schedule is built from
    ``alpha_max``/``alpha_min`` (Eq. 8) and the cosine beta interpolation.
    """

    def __init__(
        self,
        steps_per_cycle: int = 20,
        alpha_max: float = 5.0,
        alpha_min: float = 0.1,
        beta_max: float = 0.95,
        beta_min: float = 0.5,
        target_accept: float = 0.5,
        zeta: float = 0.5,
        alpha_ceil: float = 60.0,
        alpha_floor: float = 0.05,
        tune: bool = True,
        tune_budget: int = 0,
        tune_budget_frac: float = 0.1,
        burnin_steps: int = 50,
        burnin_mh_steps: int = 50,
        alpha_candidates: int = 5,
        beta_candidates: int = 10,
        mh: bool = True,
        state_kind: StateKind = "auto",
        pcd_cycle_length: int = 50,
        pcd_retune_max_every: int = 25,
        pcd_retune_min_every: int = 25,
        pcd_tune_budget: int = 200,
        pcd_adaptive_floor: bool = False,
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
        check(0 < target_accept < 1, "target_accept", f"must be in (0, 1) (got {target_accept})")
        check(0 < zeta <= 1, "zeta", f"must be in (0, 1] (got {zeta})")
        check(alpha_floor > 0, "alpha_floor", f"must be > 0 (got {alpha_floor})")
        check(
            alpha_ceil > alpha_floor,
            "alpha_ceil",
            f"must be > alpha_floor={alpha_floor} (got {alpha_ceil})",
        )
        check(
            tune_budget >= 0,
            "tune_budget",
            f"must be >= 0 (0: use tune_budget_frac) (got {tune_budget})",
        )
        check(
            0 <= tune_budget_frac < 1,
            "tune_budget_frac",
            f"must be in [0, 1) (got {tune_budget_frac})",
        )
        check(burnin_steps >= 0, "burnin_steps", f"must be >= 0 (got {burnin_steps})")
        check(burnin_mh_steps >= 0, "burnin_mh_steps", f"must be >= 0 (got {burnin_mh_steps})")
        check(alpha_candidates >= 2, "alpha_candidates", f"must be >= 2 (got {alpha_candidates})")
        check(beta_candidates >= 2, "beta_candidates", f"must be >= 2 (got {beta_candidates})")
        check(pcd_cycle_length >= 2, "pcd_cycle_length", f"must be >= 2 (got {pcd_cycle_length})")
        check(
            pcd_retune_max_every >= 1,
            "pcd_retune_max_every",
            f"must be >= 1 cycle (got {pcd_retune_max_every})",
        )
        check(
            pcd_retune_min_every >= 1,
            "pcd_retune_min_every",
            f"must be >= 1 cycle (got {pcd_retune_min_every})",
        )
        check(
            pcd_tune_budget >= alpha_candidates,
            "pcd_tune_budget",
            f"must be >= alpha_candidates={alpha_candidates} steps (got {pcd_tune_budget})",
        )
        self.steps_per_cycle = int(s)
        self.beta_max, self.beta_min = float(beta_max), float(beta_min)
        self.target_accept, self.zeta = float(target_accept), float(zeta)
        self.alpha_ceil, self.alpha_floor = float(alpha_ceil), float(alpha_floor)
        self.tune_enabled = bool(tune)
        self.tune_budget, self.tune_budget_frac = int(tune_budget), float(tune_budget_frac)
        self.burnin_steps, self.burnin_mh_steps = int(burnin_steps), int(burnin_mh_steps)
        self.alpha_candidates, self.beta_candidates = int(alpha_candidates), int(beta_candidates)
        self.mh = bool(mh)
        self.exact = self.mh
        self.state_kind = state_kind
        self.pcd_cycle_length = int(pcd_cycle_length)
        self.pcd_retune_max_every = int(pcd_retune_max_every)
        self.pcd_retune_min_every = int(pcd_retune_min_every)
        self.pcd_tune_budget = int(pcd_tune_budget)
        self.pcd_adaptive_floor = bool(pcd_adaptive_floor)
        if self.tune_enabled and self.tune_budget > 0:
            need = self.min_tune_budget()
            check(
                self.tune_budget >= need,
                "tune_budget",
                f"must be >= {need} steps for burn-in + balancing schedule + one round of each "
                f"alpha search (got {self.tune_budget})",
            )
        # tuned / scheduled state (checkpointed by state_dict)
        self.alpha_max, self.alpha_min = float(alpha_max), float(alpha_min)
        self.alpha_sched = alpha_schedule(self.alpha_max, self.alpha_min, s)
        self.beta_sched = cosine_beta_schedule(self.beta_max, self.beta_min, s)
        self.tuned = False
        self.step_count = 0  # position in the schedule: k = step_count mod s
        self.alpha_min_history: list[float] = []  # PCD, App. D.4
        self._space: tuple[str, int] | None = None

    # -- schedule ----------------------------------------------------------

    @property
    def cycle_position(self) -> int:
        return self.step_count % self.steps_per_cycle

    def current_params(self) -> tuple[float, float]:
        """(alpha, beta) the next ``step`` will use."""
        k = self.cycle_position
        return self.alpha_sched[k], self.beta_sched[k]

    def set_schedule(
        self, alpha_max: float, alpha_min: float, beta_sched: list[float] | None = None
    ):
        """Rebuild the cycle from (alpha_max, alpha_min) by Eq. 8 (and a given beta schedule)."""
        self.alpha_max, self.alpha_min = float(alpha_max), float(alpha_min)
        self.alpha_sched = alpha_schedule(self.alpha_max, self.alpha_min, self.steps_per_cycle)
        if beta_sched is not None:
            assert len(beta_sched) == self.steps_per_cycle
            self.beta_sched = [float(b) for b in beta_sched]

    def reset_cycle(self) -> None:
        self.step_count = 0

    # -- interface ----------------------------------------------------------

    def _kind(self, model) -> tuple[str, int]:
        self._space = _resolve_kind(model, self.state_kind)
        return self._space

    def init(self, model, x: Tensor) -> ChainState:
        self._kind(model)
        return super().init(model, x)

    def step(self, model, state: ChainState, generator: torch.Generator):
        """One step of Algorithm 1 at cycle position k = step_count mod s."""
        if self.tune_enabled and not self.tuned:
            raise RuntimeError(
                "ACS has tune=true but was not tuned: call sampler.tune(model, x, generator, "
                "n_steps_total) before sampling, or set tune=false with alpha_max/alpha_min"
            )
        kind, s = self._kind(model)
        alpha, beta = self.current_params()
        self.step_count += 1
        return kernel_step(model, state, generator, alpha, beta, self.mh, kind, s)

    def log_proposal_at(self, k: int, model, x: Tensor, grad: Tensor, y: Tensor) -> Tensor:
        """log q(y | x) of the kernel at cycle position k (for exact-kernel tests)."""
        kind, s = self._kind(model)
        k = k % self.steps_per_cycle
        return log_proposal(kind, x, grad, y, self.alpha_sched[k], self.beta_sched[k], s)

    def kernels(self, model=None) -> list[ACSKernel]:
        """The s fixed-(alpha, beta) kernels of one cycle, in order (P_1 ... P_s of Sec. 5.2)."""
        if model is not None:
            self._kind(model)
        out = []
        for a, b in zip(self.alpha_sched, self.beta_sched):
            kern = ACSKernel(a, b, self.mh, self.state_kind)
            kern._space = self._space
            out.append(kern)
        return out

    def state_dict(self) -> dict:
        return {
            "alpha_max": self.alpha_max,
            "alpha_min": self.alpha_min,
            "alpha_schedule": list(self.alpha_sched),
            "beta_schedule": list(self.beta_sched),
            "tuned": self.tuned,
            "step_count": self.step_count,
            "alpha_min_history": list(self.alpha_min_history),
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
        self.tuned = bool(d["tuned"])
        self.step_count = int(d["step_count"])
        self.alpha_min_history = [float(a) for a in d.get("alpha_min_history", [])]

    # -- automatic tuning (Algorithms 2-5) ------------------------------------

    def _burnin_cost(self) -> int:
        n_cycles = self.burnin_mh_steps // self.steps_per_cycle
        return self.burnin_steps + n_cycles * self.steps_per_cycle

    def _balance_reserve(self) -> int:
        return max(self.steps_per_cycle - 1, 0) * self.beta_candidates

    def min_tune_budget(self) -> int:
        """Smallest budget Algorithm 2 can run with: burn-in, the (worst-case) balancing search,
        and one round of ``alpha_candidates`` proposals for each of alpha_min and alpha_max."""
        return self._burnin_cost() + self._balance_reserve() + 2 * self.alpha_candidates

    def resolve_tune_budget(self, n_steps_total: int) -> int:
        """The tuning budget in steps for a run of ``n_steps_total`` sampling steps."""
        if self.tune_budget > 0:
            budget = self.tune_budget
        else:
            budget = int(self.tune_budget_frac * n_steps_total)
        check(
            budget <= n_steps_total,
            "tune_budget",
            f"the tuning budget ({budget} steps) must not exceed the run ({n_steps_total} steps)",
        )
        need = self.min_tune_budget()
        check(
            budget >= need,
            "tune_budget",
            f"a run of {n_steps_total} steps gives a tuning budget of {budget} steps; Algorithm 2 "
            f"needs >= {need} (burn-in {self._burnin_cost()}, balancing schedule "
            f"{self._balance_reserve()}, alpha search {2 * self.alpha_candidates}); raise "
            "tune_budget/tune_budget_frac, shorten the burn-in, or set tune=false",
        )
        return budget

    def _trial(self, model, state, generator, alpha, beta, kind, s):
        new, info = kernel_step(model, state, generator, alpha, beta, True, kind, s)
        return new, float(info.accept_prob.float().mean())

    def init_burnin(
        self, model, state: ChainState, generator: torch.Generator
    ) -> tuple[ChainState, int]:
        """Algorithm 3: unadjusted steps at (alpha_ceil, beta_max), then floor(l_MH / s) MH
        cycles of the naive schedule (Eq. 8 between ceil/floor and beta_max/beta_min).
        Returns (state, steps used)."""
        kind, s = self._kind(model)
        for _ in range(self.burnin_steps):
            state, _ = kernel_step(
                model, state, generator, self.alpha_ceil, self.beta_max, False, kind, s
            )
        sc = self.steps_per_cycle
        a_s = alpha_schedule(self.alpha_ceil, self.alpha_floor, sc)
        b_s = cosine_beta_schedule(self.beta_max, self.beta_min, sc)
        n_cycles = self.burnin_mh_steps // sc
        for _ in range(n_cycles):
            for a, b in zip(a_s, b_s):
                state, _ = kernel_step(model, state, generator, a, b, True, kind, s)
        return state, self._burnin_cost()

    def estimate_alpha(
        self,
        model,
        state: ChainState,
        generator: torch.Generator,
        beta: float,
        find_max: bool,
        budget: int,
        start: float | None = None,
        trace: list | None = None,
    ) -> tuple[float, ChainState, int]:
        """Algorithm 4 (EstimateAlpha): shrink (MAX, from alpha_ceil down) or grow (MIN, from
        alpha_floor up) the candidate range by the factor (1 -/+ zeta |rho* - rho_cur|), try
        ``alpha_candidates`` values from the current state, keep the one whose mean MH
        acceptance is closest to rho* (ties go in the search direction). Candidates are kept in
        [alpha_floor, alpha_ceil].
        Returns (alpha, state after the kept proposal, steps used <= budget)."""
        kind, s = self._kind(model)
        t = self.alpha_candidates
        bound = (
            float(start)
            if start is not None
            else (self.alpha_ceil if find_max else self.alpha_floor)
        )
        bound = min(max(bound, self.alpha_floor), self.alpha_ceil)
        rho_cur, used = 0.0, 0
        while used + t <= budget:
            gap = self.zeta * abs(self.target_accept - rho_cur)
            if find_max:
                lo, hi = bound * (1 - gap), bound
            else:
                lo, hi = bound, bound * (1 + gap)
            cands = torch.linspace(lo, hi, t, dtype=torch.float64).clamp(
                self.alpha_floor, self.alpha_ceil
            )
            best = None
            for a in cands.tolist():
                new, rho = self._trial(model, state, generator, a, beta, kind, s)
                used += 1
                err = abs(rho - self.target_accept)
                best_err = math.inf if best is None else abs(best[1] - self.target_accept)
                # ties (e.g. all candidates accept everything) move in the search direction:
                # the largest candidate for alpha_min, the smallest for alpha_max
                if err < best_err or (err == best_err and not find_max):
                    best = (a, rho, new)
            bound, rho_cur, state = best
            if trace is not None:
                trace.append(
                    {
                        "phase": "alpha_max" if find_max else "alpha_min",
                        "alpha": bound,
                        "beta": beta,
                        "accept": rho_cur,
                    }
                )
        return bound, state, used

    def estimate_balancing_schedule(
        self,
        model,
        state: ChainState,
        generator: torch.Generator,
        alpha_sched: list[float],
        trace: list | None = None,
    ) -> tuple[list[float], ChainState, int]:
        """Algorithm 5 (EstimateBalSched), Eq. 9: beta_0 = beta_max; for each later position try
        ``beta_candidates`` values evenly spaced in [beta_min, beta_{i-1}] and keep the one with
        the highest mean acceptance. Positions whose step size is clamped to alpha_min get
        beta_min (the pair tuned by EstimateAlpha; the algorithm's final append) at no cost.
        Returns (beta schedule of length s, state, steps used)."""
        kind, s = self._kind(model)
        sched = [self.beta_max]
        ceil, used = self.beta_max, 0
        for a in alpha_sched[1:]:
            if a <= self.alpha_min:
                sched.append(self.beta_min)
                continue
            cands = torch.linspace(self.beta_min, ceil, self.beta_candidates, dtype=torch.float64)
            best = None
            for b in cands.tolist():
                new, rho = self._trial(model, state, generator, a, b, kind, s)
                used += 1
                if best is None or rho > best[1]:
                    best = (b, rho, new)
            ceil, _, state = best
            sched.append(ceil)
            if trace is not None:
                trace.append({"phase": "beta", "alpha": a, "beta": ceil, "accept": best[1]})
        return sched, state, used

    def tune(
        self, model, x: Tensor | ChainState, generator: torch.Generator, n_steps_total: int
    ) -> tuple[ChainState, TuneResult]:
        """Algorithm 2 within the budget for a run of ``n_steps_total`` sampling steps.

        ``x`` is the initial states [chains, ...] or a ChainState. Sets the schedule, resets the
        cycle to position 0 and returns (state after tuning, TuneResult with its cost)."""
        budget = self.resolve_tune_budget(n_steps_total)
        fresh = not isinstance(x, ChainState)
        state = self.init(model, x) if fresh else x
        self._kind(model)
        trace: list[dict] = []
        state, used = self.init_burnin(model, state, generator)
        alpha_budget = (budget - used - self._balance_reserve()) // 2
        a_min, state, u = self.estimate_alpha(
            model, state, generator, self.beta_min, False, alpha_budget, trace=trace
        )
        used += u
        a_max, state, u = self.estimate_alpha(
            model, state, generator, self.beta_max, True, alpha_budget, trace=trace
        )
        used += u
        a_max = max(a_max, a_min)  # Eq. 8 needs alpha_max >= alpha_min
        self.set_schedule(a_max, a_min)
        betas, state, u = self.estimate_balancing_schedule(
            model, state, generator, self.alpha_sched, trace=trace
        )
        used += u
        self.set_schedule(a_max, a_min, betas)
        self.tuned = True
        self.reset_cycle()
        extra = 1 if fresh else 0
        result = TuneResult(
            alpha_max=self.alpha_max,
            alpha_min=self.alpha_min,
            alpha_schedule=list(self.alpha_sched),
            beta_schedule=list(self.beta_sched),
            n_steps=used,
            n_log_prob=used + extra,
            n_grad=used + extra,
            budget=budget,
            trace=trace,
        )
        return state, result

    # -- ACS for PCD (Algorithm 6, App. B) -------------------------------------

    def pcd_step_params(self, iteration: int) -> tuple[float, float, bool]:
        """(alpha, beta, use_mh) for training iteration ``iteration``: the first iteration of
        each cycle explores with (alpha_max, beta_max) and no MH, the rest exploit with
        (alpha_min, beta_min) and MH (App. B)."""
        if iteration % self.pcd_cycle_length == 0:
            return self.alpha_max, self.beta_max, False
        return self.alpha_min, self.beta_min, self.mh

    def pcd_tune_action(self, iteration: int) -> str | None:
        """Which re-tuning (Algorithm 6, lines 3-9) replaces sampling at this iteration:
        "alpha_max" at the first iteration of every ``pcd_retune_max_every``-th cycle,
        "alpha_min" at the second iteration of every ``pcd_retune_min_every``-th cycle, else
        None. Iterations 0 and 1 therefore perform the initial tuning."""
        cycle, pos = divmod(iteration, self.pcd_cycle_length)
        if pos == 0 and cycle % self.pcd_retune_max_every == 0:
            return "alpha_max"
        if pos == 1 and cycle % self.pcd_retune_min_every == 0:
            return "alpha_min"
        return None

    def pcd_retune(
        self,
        model,
        state: ChainState,
        generator: torch.Generator,
        which: str,
        budget: int | None = None,
    ) -> tuple[ChainState, TuneResult]:
        """Re-estimate alpha_max (at beta_max) or alpha_min (at beta_min) with Algorithm 4 on the
        persistent chains, which it also advances. With ``pcd_adaptive_floor`` the alpha_min
        search starts one standard deviation below the mean of past alpha_min (App. D.4)."""
        if which not in ("alpha_max", "alpha_min"):
            raise ValueError(f"which must be 'alpha_max' or 'alpha_min' (got {which!r})")
        budget = self.pcd_tune_budget if budget is None else int(budget)
        trace: list[dict] = []
        if which == "alpha_max":
            a, state, used = self.estimate_alpha(
                model, state, generator, self.beta_max, True, budget, trace=trace
            )
            self.set_schedule(max(a, self.alpha_min), self.alpha_min, self.beta_sched)
        else:
            start = None
            if self.pcd_adaptive_floor and len(self.alpha_min_history) >= 2:
                h = torch.tensor(self.alpha_min_history, dtype=torch.float64)
                start = float(h.mean() - h.std())
            a, state, used = self.estimate_alpha(
                model, state, generator, self.beta_min, False, budget, start=start, trace=trace
            )
            self.alpha_min_history.append(a)
            self.set_schedule(max(self.alpha_max, a), a, self.beta_sched)
        self.tuned = True
        result = TuneResult(
            alpha_max=self.alpha_max,
            alpha_min=self.alpha_min,
            alpha_schedule=list(self.alpha_sched),
            beta_schedule=list(self.beta_sched),
            n_steps=used,
            n_log_prob=used,
            n_grad=used,
            budget=budget,
            trace=trace,
        )
        return state, result

    def pcd_step(
        self, model, state: ChainState, generator: torch.Generator, iteration: int, n_steps: int
    ) -> tuple[ChainState, StepInfo]:
        """``n_steps`` kernel steps with :meth:`pcd_step_params` (iteration) on the persistent
        chains. Returns the state and a StepInfo with mean acceptance/jump and summed costs."""
        kind, s = self._kind(model)
        alpha, beta, use_mh = self.pcd_step_params(iteration)
        acc = torch.zeros_like(state.log_prob, dtype=torch.float32)
        jump = torch.zeros_like(acc)
        accepted = torch.zeros_like(acc, dtype=torch.bool)
        for _ in range(n_steps):
            state, info = kernel_step(model, state, generator, alpha, beta, use_mh, kind, s)
            acc = acc + info.accept_prob.float()
            jump = jump + info.jump.float()
            accepted = accepted | info.accepted
        n = max(n_steps, 1)
        # accepted: whether any of the n_steps moves was taken
        return state, StepInfo(acc / n, accepted, jump / n, n_log_prob=n_steps, n_grad=n_steps)
