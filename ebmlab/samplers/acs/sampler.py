"""The Automatic Cyclical Sampler as configured (ACS; Pynadath et al., ICML 2024).

:class:`ACS` is the cyclical kernel of Algorithm 1 (:mod:`ebmlab.samplers.acs.kernel`) and
an :class:`~ebmlab.core.protocols.Adaptation`: with ``tune: true`` its steps are Algorithm 2's
(:class:`~ebmlab.samplers.acs.tune.ACSTuning`, budget planned from the run's length) until
the schedule is found, and :meth:`ACS.frozen` returns the fixed cyclical kernel with that
schedule; with ``tune: false`` it is done from the start and frozen with the schedule built
from ``alpha_max`` / ``alpha_min`` (Eq. 8) and the cosine beta interpolation.
:class:`ebmlab.core.chain.ChainRunner` runs either; nobody calls a tuning by hand. ACS for
PCD (Algorithm 6) is a learner's schedule: :mod:`ebmlab.learning.acs_schedule`.
"""

from __future__ import annotations

import torch

from ebmlab.errors import check
from ebmlab.samplers.acs.kernel import CyclicalKernel
from ebmlab.samplers.acs.tune import ACSTuner, ACSTuning, TuneResult
from ebmlab.samplers.base import ChainState


class ACS(CyclicalKernel):
    """Cyclical kernel (Alg. 1) whose schedule is tuned (Alg. 2-5) as its warm-up when ``tune``."""

    pcd_schedule = "acs"  # in PCD it follows ACS's schedule (Algorithm 6, learning.acs_schedule)

    def __init__(
        self,
        steps_per_cycle: int,
        alpha_max: float,
        alpha_min: float,
        beta_max: float,
        beta_min: float,
        target_accept: float,
        zeta: float,
        alpha_ceil: float,
        alpha_floor: float,
        tune: bool,
        tune_budget: int,
        tune_budget_frac: float,
        burnin_steps: int,
        burnin_mh_steps: int,
        alpha_candidates: int,
        beta_candidates: int,
        mh: bool,
        state_kind: str,
    ):
        super().__init__(steps_per_cycle, alpha_max, alpha_min, beta_max, beta_min, mh, state_kind)
        self.tuner = ACSTuner(
            target_accept,
            zeta,
            alpha_ceil,
            alpha_floor,
            tune_budget,
            tune_budget_frac,
            burnin_steps,
            burnin_mh_steps,
            alpha_candidates,
            beta_candidates,
        )
        self.tune_enabled = bool(tune)
        if self.tune_enabled and tune_budget > 0:
            need = self.tuner.min_tune_budget(self.steps_per_cycle)
            check(
                tune_budget >= need,
                "tune_budget",
                f"must be >= {need} steps for burn-in + balancing schedule + one round of each "
                f"alpha search (got {tune_budget})",
            )
        self.tuned = False  # the tuning is done
        self.tuning: ACSTuning | None = None  # Algorithm 2 in progress, once planned

    @property
    def done(self) -> bool:
        """Nothing (left) to tune: ``tune: false``, or Algorithm 2 has found the schedule."""
        return not self.tune_enabled or self.tuned

    def plan(self, run_steps: int) -> None:
        """Fix the tuning budget for a run of ``run_steps`` sampling steps (ConfigError when
        Algorithm 2 cannot fit); the tuning's steps come before the run's."""
        if not self.tune_enabled or self.tuning is not None:
            return
        budget = self.tuner.resolve_tune_budget(self.steps_per_cycle, run_steps)
        self.tuning = ACSTuning(self.tuner, self, budget)

    def step(self, model, state: ChainState, generator: torch.Generator):
        """One step of Algorithm 2 while tuning (then installs the schedule, cycle at 0), else
        one step of Algorithm 1."""
        if self.done:
            return super().step(model, state, generator)
        if self.tuning is None:
            raise RuntimeError("ACS with tune=true needs the run's length: ChainRunner(run_steps=)")
        state, info = self.tuning.step(model, state, generator)
        if self.tuning.done:
            res = self.tuning.result()
            self.set_schedule(res.alpha_max, res.alpha_min, res.beta_schedule)
            self.reset_cycle()
            self.tuned = True
        return state, info

    def result(self) -> TuneResult | None:
        """The tuning's schedule and cost (None without tuning)."""
        return None if self.tuning is None else self.tuning.result()

    def frozen(self) -> CyclicalKernel:
        """The fixed cyclical kernel with this schedule, at cycle position 0."""
        if not self.done:
            raise RuntimeError("ACS tuning is not done")
        k = CyclicalKernel(
            self.steps_per_cycle, self.alpha_max, self.alpha_min, self.beta_max, self.beta_min,
            self.mh, self.state_kind,
        )  # fmt: skip
        k.set_schedule(self.alpha_max, self.alpha_min, self.beta_sched)
        return k

    def state_dict(self) -> dict:
        mid_way = self.tuning is not None and not self.tuned  # once done, the schedule suffices
        tuning = self.tuning.state_dict() if mid_way else None
        return {**super().state_dict(), "tuned": self.tuned, "tuning": tuning}

    def load_state_dict(self, d: dict) -> None:
        super().load_state_dict(d)
        self.tuned = bool(d["tuned"])
        if d.get("tuning") is not None:
            if self.tuning is None:
                raise RuntimeError("ACS: plan(run_steps) before restoring a tuning in progress")
            self.tuning.load_state_dict(d["tuning"])
