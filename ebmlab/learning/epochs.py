"""Training one epoch at a time with a learner that walks the data in shuffled passes (GRBM
modified CD, CD): the loop step of the GRBM tasks.

The learner's own ``step`` still does one mini-batch update and draws the epoch's permutation
itself; :func:`run_epoch` repeats it for one pass and averages what it reports.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import Tensor


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
