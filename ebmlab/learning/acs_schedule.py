"""ACS's schedule for persistent contrastive divergence (ACS paper Algorithm 6, App. B, D.4).

With ``L = cycle_length`` training iterations per cycle, one PCD iteration advances the
persistent chains as follows:

- iteration ``i`` with ``i % L == 0``: exploration, ``explore_steps`` steps at
  (alpha_max, beta_max) without MH;
- the other iterations: exploitation, the learner's sampler steps at (alpha_min, beta_min)
  with MH;
- re-tuning (Alg. 6, lines 4-10) replaces the sampling of an iteration: EstimateAlphaMax
  (Algorithm 4 at beta_max) at the first iteration of every ``retune_max_every``-th cycle,
  EstimateAlphaMin (at beta_min) at the second iteration of every ``retune_min_every``-th
  cycle (iterations 0 and 1 therefore do the initial tuning); its ``tune_budget`` proposals
  advance the chains. With ``adaptive_floor`` the alpha_min search starts one standard
  deviation below the mean of the past alpha_min (App. D.4).

The schedule hands parameters to the FIXED ACS kernel and never writes into the sampler: it
keeps its own :class:`ACSPCDParams` (started from the sampler's configured values, changed
only by re-tuning) and runs each iteration's steps with a frozen
:class:`~ebmlab.samplers.acs.ACSKernel` at that iteration's (alpha, beta, MH) through the chain
runner. The sampler (``sampler=acs``, which declares ``pcd_schedule = "acs"``) gives the
configured parameters and EstimateAlpha with its tuning settings (target acceptance, zeta,
alpha range, candidates); this object owns Algorithm 6's settings, the parameters and the
alpha_min history.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import torch
from torch import Tensor

from ebmlab.errors import ConfigError, check
from ebmlab.learning.pcd import PersistentChains
from ebmlab.samplers.acs import ACSKernel
from ebmlab.samplers.base import ChainState

PHASES = {"exploit": 0.0, "explore": 1.0, "alpha_max": 2.0, "alpha_min": 3.0}


@dataclass(frozen=True)
class ACSPCDParams:
    """The ACS kernel parameters of Algorithm 6: exploration at (alpha_max, beta_max) without
    MH (lines 13-14, 22-24), exploitation at (alpha_min, beta_min) with MH when ``mh``."""

    alpha_max: float
    alpha_min: float
    beta_max: float
    beta_min: float
    mh: bool

    def at(self, explore: bool) -> tuple[float, float, bool]:
        """(alpha, beta, use_mh) of an exploration or an exploitation iteration."""
        if explore:
            return self.alpha_max, self.beta_max, False
        return self.alpha_min, self.beta_min, self.mh


class ACSPCDSchedule:
    """Algorithm 6 for one persistent buffer; :meth:`bind` it to an ACS sampler first.

    Args:
        cycle_length: training iterations per cycle (deep EBM 50; RBM learning 8 / 20).
        retune_max_every: cycles between EstimateAlphaMax calls.
        retune_min_every: cycles between EstimateAlphaMin calls.
        tune_budget: proposals per EstimateAlpha call (App. D.5: 200).
        adaptive_floor: start the alpha_min search at mean - std of past alpha_min (App. D.4).
        explore_steps: sampler steps of the exploration iteration; 0 = half the learner's
            sampler steps (App. D.4: "half the sampling steps"), at least 1.
    """

    def __init__(
        self,
        cycle_length: int,
        retune_max_every: int,
        retune_min_every: int,
        tune_budget: int,
        adaptive_floor: bool,
        explore_steps: int,
    ):
        check(cycle_length >= 2, "cycle_length", f"must be >= 2 (got {cycle_length})")
        for key, v in (
            ("retune_max_every", retune_max_every),
            ("retune_min_every", retune_min_every),
        ):
            check(v >= 1, key, f"must be >= 1 cycle (got {v})")
        check(tune_budget >= 1, "tune_budget", f"must be >= 1 (got {tune_budget})")
        check(explore_steps >= 0, "explore_steps", f"must be >= 0 (got {explore_steps})")
        self.cycle_length = int(cycle_length)
        self.retune_max_every, self.retune_min_every = int(retune_max_every), int(retune_min_every)
        self.tune_budget, self.adaptive_floor = int(tune_budget), bool(adaptive_floor)
        self.explore_steps = int(explore_steps)
        self.alpha_min_history: list[float] = []
        self.sampler = None
        self.params: ACSPCDParams | None = None
        self.chains = PersistentChains()
        self._kernels: dict[tuple[float, float, bool], ACSKernel] = {}

    def bind(self, sampler) -> None:
        """Take EstimateAlpha and the starting parameters from ``sampler``, which must declare
        ``pcd_schedule = "acs"`` (ConfigError otherwise); the sampler is only read."""
        if getattr(sampler, "pcd_schedule", None) != "acs":
            raise ConfigError(
                "learner",
                f"ACS's PCD schedule needs sampler=acs (got {type(sampler).__name__}); use "
                "learner=pcd for other samplers",
            )
        t = sampler.tuner.alpha_candidates
        check(
            self.tune_budget >= t,
            "learner.acs.tune_budget",
            f"must be >= sampler.alpha_candidates={t} steps (got {self.tune_budget})",
        )
        self.sampler = sampler
        self.params = ACSPCDParams(
            float(sampler.alpha_max),
            float(sampler.alpha_min),
            float(sampler.beta_max),
            float(sampler.beta_min),
            bool(sampler.mh),
        )

    # -- Algorithm 6 -------------------------------------------------------------------
    def explores(self, iteration: int) -> bool:
        """The first iteration of each cycle explores (Alg. 6 line 12)."""
        return iteration % self.cycle_length == 0

    def step_params(self, iteration: int) -> tuple[float, float, bool]:
        """(alpha, beta, use_mh) of a sampling iteration: the first of each cycle explores with
        (alpha_max, beta_max) and no MH, the rest exploit with (alpha_min, beta_min) and MH."""
        return self.params.at(self.explores(iteration))

    def kernel(self, iteration: int) -> ACSKernel:
        """The fixed ACS kernel of this iteration's parameters (the same object while they
        stay the same, so a captured block stays valid)."""
        key = self.step_params(iteration)
        if key not in self._kernels:
            self._kernels = {k: v for k, v in self._kernels.items() if k in self._live()}
            self._kernels[key] = ACSKernel(*key, self.sampler.state_kind)
        return self._kernels[key]

    def _live(self) -> set[tuple[float, float, bool]]:
        return {self.params.at(True), self.params.at(False)}

    def tune_action(self, iteration: int) -> str | None:
        """Which re-tuning replaces sampling at this iteration ("alpha_max", "alpha_min")."""
        cycle, pos = divmod(iteration, self.cycle_length)
        if pos == 0 and cycle % self.retune_max_every == 0:
            return "alpha_max"
        if pos == 1 and cycle % self.retune_min_every == 0:
            return "alpha_min"
        return None

    def retune(
        self, model, state: ChainState, generator: torch.Generator, which: str
    ) -> tuple[ChainState, int, list[dict]]:
        """Re-estimate alpha_max (at beta_max) or alpha_min (at beta_min) with Algorithm 4 on
        the persistent chains, which it also advances; the result goes into :attr:`params`
        (alpha_max >= alpha_min kept). Returns (state, proposals used, the search's trace)."""
        s, p, trace = self.sampler, self.params, []
        space = s.space(model)
        if which == "alpha_max":
            a, state, used = s.tuner.estimate_alpha(
                model, state, generator, space, p.beta_max, True, self.tune_budget, trace=trace
            )
            self.params = replace(p, alpha_max=max(a, p.alpha_min))
        elif which == "alpha_min":
            start = None
            if self.adaptive_floor and len(self.alpha_min_history) >= 2:
                h = torch.tensor(self.alpha_min_history, dtype=torch.float64)
                start = float(h.mean() - h.std())
            a, state, used = s.tuner.estimate_alpha(
                model, state, generator, space, p.beta_min, False, self.tune_budget, start, trace
            )
            self.alpha_min_history.append(a)
            self.params = replace(p, alpha_max=max(p.alpha_max, a), alpha_min=a)
        else:
            raise ValueError(f"which must be 'alpha_max' or 'alpha_min' (got {which!r})")
        return state, used, trace

    def advance(
        self, model, x: Tensor, generator: torch.Generator, iteration: int, n_steps: int
    ) -> tuple[Tensor, dict]:
        """One PCD iteration of the buffer rows ``x``: re-tune, explore or exploit (``n_steps``
        = the learner's sampler steps). Returns the new rows and scalars (accept_rate, jump,
        the iteration's n_log_prob / n_grad including the initial evaluation, phase code of
        :data:`PHASES`, alpha_max, alpha_min; no jump on a re-tuning iteration); sampling
        iterations read nothing back to the host (re-tuning does: Algorithm 4 decides on the
        acceptance it sees)."""
        action = self.tune_action(iteration)
        if action is not None:
            state = self.sampler.init(model, x)
            n_lp, n_grad = self.sampler.init_cost()
            state, used, trace = self.retune(model, state, generator, action)
            acc = [r["accept"] for r in trace]
            out = {  # no jump: the search's trial proposals are not steps of one kernel
                "accept_rate": sum(acc) / len(acc),
                "n_log_prob": n_lp + used,
                "n_grad": n_grad + used,
                "phase": PHASES[action],
            }
            x = state.x.detach()
        else:
            explore = self.explores(iteration)
            k = (self.explore_steps or max(1, n_steps // 2)) if explore else n_steps
            x, out = self.chains.advance(model, self.kernel(iteration), x, generator, k)
            out["phase"] = PHASES["explore" if explore else "exploit"]
        out["alpha_max"], out["alpha_min"] = self.params.alpha_max, self.params.alpha_min
        return x, out

    def state_dict(self) -> dict:
        params = {} if self.params is None else asdict(self.params)  # None: never bound
        return {"alpha_min_history": list(self.alpha_min_history), **params}

    def load_state_dict(self, d: dict, sampler_state: dict | None = None) -> None:
        """``sampler_state``: the learner's checkpointed sampler state, where checkpoints
        written before the schedule kept its own parameters hold alpha_max / alpha_min."""
        self.alpha_min_history = [float(a) for a in d["alpha_min_history"]]
        src = d if "alpha_max" in d else (sampler_state or {})
        if self.params is not None and "alpha_max" in src:
            self.params = replace(
                self.params, alpha_max=float(src["alpha_max"]), alpha_min=float(src["alpha_min"])
            )
