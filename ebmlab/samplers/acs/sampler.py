"""The Automatic Cyclical Sampler as configured (ACS; Pynadath et al., ICML 2024).

:class:`ACS` is the cyclical kernel of Algorithm 1 (:mod:`ebmlab.samplers.acs.kernel`) plus
the settings of its automatic tuning (Algorithms 2-5, :mod:`ebmlab.samplers.acs.tune`). With
``tune: true`` a task calls :meth:`ACS.tune` before sampling, which installs the tuned,
then fixed, schedule; with ``tune: false`` the schedule is built from ``alpha_max`` /
``alpha_min`` (Eq. 8) and the cosine beta interpolation. ACS for PCD (Algorithm 6) is a
learner's schedule: :mod:`ebmlab.learning.acs_schedule`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ebmlab.errors import check
from ebmlab.samplers.acs.kernel import CyclicalKernel
from ebmlab.samplers.acs.tune import ACSTuner, TuneResult
from ebmlab.samplers.base import ChainState


class ACS(CyclicalKernel):
    """Cyclical kernel (Alg. 1) with automatic tuning (Alg. 2-5) when ``tune``."""

    pcd_schedule = "acs"  # PCD learners follow ACS's Algorithm 6 (ebmlab.learning.acs_schedule)

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
        self.tuned = False

    def resolve_tune_budget(self, n_steps_total: int) -> int:
        """The tuning budget in steps for a run of ``n_steps_total`` sampling steps."""
        return self.tuner.resolve_tune_budget(self.steps_per_cycle, n_steps_total)

    def tune(
        self, model, x: Tensor | ChainState, generator: torch.Generator, n_steps_total: int
    ) -> tuple[ChainState, TuneResult]:
        """Algorithm 2 within the budget for a run of ``n_steps_total`` sampling steps.

        ``x`` is the initial states [chains, ...] or a ChainState. Installs the schedule,
        resets the cycle to position 0 and returns (state after tuning, TuneResult)."""
        budget = self.resolve_tune_budget(n_steps_total)
        fresh = not isinstance(x, ChainState)
        state = self.init(model, x) if fresh else x
        state, res = self.tuner.tune(self, model, state, generator, budget)
        self.set_schedule(res.alpha_max, res.alpha_min, res.beta_schedule)
        self.tuned = True
        self.reset_cycle()
        res.n_log_prob += int(fresh)  # the initial evaluation of a bare tensor
        res.n_grad += int(fresh)
        return state, res

    def step(self, model, state: ChainState, generator: torch.Generator):
        if self.tune_enabled and not self.tuned:
            raise RuntimeError(
                "ACS has tune=true but was not tuned: call sampler.tune(model, x, generator, "
                "n_steps_total) before sampling, or set tune=false with alpha_max/alpha_min"
            )
        return super().step(model, state, generator)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "tuned": self.tuned}

    def load_state_dict(self, d: dict) -> None:
        super().load_state_dict(d)
        self.tuned = bool(d["tuned"])
