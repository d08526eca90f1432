"""Automatic tuning of the ACS schedule (Pynadath et al., ICML 2024, Algorithms 2-5).

:meth:`ACSTuner.tune` (Algorithm 2) runs InitBurnin (Alg. 3), EstimateAlpha for alpha_min
and alpha_max (Alg. 4) and EstimateBalSched (Alg. 5) within a step budget, advancing the
chains, and returns the FROZEN schedule (a :class:`TuneResult`) for a
:class:`~ebmlab.samplers.acs.kernel.CyclicalKernel`. EstimateAlpha is also what ACS's PCD
schedule (Algorithm 6, :mod:`ebmlab.learning.acs_schedule`) re-runs during training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ebmlab.errors import check
from ebmlab.samplers.acs.kernel import (
    CyclicalKernel,
    alpha_schedule,
    cosine_beta_schedule,
    kernel_step,
)
from ebmlab.samplers.base import ChainState
from ebmlab.samplers.spaces import StateSpace


@dataclass
class TuneResult:
    """The schedule a tuning found and what it cost."""

    alpha_max: float
    alpha_min: float
    alpha_schedule: list[float]
    beta_schedule: list[float]
    n_steps: int = 0  # sampler steps (proposals) spent, each one forward + one backward
    n_log_prob: int = 0  # includes the initial evaluation when tune() got a bare tensor
    n_grad: int = 0
    budget: int = 0
    trace: list[dict] = field(default_factory=list)  # one entry per tuning round


class ACSTuner:
    """Settings and procedures of Algorithms 2-5 (``target_accept`` is rho*, ``zeta`` the
    learning rate of EstimateAlpha, [alpha_floor, alpha_ceil] its search range)."""

    def __init__(
        self,
        target_accept: float,
        zeta: float,
        alpha_ceil: float,
        alpha_floor: float,
        tune_budget: int,
        tune_budget_frac: float,
        burnin_steps: int,
        burnin_mh_steps: int,
        alpha_candidates: int,
        beta_candidates: int,
    ):
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
        self.target_accept, self.zeta = float(target_accept), float(zeta)
        self.alpha_ceil, self.alpha_floor = float(alpha_ceil), float(alpha_floor)
        self.tune_budget, self.tune_budget_frac = int(tune_budget), float(tune_budget_frac)
        self.burnin_steps, self.burnin_mh_steps = int(burnin_steps), int(burnin_mh_steps)
        self.alpha_candidates, self.beta_candidates = int(alpha_candidates), int(beta_candidates)

    # -- budget ---------------------------------------------------------------------
    def _burnin_cost(self, s: int) -> int:
        return self.burnin_steps + (self.burnin_mh_steps // s) * s

    def _balance_reserve(self, s: int) -> int:
        return max(s - 1, 0) * self.beta_candidates

    def min_tune_budget(self, s: int) -> int:
        """Smallest budget Algorithm 2 can run with for cycles of ``s`` steps: burn-in, the
        (worst-case) balancing search, and one round of ``alpha_candidates`` proposals for
        each of alpha_min and alpha_max."""
        return self._burnin_cost(s) + self._balance_reserve(s) + 2 * self.alpha_candidates

    def resolve_tune_budget(self, s: int, n_steps_total: int) -> int:
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
        need = self.min_tune_budget(s)
        check(
            budget >= need,
            "tune_budget",
            f"a run of {n_steps_total} steps gives a tuning budget of {budget} steps; Algorithm 2 "
            f"needs >= {need} (burn-in {self._burnin_cost(s)}, balancing schedule "
            f"{self._balance_reserve(s)}, alpha search {2 * self.alpha_candidates}); raise "
            "tune_budget/tune_budget_frac, shorten the burn-in, or set tune=false",
        )
        return budget

    # -- Algorithms 3-5 ---------------------------------------------------------------
    @staticmethod
    def _trial(model, state, generator, alpha, beta, space):
        new, info = kernel_step(model, state, generator, alpha, beta, True, space)
        return new, float(info.accept_prob.float().mean())

    def init_burnin(self, kernel: CyclicalKernel, model, state, generator, space) -> ChainState:
        """Algorithm 3: unadjusted steps at (alpha_ceil, beta_max), then floor(l_MH / s) MH
        cycles of the naive schedule (Eq. 8 between ceil/floor and beta_max/beta_min)."""
        for _ in range(self.burnin_steps):
            state, _ = kernel_step(
                model, state, generator, self.alpha_ceil, kernel.beta_max, False, space
            )
        sc = kernel.steps_per_cycle
        a_s = alpha_schedule(self.alpha_ceil, self.alpha_floor, sc)
        b_s = cosine_beta_schedule(kernel.beta_max, kernel.beta_min, sc)
        for _ in range(self.burnin_mh_steps // sc):
            for a, b in zip(a_s, b_s):
                state, _ = kernel_step(model, state, generator, a, b, True, space)
        return state

    def estimate_alpha(
        self,
        model,
        state: ChainState,
        generator: torch.Generator,
        space: StateSpace,
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
            lo, hi = (bound * (1 - gap), bound) if find_max else (bound, bound * (1 + gap))
            cands = torch.linspace(lo, hi, t, dtype=torch.float64).clamp(
                self.alpha_floor, self.alpha_ceil
            )
            best = None
            for a in cands.tolist():
                new, rho = self._trial(model, state, generator, a, beta, space)
                used += 1
                err = abs(rho - self.target_accept)
                best_err = math.inf if best is None else abs(best[1] - self.target_accept)
                # ties (e.g. all candidates accept everything) move in the search direction:
                # the largest candidate for alpha_min, the smallest for alpha_max
                if err < best_err or (err == best_err and not find_max):
                    best = (a, rho, new)
            bound, rho_cur, state = best
            if trace is not None:
                phase = "alpha_max" if find_max else "alpha_min"
                trace.append({"phase": phase, "alpha": bound, "beta": beta, "accept": rho_cur})
        return bound, state, used

    def estimate_balancing_schedule(
        self,
        kernel: CyclicalKernel,
        model,
        state: ChainState,
        generator: torch.Generator,
        space: StateSpace,
        alpha_sched: list[float],
        alpha_min: float,
        trace: list | None = None,
    ) -> tuple[list[float], ChainState, int]:
        """Algorithm 5 (EstimateBalSched), Eq. 9: beta_0 = beta_max; for each later position try
        ``beta_candidates`` values evenly spaced in [beta_min, beta_{i-1}] and keep the one with
        the highest mean acceptance. Positions whose step size is clamped to alpha_min get
        beta_min (the pair tuned by EstimateAlpha; the algorithm's final append) at no cost.
        Returns (beta schedule of length s, state, steps used)."""
        sched = [kernel.beta_max]
        ceil, used = kernel.beta_max, 0
        for a in alpha_sched[1:]:
            if a <= alpha_min:
                sched.append(kernel.beta_min)
                continue
            cands = torch.linspace(kernel.beta_min, ceil, self.beta_candidates, dtype=torch.float64)
            best = None
            for b in cands.tolist():
                new, rho = self._trial(model, state, generator, a, b, space)
                used += 1
                if best is None or rho > best[1]:
                    best = (b, rho, new)
            ceil, _, state = best
            sched.append(ceil)
            if trace is not None:
                trace.append({"phase": "beta", "alpha": a, "beta": ceil, "accept": best[1]})
        return sched, state, used

    def tune(
        self,
        kernel: CyclicalKernel,
        model,
        state: ChainState,
        generator: torch.Generator,
        budget: int,
    ) -> tuple[ChainState, TuneResult]:
        """Algorithm 2 within ``budget`` steps from ``state`` (which it advances). Returns the
        state after tuning and the schedule it found (``kernel`` is only read)."""
        space, s = kernel.space(model), kernel.steps_per_cycle
        trace: list[dict] = []
        state = self.init_burnin(kernel, model, state, generator, space)
        used = self._burnin_cost(s)
        alpha_budget = (budget - used - self._balance_reserve(s)) // 2
        a_min, state, u = self.estimate_alpha(
            model, state, generator, space, kernel.beta_min, False, alpha_budget, trace=trace
        )
        used += u
        a_max, state, u = self.estimate_alpha(
            model, state, generator, space, kernel.beta_max, True, alpha_budget, trace=trace
        )
        used += u
        a_max = max(a_max, a_min)  # Eq. 8 needs alpha_max >= alpha_min
        a_sched = alpha_schedule(a_max, a_min, s)
        betas, state, u = self.estimate_balancing_schedule(
            kernel, model, state, generator, space, a_sched, a_min, trace=trace
        )
        used += u
        result = TuneResult(a_max, a_min, a_sched, betas, used, used, used, budget, trace)
        return state, result
