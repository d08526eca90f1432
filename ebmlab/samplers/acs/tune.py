"""Automatic tuning of the ACS schedule (Pynadath et al., ICML 2024, Algorithms 2-5).

:class:`ACSTuning` is Algorithm 2 one proposal at a time: InitBurnin (Alg. 3), EstimateAlpha
for alpha_min and alpha_max (Alg. 4) and EstimateBalSched (Alg. 5) within a step budget,
advancing the chains; when done, its :class:`TuneResult` is the FROZEN schedule of a
:class:`~ebmlab.samplers.acs.kernel.CyclicalKernel`. :class:`ACSTuner` holds the settings,
the budget arithmetic, and :meth:`ACSTuner.estimate_alpha` in one call, which ACS's PCD
schedule (Algorithm 6, :mod:`ebmlab.learning.acs_schedule`) re-runs during training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ebmlab.errors import ConfigError, check
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

    # -- Algorithm 4, as one call (the PCD schedule, Algorithm 6, re-runs it) ------------
    @staticmethod
    def _trial(model, state, generator, alpha, beta, space):
        new, info = kernel_step(model, state, generator, alpha, beta, True, space)
        return new, float(info.accept_prob.float().mean())

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


class ACSTuning:
    """Algorithm 2 one proposal per :meth:`step`, so its steps are ordinary chain steps
    (counted, checkpointed, resumable mid-way): InitBurnin (Alg. 3), EstimateAlpha for
    alpha_min at beta_min then alpha_max at beta_max (Alg. 4), EstimateBalSched (Alg. 5,
    Eq. 9), within ``budget`` steps. The draws and decisions are those of the algorithm run
    in one go: a search round proposes each candidate from the round's starting state (the
    chains stay there until the round ends) and then takes the kept candidate's state.
    ``kernel`` (the cyclical kernel being tuned) is only read: s, beta_max, beta_min.
    """

    def __init__(self, tuner: ACSTuner, kernel: CyclicalKernel, budget: int):
        s = kernel.steps_per_cycle
        self.tuner, self.kernel, self.budget = tuner, kernel, int(budget)
        self.alpha_budget = (budget - tuner._burnin_cost(s) - tuner._balance_reserve(s)) // 2
        self.burnin_alpha = alpha_schedule(tuner.alpha_ceil, tuner.alpha_floor, s)
        self.burnin_beta = cosine_beta_schedule(kernel.beta_max, kernel.beta_min, s)
        self.phase, self.i, self.used, self.phase_used = "burnin", 0, 0, 0
        self.bound, self.rho = 0.0, 0.0  # EstimateAlpha's current bound and its acceptance
        self.cands: list[float] | None = None  # the running round's candidates
        self.best: tuple[float, float, ChainState] | None = None  # (value, accept, state)
        self._saved_best: dict | None = None  # best of a restored round, until the next step
        self.alpha_min = self.alpha_max = 0.0
        self.alpha_sched: list[float] = []
        self.beta_sched: list[float] = []
        self.position = 1  # EstimateBalSched's position in the cycle
        self.trace: list[dict] = []
        self._advance()

    @property
    def done(self) -> bool:
        return self.phase == "done"

    def result(self) -> TuneResult:
        n = self.used
        return TuneResult(
            self.alpha_max, self.alpha_min, list(self.alpha_sched), list(self.beta_sched),
            n, n, n, self.budget, list(self.trace),
        )  # fmt: skip

    def _start_alpha(self, find_max: bool) -> None:
        t = self.tuner
        self.phase = "alpha_max" if find_max else "alpha_min"
        bound = t.alpha_ceil if find_max else t.alpha_floor
        self.bound, self.rho, self.phase_used = min(max(bound, t.alpha_floor), t.alpha_ceil), 0.0, 0

    def _advance(self) -> None:
        """Take the transitions that cost no step, up to the next proposal (or the end)."""
        t, k = self.tuner, self.kernel
        s = k.steps_per_cycle
        while self.cands is None:
            if self.phase == "burnin":
                if self.i < t.burnin_steps:
                    return
                self.phase, self.i = "burnin_mh", 0
            elif self.phase == "burnin_mh":
                if self.i < (t.burnin_mh_steps // s) * s:
                    return
                self._start_alpha(find_max=False)
            elif self.phase in ("alpha_min", "alpha_max"):
                n = t.alpha_candidates
                if self.phase_used + n <= self.alpha_budget:
                    gap = t.zeta * abs(t.target_accept - self.rho)
                    b = self.bound
                    lo, hi = (b * (1 - gap), b) if self.phase == "alpha_max" else (b, b * (1 + gap))
                    cands = torch.linspace(lo, hi, n, dtype=torch.float64)
                    self.cands = cands.clamp(t.alpha_floor, t.alpha_ceil).tolist()
                    self.i, self.best = 0, None
                elif self.phase == "alpha_min":
                    self.alpha_min = self.bound
                    self._start_alpha(find_max=True)
                else:
                    self.alpha_max = max(self.bound, self.alpha_min)  # Eq. 8: max >= min
                    self.alpha_sched = alpha_schedule(self.alpha_max, self.alpha_min, s)
                    self.phase, self.beta_sched, self.position = "beta", [k.beta_max], 1
            elif self.phase == "beta":
                if self.position >= s:
                    self.phase = "done"
                elif self.alpha_sched[self.position] <= self.alpha_min:
                    self.beta_sched.append(k.beta_min)  # the pair EstimateAlpha tuned, free
                    self.position += 1
                else:
                    ceil = self.beta_sched[-1]
                    cands = torch.linspace(k.beta_min, ceil, t.beta_candidates, dtype=torch.float64)
                    self.cands, self.i, self.best = cands.tolist(), 0, None
            else:  # done
                return

    def step(self, model, state: ChainState, generator: torch.Generator):
        """One proposal of Algorithm 2. Returns the chains' state (a search round's starting
        state until the round ends) and the proposal's StepInfo."""
        if self.done:
            raise RuntimeError("ACS tuning is done: step its frozen kernel")
        t, k = self.tuner, self.kernel
        space = k.space(model)
        if self.phase in ("burnin", "burnin_mh"):
            if self.phase == "burnin":
                a, b, mh = t.alpha_ceil, k.beta_max, False
            else:
                j = self.i % k.steps_per_cycle
                a, b, mh = self.burnin_alpha[j], self.burnin_beta[j], True
            new, info = kernel_step(model, state, generator, a, b, mh, space)
            self.i += 1
            self.used += 1
            self._advance()
            return new, info
        if self._saved_best is not None:  # restored mid-round: back on the chains' device
            d, self._saved_best = self._saved_best, None
            self.best = (d["value"], d["accept"], state.restored(d["chain"]))
        c = self.cands[self.i]
        alpha_phase = self.phase != "beta"
        if alpha_phase:
            beta = k.beta_max if self.phase == "alpha_max" else k.beta_min
            a, b = c, beta
        else:
            a, b = self.alpha_sched[self.position], c
        new, info = kernel_step(model, state, generator, a, b, True, space)
        rho = float(info.accept_prob.float().mean())  # one host read per tuning proposal
        self.i += 1
        self.used += 1
        best = self.best
        if alpha_phase:
            self.phase_used += 1
            err, target = abs(rho - t.target_accept), t.target_accept
            best_err = math.inf if best is None else abs(best[1] - target)
            # ties (e.g. all candidates accept everything) move in the search direction:
            # the largest candidate for alpha_min, the smallest for alpha_max
            if err < best_err or (err == best_err and self.phase == "alpha_min"):
                best = (c, rho, new)
        elif best is None or rho > best[1]:
            best = (c, rho, new)
        self.best = best
        if self.i < len(self.cands):
            return state, info
        value, accept, state = best
        if alpha_phase:
            self.bound, self.rho = value, accept
            self.trace.append({"phase": self.phase, "alpha": value, "beta": b, "accept": accept})
        else:
            self.beta_sched.append(value)
            self.trace.append({"phase": "beta", "alpha": a, "beta": value, "accept": accept})
            self.position += 1
        self.cands, self.best = None, None
        self._advance()
        return state, info

    _KEYS = ("phase", "i", "used", "phase_used", "bound", "rho", "cands", "alpha_min",
             "alpha_max", "alpha_sched", "beta_sched", "position", "trace", "budget")  # fmt: skip

    def state_dict(self) -> dict:
        d = {key: getattr(self, key) for key in self._KEYS}
        best = self.best
        if best is None and self._saved_best is not None:
            d["best"] = self._saved_best
        else:
            d["best"] = None if best is None else dict(value=best[0], accept=best[1])
            if best is not None:
                d["best"]["chain"] = best[2].state_dict()
        return d

    def load_state_dict(self, d: dict) -> None:
        if int(d["budget"]) != self.budget:
            raise ConfigError(
                "sampler.tune_budget",
                f"the checkpoint's tuning has a budget of {d['budget']} steps, this run "
                f"{self.budget}",
            )
        for key in self._KEYS:
            setattr(self, key, d[key])
        self.best, self._saved_best = None, d["best"]
