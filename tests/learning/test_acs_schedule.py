"""ACS's PCD schedule (Algorithm 6, ebmlab.learning.acs_schedule): parameters handed to the fixed
ACS kernel, the sampler left as configured, the chains run by the chain runner, old checkpoints."""

from __future__ import annotations

import pytest
import torch

from ebmlab.core.chain import ChainRunner
from ebmlab.errors import ConfigError
from ebmlab.learning.acs_schedule import ACSPCDParams, ACSPCDSchedule
from ebmlab.samplers.acs import ACS, ACSKernel
from tests.exactness import frustrated_ising, random_init
from tests.helpers import Counting, from_conf


def acs(**kw) -> ACS:
    """conf/sampler/acs.yaml with ``kw``."""
    return from_conf("sampler/acs", **kw)


def _target():
    # acceptance at beta_max = 0.95 falls from ~0.9 (alpha 0.1) to ~0.3 (alpha >= 3), so both
    # alpha_min and alpha_max exist for rho* = 0.5
    return frustrated_ising(d=32, coupling=0.2, seed=1)


def _schedule(sampler, **kw) -> ACSPCDSchedule:
    args = dict(cycle_length=50, retune_max_every=25, retune_min_every=25, tune_budget=200,
                adaptive_floor=False, explore_steps=0)  # fmt: skip
    args.update(kw)
    sched = ACSPCDSchedule(**args)
    sched.bind(sampler)
    return sched


def test_step_params_and_tune_actions():
    s = acs(tune=False, alpha_max=4.0, alpha_min=0.2, beta_max=0.9)
    sched = _schedule(s, cycle_length=8, retune_max_every=3, retune_min_every=1)
    assert sched.params == ACSPCDParams(4.0, 0.2, 0.9, 0.5, True)
    assert sched.step_params(0) == (4.0, 0.9, False)
    assert sched.step_params(16) == (4.0, 0.9, False)
    assert sched.step_params(1) == (0.2, 0.5, True)
    assert sched.step_params(15) == (0.2, 0.5, True)
    acts = {i: sched.tune_action(i) for i in range(40) if sched.tune_action(i)}
    assert acts == {0: "alpha_max", 1: "alpha_min", 9: "alpha_min", 17: "alpha_min",
                    24: "alpha_max", 25: "alpha_min", 33: "alpha_min"}  # fmt: skip


def test_iterations_run_the_fixed_kernel_of_their_parameters():
    s = acs(tune=False, alpha_max=4.0, alpha_min=0.2, beta_max=0.9)
    sched = _schedule(s, cycle_length=8)
    explore, exploit = sched.kernel(0), sched.kernel(3)
    assert isinstance(explore, ACSKernel) and isinstance(exploit, ACSKernel)
    assert (explore.alpha, explore.beta, explore.mh) == (4.0, 0.9, False)
    assert (exploit.alpha, exploit.beta, exploit.mh) == (0.2, 0.5, True)
    assert sched.kernel(8) is explore and sched.kernel(5) is exploit  # kept while unchanged


def test_retune_changes_the_schedule_not_the_sampler():
    """Algorithm 6's re-tuning goes into the schedule's parameters; the sampler stays as
    configured (the old code wrote alpha_max / alpha_min into it)."""
    model = Counting(_target())
    gen = torch.Generator().manual_seed(0)
    s = acs(tune=False)
    before = s.state_dict()
    sched = _schedule(s, tune_budget=20, adaptive_floor=True)
    state = s.init(model, random_init(model, 64, gen))
    calls = model.calls
    state, used, trace = sched.retune(model, state, gen, "alpha_max")
    assert used == 20 and model.calls - calls == 20 and trace
    floor, ceil = s.tuner.alpha_floor, s.tuner.alpha_ceil
    assert floor <= sched.params.alpha_max <= ceil
    for _ in range(3):
        state, used, _ = sched.retune(model, state, gen, "alpha_min")
        assert floor <= sched.params.alpha_min <= sched.params.alpha_max
    assert len(sched.alpha_min_history) == 3
    assert sched.params.alpha_min == sched.alpha_min_history[-1]
    assert s.state_dict() == before  # nothing written into the sampler
    assert sched.kernel(1).alpha == sched.params.alpha_min


