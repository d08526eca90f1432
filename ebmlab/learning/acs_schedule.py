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

The kernel and EstimateAlpha come from the sampler (:class:`~ebmlab.samplers.acs.ACS`, whose
tuning settings -- target acceptance, zeta, alpha range, candidates -- apply); this object
owns only Algorithm 6's settings and the alpha_min history.
"""

from __future__ import annotations

import torch

from ebmlab.errors import ConfigError, check
from ebmlab.samplers.acs import ACS, TuneResult, kernel_step
from ebmlab.samplers.base import ChainState, StepInfo

PHASES = {"exploit": 0.0, "explore": 1.0, "alpha_max": 2.0, "alpha_min": 3.0}


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
        self.sampler: ACS | None = None

    def bind(self, sampler) -> None:
        """Use ``sampler`` (an ACS) for this buffer; ConfigError otherwise."""
        if not isinstance(sampler, ACS):
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

    # -- Algorithm 6 -------------------------------------------------------------------
    def step_params(self, iteration: int) -> tuple[float, float, bool]:
        """(alpha, beta, use_mh) of a sampling iteration: the first of each cycle explores with
        (alpha_max, beta_max) and no MH, the rest exploit with (alpha_min, beta_min) and MH."""
        s = self.sampler
        if iteration % self.cycle_length == 0:
            return s.alpha_max, s.beta_max, False
        return s.alpha_min, s.beta_min, s.mh

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
    ) -> tuple[ChainState, TuneResult]:
        """Re-estimate alpha_max (at beta_max) or alpha_min (at beta_min) with Algorithm 4 on
        the persistent chains, which it also advances; installs it in the sampler's cycle."""
        s, trace = self.sampler, []
        space = s.space(model)
        if which == "alpha_max":
            a, state, used = s.tuner.estimate_alpha(
                model, state, generator, space, s.beta_max, True, self.tune_budget, trace=trace
            )
            s.set_schedule(max(a, s.alpha_min), s.alpha_min, s.beta_sched)
        elif which == "alpha_min":
            start = None
            if self.adaptive_floor and len(self.alpha_min_history) >= 2:
                h = torch.tensor(self.alpha_min_history, dtype=torch.float64)
                start = float(h.mean() - h.std())
            a, state, used = s.tuner.estimate_alpha(
                model, state, generator, space, s.beta_min, False, self.tune_budget, start, trace
            )
            self.alpha_min_history.append(a)
            s.set_schedule(max(s.alpha_max, a), a, s.beta_sched)
        else:
            raise ValueError(f"which must be 'alpha_max' or 'alpha_min' (got {which!r})")
        s.tuned = True
        res = TuneResult(s.alpha_max, s.alpha_min, list(s.alpha_sched), list(s.beta_sched))
        res.n_steps = res.n_log_prob = res.n_grad = used
        res.budget, res.trace = self.tune_budget, trace
        return state, res

    def sample(
        self, model, state: ChainState, generator: torch.Generator, iteration: int, n_steps: int
    ) -> tuple[ChainState, StepInfo]:
        """``n_steps`` kernel steps with :meth:`step_params` (iteration). Returns the state and
        a StepInfo with mean acceptance / jump and summed costs."""
        alpha, beta, use_mh = self.step_params(iteration)
        space = self.sampler.space(model)
        acc = torch.zeros_like(state.log_prob, dtype=torch.float32)
        jump = torch.zeros_like(acc)
        accepted = torch.zeros_like(acc, dtype=torch.bool)
        for _ in range(n_steps):
            state, info = kernel_step(model, state, generator, alpha, beta, use_mh, space)
            acc = acc + info.accept_prob.float()
            jump = jump + info.jump.float()
            accepted = accepted | info.accepted
        n = max(n_steps, 1)
        # accepted: whether any of the n_steps moves was taken
        return state, StepInfo(acc / n, accepted, jump / n, n_log_prob=n_steps, n_grad=n_steps)

    def advance(
        self, model, state: ChainState, generator: torch.Generator, iteration: int, n_steps: int
    ) -> tuple[ChainState, dict]:
        """One PCD iteration of the buffer: re-tune, explore or exploit (``n_steps`` = the
        learner's sampler steps). Returns the state and scalars (accept_rate, jump, the
        iteration's n_log_prob / n_grad, phase code of :data:`PHASES`, alpha_max, alpha_min)."""
        action = self.tune_action(iteration)
        if action is not None:
            state, res = self.retune(model, state, generator, action)
            acc = [r["accept"] for r in res.trace]
            out = {
                "accept_rate": sum(acc) / len(acc) if acc else float("nan"),
                "jump": float("nan"),
                "n_log_prob": res.n_log_prob,
                "n_grad": res.n_grad,
                "phase": PHASES[action],
            }
        else:
            explore = iteration % self.cycle_length == 0
            k = (self.explore_steps or max(1, n_steps // 2)) if explore else n_steps
            state, info = self.sample(model, state, generator, iteration, k)
            out = {
                "accept_rate": float(info.accept_prob.float().mean()),
                "jump": float(info.jump.float().mean()),
                "n_log_prob": info.n_log_prob,
                "n_grad": info.n_grad,
                "phase": PHASES["explore" if explore else "exploit"],
            }
        out["alpha_max"], out["alpha_min"] = (
            float(self.sampler.alpha_max),
            float(self.sampler.alpha_min),
        )
        return state, out

    def state_dict(self) -> dict:
        return {"alpha_min_history": list(self.alpha_min_history)}

    def load_state_dict(self, d: dict) -> None:
        self.alpha_min_history = [float(a) for a in d["alpha_min_history"]]
