"""The GRBM benchmark times the Fig. 1 settings' samplers, and its "no test" sampler stays
without the test however long the benchmark runs."""

import pytest
import torch

from benchmarks import bench_grbm

pytestmark = pytest.mark.usefixtures("one_thread")


def test_samplers_are_the_fig1_settings():
    s = bench_grbm.samplers()
    for name, setting in [
        ("Langevin, adjusted", "langevin_w_adjust"),
        ("Gibbs-Langevin, no test", "gibbs_langevin_wo_adjust"),
        ("Gibbs-Langevin, adjusted", "gibbs_langevin_w_adjust"),
    ]:
        assert s[name].step_size == bench_grbm.setting(setting)["step_size"]
    assert s["Gibbs-Langevin, adjusted"].adjust_step == 0


def test_no_test_sampler_never_rejects_past_the_runs_chain_length():
    m = bench_grbm.model(2, 8)
    s = bench_grbm.samplers()["Gibbs-Langevin, no test"]
    g = torch.Generator().manual_seed(0)
    state = s.init(m, torch.randn(20, 2, generator=g))
    for _ in range(bench_grbm.setting("gibbs_langevin_wo_adjust")["adjust_step"] + 5):
        state, info = s.step(m, state, g)
    assert bool(info.accepted.all()) and state.extra["energy"] is None  # no test was applied
