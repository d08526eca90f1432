"""AB with Algorithm 1 as written (conf/sampler/ab_*_alg1.yaml): W from the whole burn-in and
(sigma, alpha) adapting for the whole run, where ebmlab's default fits W on the first quarter
of burn-in and freezes after it."""

from __future__ import annotations

import pytest
import torch

from ebmlab.errors import ConfigError
from ebmlab.samplers.ab.adapt import AB1stAlg1, ABQuadraticAlg1, Phase
from ebmlab.samplers.ab.kernel import ABQuadraticKernel
from tests.exactness import frustrated_ising, random_init
from tests.helpers import from_conf

BURN_IN, N_PROBE = 60, 5  # a cycle is 2 blocks x 3 probes x 5 steps = 30 steps


def run(sampler, model, n_steps: int, seed: int = 0) -> list[tuple[float, float]]:
    """(sigma, alpha) after each of ``n_steps`` steps."""
    gen = torch.Generator().manual_seed(seed)
    state = sampler.init(model, random_init(model, 64, gen))
    params = []
    for _ in range(n_steps):
        state, _ = sampler.step(model, state, gen)
        params.append((sampler.sigma, sampler.alpha))
    return params


@pytest.mark.parametrize("name", ["ab_1st", "ab_shift"])
def test_alg1_keeps_adapting_where_the_default_freezes(name):
    model = frustrated_ising(d=8)
    kw = {"burn_in": BURN_IN, "n_probe": N_PROBE}
    default = from_conf(f"sampler/{name}", **kw)
    alg1 = from_conf(f"sampler/{name}_alg1", **kw)
    p_default, p_alg1 = run(default, model, 4 * BURN_IN), run(alg1, model, 4 * BURN_IN)
    after = slice(BURN_IN, None)
    assert default.done and default.phase is Phase.FROZEN
    assert len(set(p_default[after])) == 1  # frozen: one (sigma, alpha) after burn-in
    assert not alg1.done and alg1.adapting and alg1.phase is Phase.ADAPT
    assert len(set(p_alg1[after])) > 1  # still moving after burn-in
    with pytest.raises(RuntimeError, match="not done"):
        alg1.frozen()


def test_alg1_fits_w_on_the_whole_burn_in():
    model = frustrated_ising(d=8)
    kw = {"burn_in": BURN_IN, "n_probe": N_PROBE}
    default, alg1 = from_conf("sampler/ab_shift", **kw), from_conf("sampler/ab_shift_alg1", **kw)
    assert default.w.w_steps == round(0.25 * BURN_IN) and alg1.w.w_steps == BURN_IN
    gen = torch.Generator().manual_seed(1)
    state = alg1.init(model, random_init(model, 64, gen))
    for _ in range(BURN_IN - 1):
        state, _ = alg1.step(model, state, gen)
    assert alg1.w.trick is None and alg1.phase is Phase.COLLECT  # still collecting pairs
    state, _ = alg1.step(model, state, gen)
    assert alg1.phase is Phase.ADAPT and isinstance(alg1.kernel, ABQuadraticKernel)
    assert alg1.setup_stats["n_pairs"] == alg1.w.n_pairs > 0
    # pairs from all BURN_IN steps: more than the default's first quarter collects
    state = default.init(model, random_init(model, 64, gen))
    for _ in range(BURN_IN):
        state, _ = default.step(model, state, gen)
    assert alg1.w.n_pairs > 2 * default.setup_stats["n_pairs"]


def test_alg1_state_dict_resumes_the_adaptation():
    model = frustrated_ising(d=8)
    kw = {"burn_in": BURN_IN, "n_probe": N_PROBE}
    a = from_conf("sampler/ab_shift_alg1", **kw)
    gen = torch.Generator().manual_seed(2)
    state = a.init(model, random_init(model, 16, gen))
    for _ in range(BURN_IN + 7):
        state, _ = a.step(model, state, gen)
    b = from_conf("sampler/ab_shift_alg1", **kw)
    b.load_state_dict(a.state_dict())
    g_a, g_b = gen, torch.Generator().manual_seed(0)
    g_b.set_state(g_a.get_state())
    s_a = s_b = state
    for _ in range(40):
        s_a, _ = a.step(model, s_a, g_a)
        s_b, _ = b.step(model, s_b, g_b)
    assert torch.equal(s_a.x, s_b.x) and (a.sigma, a.alpha) == (b.sigma, b.alpha)
    assert not b.done


@pytest.mark.parametrize(
    "cls,kw,key",
    [
        (ABQuadraticAlg1, {"w_fraction": 0.25}, "w_fraction"),
        (ABQuadraticAlg1, {"adapt": False}, "adapt"),
        (AB1stAlg1, {"adapt": False}, "adapt"),
    ],
)
def test_alg1_settings_that_are_not_algorithm_1_are_config_errors(cls, kw, key):
    name = "ab_shift_alg1" if cls is ABQuadraticAlg1 else "ab_1st_alg1"
    with pytest.raises(ConfigError, match=key):
        from_conf(f"sampler/{name}", **kw)


def test_alg1_configs_differ_from_the_defaults_only_where_algorithm_1_does():
    from omegaconf import OmegaConf

    from tests.helpers import REPO

    for name in ("ab_1st", "ab_shift", "ab_max", "ab_trace"):
        base = OmegaConf.to_container(OmegaConf.load(REPO / f"conf/sampler/{name}.yaml"))
        alg1 = OmegaConf.to_container(OmegaConf.load(REPO / f"conf/sampler/{name}_alg1.yaml"))
        diff = {k for k in base.keys() | alg1.keys() if base.get(k) != alg1.get(k)}
        want = {"_target_"} if name == "ab_1st" else {"_target_", "w_fraction"}
        assert diff == want, name
        assert alg1["_target_"].endswith("Alg1")
