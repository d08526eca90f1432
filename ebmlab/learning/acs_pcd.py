"""ACS for persistent contrastive divergence (ACS paper Algorithm 6, App. B and D.4).

Same loss, buffer and optimiser as :class:`ebmlab.learning.pcd.PCD`; only the sampling part of
an iteration differs. With ``L = sampler.pcd_cycle_length``:

- iteration ``i`` with ``i % L == 0``: exploration, ``explore_steps`` steps at
  (alpha_max, beta_max) without MH;
- the other iterations: exploitation, ``sampler_steps`` steps at (alpha_min, beta_min=0.5)
  with MH;
- re-tuning (Alg. 6, lines 4-10) replaces the sampling of an iteration: EstimateAlphaMax at the
  first iteration of every ``pcd_retune_max_every``-th cycle, EstimateAlphaMin at the second
  iteration of every ``pcd_retune_min_every``-th cycle (iterations 0 and 1 do the initial
  tuning); the tuning proposals advance the persistent buffer (``pcd_tune_budget`` steps).

The schedule, the tuning and their bookkeeping live in :class:`ebmlab.samplers.acs.ACS`
(``pcd_tune_action``, ``pcd_retune``, ``pcd_step_params``, ``pcd_step``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ebmlab.errors import ConfigError, check
from ebmlab.learning.pcd import PCD


class ACSPCD(PCD):
    """PCD whose sampler follows ACS's PCD schedule (needs ``sampler=acs``).

    Args (beyond :class:`PCD`):
        explore_steps: sampler steps of the exploration iteration (App. D.4: "half the
            sampling steps"); 0 = ``sampler_steps // 2`` (at least 1).
    """

    def __init__(
        self,
        buffer_size: int = 100,
        batch_size: int = 100,
        sampler_steps: int = 40,
        lr: float = 1e-3,
        l1: float = 0.0,
        buffer_init: str = "data_mean",
        explore_steps: int = 0,
    ):
        super().__init__(buffer_size, batch_size, sampler_steps, lr, l1, buffer_init)
        check(explore_steps >= 0, "explore_steps", f"must be >= 0 (got {explore_steps})")
        self.explore_steps = explore_steps or max(1, sampler_steps // 2)

    def setup(self, model, sampler, data: Tensor, generator: torch.Generator) -> None:
        if not all(hasattr(sampler, m) for m in ("pcd_step", "pcd_retune", "pcd_tune_action")):
            raise ConfigError(
                "learner",
                f"acs_pcd needs sampler=acs (got {type(sampler).__name__}); use learner=pcd "
                "for other samplers",
            )
        super().setup(model, sampler, data, generator)

    def sample(self, model, generator: torch.Generator) -> dict:
        """Advance the buffer by this iteration's ACS schedule; returns sampling scalars."""
        s, it = self.sampler, self.iteration
        state = s.init(model, self.buffer)
        n_lp, n_grad = s.init_cost()
        action = s.pcd_tune_action(it)
        if action is not None:
            state, res = s.pcd_retune(model, state, generator, action)
            acc = [r["accept"] for r in res.trace]
            out = {
                "accept_rate": sum(acc) / len(acc) if acc else float("nan"),
                "jump": float("nan"),
                "n_log_prob": n_lp + res.n_log_prob,
                "n_grad": n_grad + res.n_grad,
                "phase": 2.0 if action == "alpha_max" else 3.0,
            }
        else:
            explore = it % s.pcd_cycle_length == 0
            k = self.explore_steps if explore else self.sampler_steps
            state, info = s.pcd_step(model, state, generator, it, k)
            out = {
                "accept_rate": float(info.accept_prob.float().mean()),
                "jump": float(info.jump.float().mean()),
                "n_log_prob": n_lp + info.n_log_prob,
                "n_grad": n_grad + info.n_grad,
                "phase": 1.0 if explore else 0.0,
            }
        out["alpha_max"], out["alpha_min"] = float(s.alpha_max), float(s.alpha_min)
        self.buffer = state.x.detach()
        return out
