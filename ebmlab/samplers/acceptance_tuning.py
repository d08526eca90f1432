"""Burn-in tuning of a kernel's step size towards a target acceptance rate.

The AB paper's "LB" baseline (Sec. 5.1) is DLP with its step size tuned so that the average
acceptance is 0.574 (Sun et al. 2022b). :class:`AcceptanceTuning` runs the kernel for
``n_steps`` burn-in steps, after each one moving the step size by Robbins-Monro on its
logarithm,

    log a <- log a + rate * t^-0.6 * (mean acceptance of step t - target),

clipped to [1e-6, 1e6]; then it freezes and :meth:`frozen` returns the kernel, an ordinary
exact kernel with the tuned step size.
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

import torch

from ebmlab.core.protocols import EnergyModel, Kernel
from ebmlab.core.state import ChainState, StepInfo
from ebmlab.errors import ConfigError, check

GAIN_DECAY = 0.6  # Robbins-Monro gain t^-0.6
STEP_RANGE = (1e-6, 1e6)


@runtime_checkable
class StepSizeKernel(Kernel, Protocol):
    """A kernel with a scalar step size (DMALA's ``step_size``)."""

    step_size: float


class AcceptanceTuning:
    """An :class:`~ebmlab.core.protocols.Adaptation`: tune ``kernel.step_size`` for
    ``n_steps`` steps towards acceptance ``target`` (in (0, 1)) with gain ``rate``."""

    def __init__(self, kernel: Kernel, target: float, rate: float, n_steps: int):
        if not isinstance(kernel, StepSizeKernel):
            raise ConfigError(
                "sampler",
                f"acceptance tuning needs a sampler with a step_size (e.g. dmala), "
                f"not {type(kernel).__name__}",
            )
        check(0 < target < 1, "tune_accept", f"must be in (0, 1) (got {target})")
        check(rate > 0, "tune_rate", f"must be > 0 (got {rate})")
        check(n_steps >= 0, "burn_in", f"must be >= 0 (got {n_steps})")
        self.kernel, self.target, self.rate, self.n_steps = kernel, target, rate, n_steps
        self.t = 0  # tuning steps taken

    @property
    def done(self) -> bool:
        return self.t >= self.n_steps

    def step(
        self, model: EnergyModel, state: ChainState, generator: torch.Generator
    ) -> tuple[ChainState, StepInfo]:
        state, info = self.kernel.step(model, state, generator)
        if not self.done:
            self.t += 1
            accept = float(info.accept_prob.float().mean())  # one host read per tuning step
            log_a = math.log(self.kernel.step_size)
            log_a += self.rate * self.t**-GAIN_DECAY * (accept - self.target)
            self.kernel.step_size = min(max(math.exp(log_a), STEP_RANGE[0]), STEP_RANGE[1])
        return state, info

    def frozen(self) -> Kernel:
        if not self.done:
            raise RuntimeError(f"acceptance tuning is not done ({self.t} of {self.n_steps} steps)")
        return self.kernel

    def state_dict(self) -> dict:
        return {"t": self.t, "step_size": self.kernel.step_size}

    def load_state_dict(self, d: dict) -> None:
        self.t = int(d["t"])
        self.kernel.step_size = float(d["step_size"])