def test_advance_explores_and_exploits_through_the_runner(monkeypatch):
    model = Counting(_target())
    gen = torch.Generator().manual_seed(0)
    s = acs(tune=False)
    sched = _schedule(s, cycle_length=4, retune_max_every=10, retune_min_every=10, tune_budget=10)
    blocks = []
    run = ChainRunner.run
    monkeypatch.setattr(ChainRunner, "run", lambda self, n: blocks.append(n) or run(self, n))
    x = random_init(model, 64, gen)
    x, out = sched.advance(model, x, gen, iteration=0, n_steps=6)  # re-tunes alpha_max
    assert out["phase"] == 2.0 and out["n_log_prob"] == 1 + 10 and blocks == []
    calls = model.calls
    x, out = sched.advance(model, x, gen, iteration=4, n_steps=6)  # explores: 6 // 2 steps
    assert out["phase"] == 1.0 and float(out["accept_rate"]) == 1.0 and out["jump"] > 0
    assert out["n_log_prob"] == 1 + 3 and model.calls - calls == 1 + 3
    x, out = sched.advance(model, x, gen, iteration=5, n_steps=6)  # exploits with MH
    assert out["phase"] == 0.0 and out["n_log_prob"] == 1 + 6 and float(out["accept_rate"]) < 1
    assert blocks == [3, 6]  # each iteration's steps are one block of the runner


def test_checkpoint_keeps_the_parameters_and_loads_old_ones():
    s = acs(tune=False, alpha_max=4.0, alpha_min=0.2)
    sched = _schedule(s)
    sched.params = ACSPCDParams(2.5, 0.7, 0.95, 0.5, True)
    sched.alpha_min_history = [0.6, 0.7]
    fresh = _schedule(acs(tune=False, alpha_max=4.0, alpha_min=0.2))
    fresh.load_state_dict(sched.state_dict())
    assert fresh.params == sched.params and fresh.alpha_min_history == [0.6, 0.7]
    # a checkpoint of the old code: the schedule kept only the history, the tuned alpha_max /
    # alpha_min lived in the sampler's state (ACS.state_dict at commit 4bfdce4)
    old_sampler = {"alpha_max": 3.25, "alpha_min": 0.45, "alpha_schedule": [3.25] * 20,
                   "beta_schedule": [0.95] * 20, "step_count": 0, "tuned": True}  # fmt: skip
    old = _schedule(acs(tune=False, alpha_max=4.0, alpha_min=0.2))
    old.load_state_dict({"alpha_min_history": [0.45]}, old_sampler)
    assert (old.params.alpha_max, old.params.alpha_min) == (3.25, 0.45)
    assert old.alpha_min_history == [0.45]


@pytest.mark.parametrize(
    "kw,key",
    [
        (dict(cycle_length=1), "cycle_length"),
        (dict(retune_max_every=0), "retune_max_every"),
        (dict(retune_min_every=0), "retune_min_every"),
        (dict(explore_steps=-1), "explore_steps"),
        (dict(tune_budget=2), "learner.acs.tune_budget"),  # < sampler.alpha_candidates
    ],
)
def test_bad_schedule_settings(kw, key):
    with pytest.raises(ConfigError) as e:
        _schedule(acs(tune=False), **kw)
    assert e.value.key == key and "got" in e.value.message


def test_schedule_needs_a_sampler_that_declares_it():
    from ebmlab.samplers.dlp import DMALA

    with pytest.raises(ConfigError, match="needs sampler=acs"):
        _schedule(DMALA(0.2, None))
