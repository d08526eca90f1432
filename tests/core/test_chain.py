"""ChainRunner: the one place that advances chains (issue 44)."""

from __future__ import annotations

import io

import pytest
import torch

from ebmlab.core.chain import ChainRunner
from ebmlab.core.protocols import Adaptation, Kernel, PlannedAdaptation
from ebmlab.core.state import ChainState, StepInfo


class Walk:
    """x += scale * N(0, 1), log_prob = -|x|^2 / 2: a fixed-parameter kernel."""

    state_spaces, exact = ("continuous",), False

    def __init__(self, scale: float):
        self.scale = scale

    def init(self, model, x):
        return ChainState(x=x, log_prob=-(x**2).sum(-1) / 2)

    def step(self, model, state, generator):
        noise = torch.randn(state.x.shape, generator=generator, device=state.x.device)
        x = state.x + self.scale * noise
        ones = torch.ones(x.shape[0])
        info = StepInfo(ones * 0.5, ones.bool(), noise.abs().sum(-1), n_log_prob=1, n_grad=0)
        return self.init(model, x), info

    def state_dict(self):
        return {"scale": self.scale}

    def load_state_dict(self, d):
        self.scale = float(d["scale"])


class Doubling:
    """Adaptation: walks, doubling the scale each step, for ``n`` steps; counts freezes."""

    def __init__(self, n: int):
        self.kernel, self.n, self.t, self.freezes = Walk(0.25), n, 0, 0

    def step(self, model, state, generator):
        state, info = self.kernel.step(model, state, generator)
        self.t += 1
        self.kernel.scale *= 2
        return state, info

    @property
    def done(self):
        return self.t >= self.n

    def frozen(self):
        assert self.done
        self.freezes += 1
        return Walk(self.kernel.scale)

    def state_dict(self):
        return {"t": self.t, "scale": self.kernel.scale}

    def load_state_dict(self, d):
        self.t, self.kernel.scale = int(d["t"]), float(d["scale"])


class Planned(Doubling):
    def __init__(self):
        super().__init__(0)

    def plan(self, run_steps):
        self.n = run_steps // 10


def _runner(sampler, seed=0, run_steps=None):
    g = torch.Generator().manual_seed(seed)
    x = torch.zeros(4, 3)
    return ChainRunner(None, sampler, Walk(1.0).init(None, x), g, run_steps)


def test_protocols_tell_kernels_from_adaptations():
    assert isinstance(Walk(1.0), Kernel) and not isinstance(Walk(1.0), Adaptation)
    assert isinstance(Doubling(3), Adaptation) and not isinstance(Doubling(3), PlannedAdaptation)
    assert isinstance(Planned(), PlannedAdaptation)


def test_a_kernel_steps_and_counts():
    r = _runner(Walk(1.0))
    assert not r.adapting and isinstance(r.kernel, Walk)
    ref = torch.Generator().manual_seed(0)
    expect = torch.randn(4, 3, generator=ref) + torch.randn(4, 3, generator=ref)
    r.step(), r.step()
    assert r.steps == 2 and torch.equal(r.state.x, expect)


def test_adaptation_freezes_exactly_once_then_steps_the_frozen_kernel():
    a = Doubling(3)
    r = _runner(a)
    assert r.adapting and r.kernel is a
    for i in range(3):
        assert r.adapting, i
        r.step()
    assert not r.adapting and a.freezes == 1 and r.kernel.scale == 0.25 * 8
    r.run(5)
    assert a.freezes == 1 and a.t == 3 and r.steps == 8  # the adaptation stepped no more


def test_done_from_the_start_is_frozen_at_construction():
    a = Doubling(0)
    r = _runner(a)
    assert not r.adapting and a.freezes == 1 and r.warm_up() == 0


def test_warm_up_runs_the_adaptation_to_its_end():
    r = _runner(Doubling(4))
    assert r.warm_up() == 4 and r.steps == 4 and not r.adapting and r.warm_up() == 0


def test_a_planned_adaptation_gets_the_run_length_before_any_step():
    a = Planned()
    r = _runner(a, run_steps=50)
    assert a.n == 5 and r.warm_up() == 5
    unplanned = Planned()
    _runner(unplanned)  # no run length: nothing to plan with (ACS tune=false needs none)
    assert unplanned.n == 0 and unplanned.freezes == 1


def test_run_sums_the_steps_scalars_without_reading_them_back():
    r, ref = _runner(Walk(1.0)), _runner(Walk(1.0))
    sums = r.run(6)
    jumps = [float(ref.step().jump.float().mean()) for _ in range(6)]
    assert sums["steps"] == 6 and sums["n_log_prob"] == 6 and sums["n_grad"] == 0
    assert isinstance(sums["jump"], torch.Tensor) and sums["jump"].dtype == torch.float64
    assert float(sums["jump"]) == pytest.approx(sum(jumps), rel=1e-12)
    assert float(sums["accept_rate"]) == 3.0
    assert torch.equal(r.state.x, ref.state.x)


def _round_trip(runner: ChainRunner) -> dict:
    buf = io.BytesIO()
    torch.save({"runner": runner.state_dict(), "rng": runner.generator.get_state()}, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


@pytest.mark.parametrize("stop_at", [2, 5, 9])  # mid-warm-up, at its end, after it
def test_state_dict_round_trip_continues_the_same_chain(stop_at):
    straight = _runner(Doubling(5))
    straight.run(12)
    first = _runner(Doubling(5))
    first.run(stop_at)
    d = _round_trip(first)
    a = Doubling(5)
    resumed = _runner(a, seed=123)  # a fresh process: other draws, restored below
    resumed.load_state_dict(d["runner"])
    resumed.generator.set_state(d["rng"])
    assert resumed.steps == stop_at and resumed.adapting == (stop_at < 5)
    resumed.run(12 - stop_at)
    assert torch.equal(resumed.state.x, straight.state.x)
    assert resumed.kernel.scale == straight.kernel.scale and resumed.steps == 12
    assert a.t == 5 and a.freezes == 1  # warm-up done before the checkpoint is not re-run


def test_the_generator_must_live_on_the_chains_device():
    g = torch.Generator(device="cpu")
    x = torch.zeros(2, 3, device="meta")
    with pytest.raises(ValueError, match="generator"):
        ChainRunner(None, Walk(1.0), ChainState(x=x, log_prob=None), g)
