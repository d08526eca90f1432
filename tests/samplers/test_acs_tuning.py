"""ACS's Algorithm 2 as an Adaptation run by the chain runner (issue 44): one proposal per
step, resumable mid-way with the same chain and schedule, frozen once into the cyclical
kernel with the tuned schedule."""

from __future__ import annotations

import io

import pytest
import torch

from ebmlab.core.chain import ChainRunner
from ebmlab.core.protocols import Adaptation, PlannedAdaptation
from ebmlab.samplers.acs import ACS, CyclicalKernel
from tests.exactness import frustrated_ising, random_init
from tests.helpers import from_conf

SETTINGS = dict(
    steps_per_cycle=5, alpha_ceil=5.0, burnin_steps=6, burnin_mh_steps=10, beta_candidates=4,
    alpha_candidates=3, tune_budget=60,
)  # fmt: skip


def _runner(seed: int = 0) -> tuple[ChainRunner, ACS]:
    model = frustrated_ising(d=12, coupling=0.2, seed=1)
    gen = torch.Generator().manual_seed(seed)
    s = from_conf("sampler/acs", **SETTINGS)
    x = random_init(model, 16, torch.Generator().manual_seed(0))
    return ChainRunner(model, s, s.init(model, x), gen, run_steps=500), s


def test_acs_is_a_planned_adaptation_frozen_into_its_cyclical_kernel():
    r, s = _runner()
    assert isinstance(s, PlannedAdaptation) and isinstance(s, Adaptation) and r.adapting
    n = r.warm_up()
    res = s.result()
    assert n == res.n_steps == r.steps and 0 < n <= res.budget == 60
    k = r.kernel
    assert type(k) is CyclicalKernel and k.cycle_position == 0
    assert (k.alpha_max, k.alpha_min, k.beta_sched) == (
        res.alpha_max,
        res.alpha_min,
        res.beta_schedule,
    )
    assert k.alpha_sched == res.alpha_schedule
    r.run(7)
    assert r.steps == n + 7 and k.step_count == 7 and s.step_count == 0  # the frozen kernel runs


def test_untuned_acs_is_frozen_before_any_step():
    model = frustrated_ising(d=12, coupling=0.2, seed=1)
    s = from_conf("sampler/acs", tune=False, steps_per_cycle=4, alpha_max=3.0, alpha_min=0.3)
    x = random_init(model, 4, torch.Generator().manual_seed(0))
    r = ChainRunner(model, s, s.init(model, x), torch.Generator(), run_steps=10)
    assert not r.adapting and r.warm_up() == 0 and type(r.kernel) is CyclicalKernel
    assert r.kernel.alpha_sched == s.alpha_sched and r.kernel.beta_sched == s.beta_sched


def _checkpoint(r: ChainRunner) -> dict:
    buf = io.BytesIO()
    torch.save({"runner": r.state_dict(), "rng": r.generator.get_state()}, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def test_resume_at_every_point_of_the_tuning_gives_the_uninterrupted_run():
    ref, ref_s = _runner()
    n = ref.warm_up()
    ref.run(10)
    phases = set()
    for stop in sorted({*range(1, n, 3), n - 1, n, n + 1}):  # burn-ins, search rounds, the end
        first, s = _runner()
        first.run(stop)
        phases.add(s.tuning.phase)
        d = _checkpoint(first)
        resumed, s2 = _runner(seed=99)
        resumed.load_state_dict(d["runner"])
        resumed.generator.set_state(d["rng"])
        assert resumed.steps == stop and resumed.adapting == (stop < n)
        resumed.run(n + 10 - stop)
        assert torch.equal(resumed.state.x, ref.state.x), stop
        assert torch.equal(resumed.state.log_prob, ref.state.log_prob), stop
        assert resumed.kernel.beta_sched == ref.kernel.beta_sched, stop
        assert (resumed.kernel.alpha_max, resumed.kernel.alpha_min) == (
            ref.kernel.alpha_max,
            ref.kernel.alpha_min,
        )
        # the resumed tuning took only the steps left; none once it was done
        assert s2.tuning.used == (n if stop < n else 0)
    assert {"burnin", "burnin_mh", "alpha_min", "alpha_max", "beta", "done"} <= phases


def test_a_checkpoint_of_another_budget_is_refused():
    first, _ = _runner()
    first.run(3)
    d = _checkpoint(first)
    model = frustrated_ising(d=12, coupling=0.2, seed=1)
    s = from_conf("sampler/acs", **{**SETTINGS, "tune_budget": 80})
    x = random_init(model, 16, torch.Generator().manual_seed(0))
    r = ChainRunner(model, s, s.init(model, x), torch.Generator(), run_steps=500)
    with pytest.raises(Exception, match="budget"):
        r.load_state_dict(d["runner"])
