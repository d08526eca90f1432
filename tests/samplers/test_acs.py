"""Automatic Cyclical Sampler: schedules, kernel exactness, tuning, costs, config. (ACS's PCD
schedule, Algorithm 6, is tested in tests/learning/test_acs_schedule.py.)"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from ebmlab.core.chain import ChainRunner
from ebmlab.errors import ConfigError
from ebmlab.models.base import EnergyModel
from ebmlab.samplers import proposals
from ebmlab.samplers.acs import (
    ACS,
    ACSKernel,
    alpha_schedule,
    cosine_beta_schedule,
    cyclical_value,
    kernel_step,
    log_proposal,
)
from ebmlab.samplers.base import value_and_grad
from ebmlab.samplers.proposals import Langevin
from ebmlab.samplers.spaces import StateSpace
from tests.exactness import (
    assert_exact,
    exact_probs,
    frustrated_ising,
    kernel_stationary,
    kernel_tv,
    ordinal_target,
    random_init,
    rows_sum_to_one,
    run_chains,
    sample_tv,
    strong_rbm,
    transition_matrix,
    tv_distance,
    tv_noise_floor,
)
from tests.helpers import Counting, from_conf

REPO = Path(__file__).resolve().parents[2]


def acs(**kw) -> ACS:
    """conf/sampler/acs.yaml with ``kw``."""
    return from_conf("sampler/acs", **kw)


def _fixed(**kw) -> ACS:
    """An untuned ACS with a short cycle (schedule from Eq. 8 and the cosine beta)."""
    args = dict(steps_per_cycle=4, alpha_max=3.0, alpha_min=0.3, beta_max=0.9, tune=False)
    args.update(kw)
    return acs(**args)


def kern(alpha: float, beta: float, mh: bool = True) -> ACSKernel:
    return ACSKernel(alpha, beta, mh, "auto")


BINARY = StateSpace("binary", 2)


# ---------------------------------------------------------------------------
# schedules


def test_alpha_schedule_matches_eq8():
    a = alpha_schedule(10.0, 0.5, 20)
    assert len(a) == 20
    assert a[0] == pytest.approx(10.0)
    assert a[5] == pytest.approx(10.0 * (math.cos(math.pi / 4) + 1) / 2)  # 8.5355
    assert a[10] == pytest.approx(5.0)
    assert a[15] == pytest.approx(10.0 * (math.cos(3 * math.pi / 4) + 1) / 2)  # 1.4645
    assert a[19] == pytest.approx(0.5)  # 0.0616 clamped to alpha_min
    assert cyclical_value(25, 20, 10.0, 0.5) == pytest.approx(a[5])  # k taken mod s
    assert all(x >= y for x, y in zip(a, a[1:]))
    b = cosine_beta_schedule(0.9, 0.5, 4)
    assert b[0] == pytest.approx(0.9) and b[2] == pytest.approx(0.5)  # 0.45 clamped


def test_step_follows_schedule_and_cycles():
    model = strong_rbm()
    s = _fixed(steps_per_cycle=5)
    gen = torch.Generator().manual_seed(0)
    state = s.init(model, random_init(model, 3, gen))
    seen = []
    for _ in range(12):
        seen.append(s.current_params())
        state, _ = s.step(model, state, gen)
    assert seen[:5] == list(zip(s.alpha_sched, s.beta_sched))
    assert seen[5:10] == seen[:5] and seen[10] == seen[0]
    assert s.cycle_position == 2


def test_beta_half_is_dmala_flip_probability():
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 2, (4, 7), generator=g).float()
    grad = torch.randn(4, 7, generator=g)
    dmala = torch.sigmoid(grad * (1 - 2 * x) / 2 - 1 / (2 * 0.2))
    logits = proposals.logits(BINARY, x, grad, Langevin(0.5, step=0.2))
    assert torch.allclose(torch.sigmoid(logits), dmala)


# ---------------------------------------------------------------------------
# exactness of each kernel and of the cycle


@pytest.mark.parametrize("alpha,beta", [(0.2, 0.5), (1.5, 0.75), (60.0, 0.95)])
def test_each_binary_kernel_exact(alpha, beta):
    model = strong_rbm()
    assert kernel_tv(kern(alpha, beta), model) < 1e-9
    # the same proposal without MH is biased: the check has power
    assert kernel_tv(kern(alpha, beta, mh=False), model) > 0.02


def test_binary_kernel_exact_frustrated_ising():
    assert kernel_tv(kern(2.0, 0.8), frustrated_ising()) < 1e-9


def test_each_ordinal_kernel_exact():
    # more (alpha, beta) pairs are covered by the ordinal cycle test below
    alpha, beta = 3.0, 0.9
    model = ordinal_target()
    P = transition_matrix(kern(alpha, beta), model, chunk=625)
    assert rows_sum_to_one(P)
    assert tv_distance(kernel_stationary(P), exact_probs(model)) < 1e-9
    assert kernel_tv(kern(alpha, beta, mh=False), model) > 0.02


@pytest.mark.parametrize("make", [strong_rbm, ordinal_target])
def test_full_cycle_composition_exact(make):
    model = make()
    s = _fixed(steps_per_cycle=4, alpha_max=4.0, alpha_min=0.4)
    mats = [transition_matrix(k, model, chunk=625) for k in s.kernels()]
    assert len(mats) == 4 and len({(k.alpha, k.beta) for k in s.kernels()}) >= 3
    cycle = mats[0]
    for P in mats[1:]:
        cycle = cycle @ P
    p = exact_probs(model)
    assert tv_distance(p @ cycle, p) < 1e-9  # pi P_1 ... P_s = pi
    assert tv_distance(kernel_stationary(cycle), p) < 1e-9


def test_acs_step_monte_carlo_binary():
    # final states of 20000 chains after 15 cycles of 4 steps from uniform starts
    assert_exact(_fixed(), strong_rbm(), n_chains=8000, n_steps=32, seed=0)


def test_acs_step_monte_carlo_ordinal():
    assert_exact(_fixed(alpha_max=2.0), ordinal_target(), n_chains=8000, n_steps=32, seed=1)


def test_acs_step_monte_carlo_detects_unadjusted_bias():
    tv, floor = sample_tv(_fixed(mh=False, alpha_max=60.0), strong_rbm(), 4000, 16, seed=0)
    assert tv > 2 * floor


class OneHotPotts(EnergyModel):
    """log p(x) = sum_i h_i . x_i + sum_{i<j} x_i^T W_ij x_j on one-hot x [batch, d, S]."""

    state_kind = "categorical"

    def __init__(self, d=3, S=3, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.dim, self.n_states = d, S
        self.h = torch.randn(d, S, generator=g, dtype=torch.float64)
        W = torch.randn(d, d, S, S, generator=g, dtype=torch.float64)
        self.W = torch.triu(torch.ones(d, d, dtype=torch.float64), 1)[:, :, None, None] * W

    def log_prob(self, x):
        x = x.double()
        pair = torch.einsum("bis,ijst,bjt->b", x, self.W, x)
        return (x * self.h).sum((1, 2)) + pair


def _potts_states(model):
    S, d = model.n_states, model.dim
    idx = torch.tensor(list(itertools.product(range(S), repeat=d)))
    return torch.nn.functional.one_hot(idx, S).double(), idx


def test_categorical_kernel_exact():
    model = OneHotPotts()
    X, _ = _potts_states(model)
    n = X.shape[0]
    lp, g = value_and_grad(model, X)
    xs, gs, ys = X.repeat_interleave(n, 0), g.repeat_interleave(n, 0), X.repeat(n, 1, 1)
    space = StateSpace("categorical", model.n_states)
    Q = log_proposal(space, xs, gs, ys, 1.0, 0.8).reshape(n, n).exp()
    assert torch.allclose(Q.sum(1), torch.ones(n, dtype=Q.dtype))
    P = torch.minimum(Q, torch.exp(lp[None, :] - lp[:, None]) * Q.T)
    P.fill_diagonal_(0.0)
    P = P + torch.diag(1 - P.sum(1))
    p = torch.softmax(lp, 0)
    assert tv_distance(kernel_stationary(P), p) < 1e-9


def test_categorical_step_monte_carlo():
    model = OneHotPotts()
    _, idx_all = _potts_states(model)
    gen = torch.Generator().manual_seed(3)
    n = 8000
    x0 = torch.nn.functional.one_hot(torch.randint(0, 3, (n, 3), generator=gen), 3).double()
    s = _fixed(alpha_max=2.0)
    state = s.init(model, x0)
    for _ in range(48):  # moves are rare at small step sizes: mixing needs ~32 steps
        state, info = s.step(model, state, gen)
    assert state.x.sum(-1).eq(1).all()
    code = (state.x.argmax(-1) * torch.tensor([9, 3, 1])).sum(-1)
    emp = torch.bincount(code, minlength=27).double() / n
    p = torch.softmax(model.log_prob(_potts_states(model)[0]), 0)
    assert tv_distance(emp, p) <= tv_noise_floor(p, n)


# ---------------------------------------------------------------------------
# cost: same as DMALA (one forward + one backward per step)


def test_step_costs_one_forward_one_backward():
    model = Counting(strong_rbm())
    s = _fixed()
    gen = torch.Generator().manual_seed(0)
    state = s.init(model, random_init(model, 16, gen))
    assert model.calls == 1 and s.init_cost() == (1, 1)
    for _ in range(9):
        state, info = s.step(model, state, gen)
        assert (info.n_log_prob, info.n_grad) == (1, 1)
    assert model.calls == 1 + 9
    stats = {}
    run_chains(s, model, random_init(model, 16, gen), 7, gen, stats=stats)
    assert (stats["n_log_prob"], stats["n_grad"]) == (8, 8)


def test_rejected_chains_keep_cached_state():
    model = strong_rbm()
    gen = torch.Generator().manual_seed(0)
    k = kern(60.0, 0.95)
    state = k.init(model, random_init(model, 500, gen))
    new, info = kernel_step(model, state, gen, 60.0, 0.95, True, BINARY)
    lp, g = value_and_grad(model, new.x)
    assert torch.allclose(new.log_prob, lp) and torch.allclose(new.grad, g)
    rej = ~info.accepted
    assert rej.any() and torch.equal(new.x[rej], state.x[rej])
    assert torch.equal(info.jump[rej], torch.zeros_like(info.jump[rej]))


# ---------------------------------------------------------------------------
# automatic tuning (Algorithm 2)


def _tune_target():
    # acceptance at beta_max = 0.95 falls from ~0.9 (alpha 0.1) to ~0.3 (alpha >= 3), so both
    # alpha_min and alpha_max exist for rho* = 0.5 (on RBMs beta 0.95 accepts > 0.6 at any alpha)
    return frustrated_ising(d=32, coupling=0.2, seed=1)


def tune(s: ACS, model, x, gen, n_steps_total: int):
    """Algorithm 2 as a run does it: the chain runner steps the adaptation to its end."""
    runner = ChainRunner(model, s, s.init(model, x), gen, run_steps=n_steps_total)
    assert runner.warm_up() == s.result().n_steps and s.done
    return runner.state, s.result()


def _tune(target_accept: float):
    model = Counting(_tune_target())
    gen = torch.Generator().manual_seed(0)
    s = acs(
        steps_per_cycle=5,
        alpha_ceil=5.0,
        target_accept=target_accept,
        burnin_steps=20,
        burnin_mh_steps=20,
        beta_candidates=5,
        tune_budget=400,
    )
    state, res = tune(s, model, random_init(model, 64, gen), gen, n_steps_total=2000)
    return s, model, state, res, gen


@pytest.fixture(scope="module")
def tuned():
    return _tune(0.5)


def test_tune_bounds_schedule_and_cost(tuned):
    s, model, state, res, _ = tuned
    assert res.budget == 400 and res.n_steps <= res.budget
    assert model.calls == res.n_log_prob + 1 == res.n_steps + 1  # +1: init of the chains
    assert s.tuner.alpha_floor <= res.alpha_min <= res.alpha_max <= s.tuner.alpha_ceil
    assert s.tuned and s.cycle_position == 0
    installed = (s.alpha_max, s.alpha_min, s.beta_sched)
    assert installed == (res.alpha_max, res.alpha_min, res.beta_schedule)
    assert res.alpha_schedule == pytest.approx(alpha_schedule(res.alpha_max, res.alpha_min, 5))
    b = res.beta_schedule
    assert len(b) == 5 and b[0] == s.beta_max
    assert all(s.beta_min <= v <= s.beta_max for v in b)
    assert all(x >= y for x, y in zip(b, b[1:]))  # Eq. 9: beta_i in [0.5, beta_{i-1}]
    for a, v in zip(res.alpha_schedule, b):
        if a <= res.alpha_min:
            assert v == s.beta_min


def _mean_accept(model, state, gen, alpha, beta, n=30):
    k = kern(alpha, beta)
    tot = 0.0
    for _ in range(n):
        state, info = k.step(model, state, gen)
        tot += float(info.accept_prob.mean())
    return tot / n


def test_tune_reaches_target_acceptance(tuned):
    s, model, state, res, gen = tuned
    acc_min = _mean_accept(model, state, gen, res.alpha_min, s.beta_min)
    acc_max = _mean_accept(model, state, gen, res.alpha_max, s.beta_max)
    assert abs(acc_min - 0.5) < 0.1, acc_min
    assert abs(acc_max - 0.5) < 0.15, acc_max


def test_tune_tracks_higher_target(tuned):
    s, model, state, res, gen = _tune(0.8)
    assert abs(_mean_accept(model, state, gen, res.alpha_min, 0.5) - 0.8) < 0.1
    assert res.alpha_min < tuned[3].alpha_min  # higher rho* -> smaller step size


def test_tuned_cycle_is_exact():
    # the tuned schedule on a target small enough to enumerate: pi P_1 ... P_s = pi
    model = strong_rbm()
    gen = torch.Generator().manual_seed(0)
    s = acs(steps_per_cycle=4, burnin_steps=10, burnin_mh_steps=8, tune_budget=100)
    tune(s, model, random_init(model, 64, gen), gen, n_steps_total=100)
    p = exact_probs(model)
    q = p
    for k in s.kernels():
        q = q @ transition_matrix(k, model, chunk=256)
    assert tv_distance(q, p) < 1e-9


# ---------------------------------------------------------------------------
# checkpointing


def test_state_dict_roundtrip_resumes_identically(tmp_path):
    model = strong_rbm()
    gen = torch.Generator().manual_seed(0)
    s = acs(steps_per_cycle=4, burnin_steps=5, burnin_mh_steps=4, tune_budget=60)
    state, _ = tune(s, model, random_init(model, 32, gen), gen, n_steps_total=500)
    for _ in range(7):
        state, _ = s.step(model, state, gen)
    torch.save({"sampler": s.state_dict(), "gen": gen.get_state()}, tmp_path / "ck.pt")
    ref = []
    for _ in range(6):
        state_ref, _ = s.step(model, state if not ref else ref[-1], gen)
        ref.append(state_ref)
    ck = torch.load(tmp_path / "ck.pt", weights_only=True)
    s2 = acs(steps_per_cycle=4, burnin_steps=5, burnin_mh_steps=4, tune_budget=60)
    s2.load_state_dict(ck["sampler"])
    assert s2.state_dict() == {**s.state_dict(), "step_count": 7}
    gen2 = torch.Generator().manual_seed(99)
    gen2.set_state(ck["gen"])
    st = state
    for r in ref:
        st, _ = s2.step(model, st, gen2)
        assert torch.equal(st.x, r.x)
    with pytest.raises(ConfigError) as e:
        acs(steps_per_cycle=5, tune=False).load_state_dict(ck["sampler"])
    assert e.value.key == "steps_per_cycle"


# ---------------------------------------------------------------------------
# configuration errors


@pytest.mark.parametrize(
    "kw,key",
    [
        (dict(beta_max=0.4, beta_min=0.5), "beta_max"),
        (dict(beta_min=0.0), "beta_min"),
        (dict(alpha_ceil=0.05, alpha_floor=0.05), "alpha_ceil"),
        (dict(alpha_floor=0.0), "alpha_floor"),
        (dict(target_accept=1.0), "target_accept"),
        (dict(zeta=0.0), "zeta"),
        (dict(steps_per_cycle=0), "steps_per_cycle"),
        (dict(tune=False, alpha_max=0.1, alpha_min=0.2), "alpha_max"),
        (dict(tune_budget=50), "tune_budget"),  # below the minimum Algorithm 2 needs
        (dict(tune_budget_frac=1.5), "tune_budget_frac"),
        (dict(alpha_candidates=1), "alpha_candidates"),
        (dict(state_kind="spin"), "state_kind"),
    ],
)
def test_bad_settings_raise_config_error(kw, key):
    with pytest.raises(ConfigError) as e:
        acs(**kw)
    assert e.value.key == f"sampler.{key}"
    assert "got" in e.value.message


def test_budget_checks_before_sampling():
    model = Counting(strong_rbm())
    gen = torch.Generator().manual_seed(0)
    x = random_init(model, 4, gen)
    with pytest.raises(ConfigError, match="must not exceed the run") as e:
        acs(tune_budget=1000).plan(500)
    assert e.value.key == "tune_budget"
    with pytest.raises(ConfigError, match="needs >=") as e:
        acs().plan(1000)  # 10% = 100 < 300 steps needed
    assert e.value.key == "tune_budget"
    assert model.calls == 0  # nothing was evaluated
    with pytest.raises(RuntimeError, match="run's length"):
        s = acs()
        s.step(model, s.init(model, x), gen)


def test_unsupported_state_kind():
    class Cont(EnergyModel):
        state_kind, dim = "continuous", 2

        def log_prob(self, x):
            return -(x**2).sum(-1)

    with pytest.raises(ConfigError) as e:
        acs(tune=False).init(Cont(), torch.zeros(2, 2))
    assert e.value.key == "sampler.state_kind"


def test_yaml_config_instantiates():
    from ebmlab.utils.config import build

    node = OmegaConf.load(REPO / "conf" / "sampler" / "acs.yaml")
    s = build(node, "sampler")
    assert isinstance(s, ACS)
    t = s.tuner
    assert (t.target_accept, t.zeta, t.alpha_ceil, t.alpha_floor) == (0.5, 0.5, 60.0, 0.05)
    assert (s.beta_max, s.beta_min, s.steps_per_cycle, s.tune_enabled) == (0.95, 0.5, 20, True)
    bad = OmegaConf.merge(node, {"beta_max": 0.3})
    with pytest.raises(ConfigError) as e:
        build(bad, "sampler")
    assert e.value.key == "sampler.beta_max"
