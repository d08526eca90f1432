"""ACS for persistent contrastive divergence (ACS paper Algorithm 6, App. B and D.4).

Same loss, buffer and optimiser as :class:`ebmlab.learning.pcd.PCD`; only the sampling part of
an iteration differs: it follows :class:`~ebmlab.learning.acs_schedule.ACSPCDSchedule`
(exploration once per cycle, exploitation otherwise, periodic re-tuning of alpha_max /
alpha_min on the persistent chains).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ebmlab.errors import ConfigError
from ebmlab.learning.acs_schedule import ACSPCDSchedule
from ebmlab.learning.batches import Transform
from ebmlab.learning.pcd import PCD


class ACSPCD(PCD):
    """PCD whose sampler follows ACS's PCD schedule (needs ``sampler=acs``).

    Args (beyond :class:`PCD`):
        acs: Algorithm 6's settings (cycle length, re-tuning intervals and budget, adaptive
            floor, exploration steps).
    """

    follows_pcd_schedule = "acs"  # what a sampler's ``pcd_schedule = "acs"`` asks of PCD

    def __init__(
        self,
        buffer_size: int,
        batch_size: int,
        sampler_steps: int,
        lr: float,
        l1: float,
        buffer_init: str,
        acs: ACSPCDSchedule,
    ):
        super().__init__(buffer_size, batch_size, sampler_steps, lr, l1, buffer_init)
        self.acs = acs

    def setup(
        self,
        model,
        data: Tensor,
        generator: torch.Generator,
        sampler=None,
        transform: Transform | None = None,
    ) -> None:
        if getattr(sampler, "pcd_schedule", None) != "acs":
            raise ConfigError(
                "learner",
                f"acs_pcd needs sampler=acs (got {type(sampler).__name__}); use learner=pcd "
                "for other samplers",
            )
        self.acs.bind(sampler)
        super().setup(model, data, generator, sampler, transform)

    def sample(self, model, generator: torch.Generator) -> dict:
        """Advance the buffer by this iteration's ACS schedule; returns sampling scalars."""
        it, k = self.iteration, self.sampler_steps
        self.buffer, out = self.acs.advance(model, self.buffer, generator, it, k)
        return out

    def state_dict(self) -> dict:
        return {**super().state_dict(), "acs": self.acs.state_dict()}

    def load_state_dict(self, d: dict) -> None:
        super().load_state_dict(d)
        self.acs.load_state_dict(d["acs"], d["sampler"])
