"""Training one epoch at a time with a learner that walks the data in shuffled passes (GRBM
modified CD, CD): the loop step of the GRBM tasks.

The learner's own ``step`` still does one mini-batch update and draws the epoch's permutation
itself; :func:`run_epoch` repeats it for one pass and averages what it reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor, nn


class EpochLearner(Protocol):
    """A :class:`~ebmlab.core.protocols.Learner` whose ``epoch`` counts finished passes."""

    @property
    def epoch(self) -> int: ...

    def step(self, model: Any, generator: torch.Generator) -> dict[str, Any]: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, d: dict) -> None: ...


def run_epoch(learner: EpochLearner, model: Any, generator: torch.Generator) -> dict[str, Any]:
    """``learner.step`` until ``learner.epoch`` advances (one pass over the data); returns
    every scalar averaged over the pass's updates. Sums are float64 in update order (tensors
    stay on their device), so they equal a host-side running sum of ``float(value)``."""
    epoch, sums, n = learner.epoch, {}, 0
    while learner.epoch == epoch:
        for k, v in learner.step(model, generator).items():
            v = v.detach().to(torch.float64) if isinstance(v, Tensor) else float(v)
            sums[k] = sums.get(k, 0.0) + v
        n += 1
    return {k: s / n for k, s in sums.items()}


@dataclass
class EpochTraining:
    """``model`` trained by ``learner`` one epoch per call of :meth:`epoch`; ``last`` keeps the
    last epoch's averaged update scalars (a run's final acceptance rate, reconstruction error),
    checkpointed with the model and the learner."""

    model: nn.Module
    learner: EpochLearner
    last: dict = field(default_factory=dict)

    def epoch(self, generator: torch.Generator) -> dict[str, Any]:
        self.last = run_epoch(self.learner, self.model, generator)
        return self.last

    def state_dict(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "learner": self.learner.state_dict(),
            "last": self.last,
        }

    def load_state_dict(self, d: dict) -> None:
        self.model.load_state_dict(d["model"])
        self.learner.load_state_dict(d["learner"])
        self.last = d["last"]
