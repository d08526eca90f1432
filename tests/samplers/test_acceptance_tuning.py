"""Burn-in tuning of a step size towards a target acceptance (the AB paper's LB baseline)."""

from __future__ import annotations

import math

import pytest
import torch

from ebmlab.core.protocols import Adaptation
from ebmlab.core.state import ChainState, StepInfo
from ebmlab.errors import ConfigError
from ebmlab.samplers.acceptance_tuning import AcceptanceTuning, step_size_range
from tests.helpers import from_conf


class FixedAcceptance:
    """A stand-in kernel whose every step reports acceptance ``accept`` (it does not move)."""

    state_spaces, exact = ("binary",), True

    def __init__(self, step_size: float, accept: float):
        self.step_size, self.accept = step_size, accept

    def init(self, model, x):
        return ChainState(x=x, log_prob=torch.zeros(x.shape[0]))

    def step(self, model, state, generator):
        a = torch.full((state.x.shape[0],), self.accept)
        info = StepInfo(a, a > 0, torch.zeros_like(a), n_log_prob=1, n_grad=1)
        return state, info

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, d: dict) -> None:
        pass


def _steps(tuning, n, gen):
    state = tuning.kernel.init(None, torch.zeros(4, 3))
    for _ in range(n):
        state, _ = tuning.step(None, state, gen)


def test_step_size_moves_towards_the_target_by_robbins_monro(gen):
    kernel = FixedAcceptance(1.0, accept=0.9)
    tuning = AcceptanceTuning(kernel, 0.574, 1.0, 3, "step_size", step_size_range)
    assert isinstance(tuning, Adaptation) and not tuning.done
    _steps(tuning, 1, gen)  # accepting too much -> bigger steps: log a += 1^-0.6 (0.9 - 0.574)
    assert kernel.step_size == pytest.approx(math.exp(0.9 - 0.574))
    big = kernel.step_size
    kernel.accept = 0.1  # accepting too little -> smaller steps
    _steps(tuning, 1, gen)
    assert kernel.step_size == pytest.approx(big * math.exp(2**-0.6 * (0.1 - 0.574)))
    with pytest.raises(RuntimeError, match="not done"):
        tuning.frozen()
    _steps(tuning, 1, gen)
    assert tuning.done and tuning.frozen() is kernel
    tuned = kernel.step_size
    _steps(tuning, 5, gen)  # after the budget the step size is fixed
    assert kernel.step_size == tuned


def test_state_round_trip(gen):
    kernel = FixedAcceptance(0.5, accept=0.2)
    tuning = AcceptanceTuning(kernel, 0.574, 1.0, 10, "step_size", step_size_range)
    _steps(tuning, 4, gen)
    other = AcceptanceTuning(
        FixedAcceptance(0.5, 0.2), 0.574, 1.0, 10, "step_size", step_size_range
    )
    other.load_state_dict(tuning.state_dict())
    assert other.t == 4 and other.kernel.step_size == kernel.step_size


def test_needs_a_kernel_with_a_step_size_and_a_valid_target():
    with pytest.raises(ConfigError, match="step_size"):
        AcceptanceTuning(from_conf("sampler/gibbs"), 0.574, 1.0, 10, "step_size", step_size_range)
    dmala = from_conf("sampler/dmala")
    AcceptanceTuning(dmala, 0.574, 1.0, 10, "step_size", step_size_range)
    with pytest.raises(ConfigError, match="tune_accept"):
        AcceptanceTuning(dmala, 1.5, 1.0, 10, "step_size", step_size_range)
