"""Warm-up tuning of one scale of a kernel towards a target acceptance rate.

The AB paper's "LB" baseline (Sec. 5.1) is DLP with its step size tuned so that the average
acceptance is 0.574 (Sun et al. 2022b); its RWM baseline has its radius tuned to 0.234
(Roberts & Rosenthal 2001). :class:`AcceptanceTuning` runs the kernel for ``n_steps``
warm-up steps, after each one moving the scale a (``step_size``, ``radius``) by
Robbins-Monro on its logarithm,

    log a <- log a + rate * t^-0.6 * (mean acceptance of step t - target),

clipped to the kernel's range for it ([1e-6, 1e6] for a step size); then it freezes and
:meth:`AcceptanceTuning.frozen` returns the kernel, an ordinary exact kernel with the tuned
scale.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from ebmlab.core.protocols import EnergyModel, Kernel
from ebmlab.core.state import ChainState, StepInfo
from ebmlab.errors import ConfigError, check

GAIN_DECAY = 0.6  # Robbins-Monro gain t^-0.6
STEP_RANGE = (1e-6, 1e6)


@runtime_checkable
class StepSizeKernel(Kernel, Protocol):
    """A kernel with a scalar step size (DMALA's ``step_size``)."""

    step_size: float


def step_size_range(model: EnergyModel, state: ChainState) -> tuple[float, float]:
    return STEP_RANGE


class AcceptanceTuning:
    """An :class:`~ebmlab.core.protocols.Adaptation`: tune ``kernel``'s scale ``param`` for
    ``n_steps`` steps towards acceptance ``target`` (in (0, 1)) with gain ``rate``, clipped to
    ``bounds(model, state)``. ``param="step_size"`` needs a :class:`StepSizeKernel`."""

    def __init__(
        self,
        kernel: Kernel,
        target: float,
        rate: float,
        n_steps: int,
        param: str,
        bounds: Callable[[EnergyModel, ChainState], tuple[float, float]],
    ):
        if param == "step_size" and not isinstance(kernel, StepSizeKernel):
            raise ConfigError(
                "sampler",
                f"acceptance tuning needs a sampler with a step_size (e.g. dmala), "
                f"not {type(kernel).__name__}",
            )
        check(0 < target < 1, "tune_accept", f"must be in (0, 1) (got {target})")
        check(rate > 0, "tune_rate", f"must be > 0 (got {rate})")
        check(n_steps >= 0, "burn_in", f"must be >= 0 (got {n_steps})")
        self.kernel, self.target, self.rate, self.n_steps = kernel, target, rate, n_steps
        self.param, self.bounds = param, bounds
        self.t = 0  # tuning steps taken

    def set_warmup(self, n_steps: int) -> None:
        """Tune for ``n_steps`` steps instead (a task's declared warm-up), before any step."""
        if self.t:
            raise RuntimeError(f"the warm-up is set before the first step ({self.t} taken)")
        self.n_steps = int(n_steps)

    @property
    def done(self) -> bool:
        return self.t >= self.n_steps

    def init(self, model: EnergyModel, x: Tensor) -> ChainState:
        return self.kernel.init(model, x)

    def init_cost(self) -> tuple[int, int]:
        return self.kernel.init_cost()

    def step(
        self, model: EnergyModel, state: ChainState, generator: torch.Generator
    ) -> tuple[ChainState, StepInfo]:
        new, info = self.kernel.step(model, state, generator)
        if not self.done:
            self.t += 1
            accept = float(info.accept_prob.float().mean())  # one host read per tuning step
            log_a = math.log(getattr(self.kernel, self.param))
            log_a += self.rate * self.t**-GAIN_DECAY * (accept - self.target)
            lo, hi = self.bounds(model, state)
            setattr(self.kernel, self.param, min(max(math.exp(log_a), lo), hi))
        return new, info

    def frozen(self) -> Kernel:
        if not self.done:
            raise RuntimeError(f"acceptance tuning is not done ({self.t} of {self.n_steps} steps)")
        return self.kernel

    def state_dict(self) -> dict:
        return {"t": self.t, self.param: getattr(self.kernel, self.param)}

    def load_state_dict(self, d: dict) -> None:
        self.t = int(d["t"])
        setattr(self.kernel, self.param, float(d[self.param]))
