"""Baseline samplers RWM, LB-1 and HB-k-l: exactness (kernels + Monte Carlo), costs, adaptation.

Kernel checks are noise-free: RWM and LB-1 expose ``log_proposal``; HB's exact kernel is
built here from its definition (mean over blocks of ball-auxiliary Gibbs kernels). The
Monte Carlo checks run the real ``step`` code against the enumerated target with the iid
noise floor of tests/exactness.py; their step counts are chosen from the exact n-step
marginal bias (well below the floor).
"""

from __future__ import annotations

import itertools

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from ebmlab.errors import ConfigError
from ebmlab.models.ab_targets import LatticeGaussian
from ebmlab.samplers.hamming_ball import HammingBall, ball_offsets, ball_size
from ebmlab.samplers.locally_balanced import LocallyBalanced
from ebmlab.samplers.rwm import RWM, RWMKernel
from tests.exactness import (
    assert_exact,
    empirical_probs,
    enumerate_states,
    exact_probs,
    frustrated_ising,
    kernel_marginal_tv,
    kernel_stationary,
    ordinal_target,
    proposal_matrix,
    random_init,
    rows_sum_to_one,
    run_chains,
    sample_tv,
    strong_rbm,
    transition_matrix,
    tv_distance,
    tv_noise_floor,
)
from tests.helpers import from_conf

CONF = __import__("pathlib").Path(__file__).resolve().parents[2] / "conf"

TARGETS = {
    "ising8": lambda: frustrated_ising(d=8),
    "rbm": strong_rbm,
    "ord3": lambda: ordinal_target(d=3),
    "ord4": ordinal_target,
}


def make_rwm(**kw) -> RWMKernel:
    """The kernel of conf/sampler/rwm.yaml with its radius fixed (no adaptation steps)."""
    rwm = from_conf("sampler/rwm", **{"adapt_steps": 0, **kw})
    assert rwm.done
    return rwm.frozen()


def make_lb(**kw) -> LocallyBalanced:
    return from_conf("sampler/lb1", **kw)


def make_hb(*args, **kw) -> HammingBall:
    """HB-k-l from conf/sampler/hb_10_1.yaml: ``make_hb(k, l)``."""
    return from_conf("sampler/hb_10_1", **dict(zip(("block_size", "radius"), args)), **kw)


@pytest.fixture(scope="module")
def models():
    return {k: f() for k, f in TARGETS.items()}


# ------------------------------------------------------------------ exact kernels (no noise)


@pytest.mark.parametrize(
    "target,neighbourhood,balance",
    [
        ("ising8", "hamming", "sqrt"),
        ("rbm", "hamming", "barker"),
        ("ord3", "hamming", "sqrt"),
        ("ord3", "pm1", "sqrt"),
        ("ord3", "pm1", "barker"),
    ],
)
def test_lb1_kernel_is_exact(models, target, neighbourhood, balance):
    model = models[target]
    lb = make_lb(neighbourhood=neighbourhood, balance=balance)
    Q = proposal_matrix(lb, model)
    assert rows_sum_to_one(Q)
    assert torch.all(torch.diagonal(Q) == 0)  # never proposes to stay
    P = transition_matrix(lb, model)
    assert tv_distance(kernel_stationary(P), exact_probs(model)) < 1e-9
    # negative control: the proposal alone (no MH with the reverse normaliser) is biased
    assert tv_distance(kernel_stationary(Q), exact_probs(model)) > 1e-3


def test_lb1_sqrt_proposal_matches_formula(models):
    """q(flip_i | x) = sqrt(p(y_i)/p(x)) / sum_j sqrt(p(y_j)/p(x)) on the binary target."""
    model = models["ising8"]
    X = enumerate_states(model)
    lp = model.log_prob(X)
    Q = proposal_matrix(make_lb(), model)
    ham = torch.cdist(X.double(), X.double(), p=1)
    w = torch.exp((lp[None, :] - lp[:, None]) / 2) * (ham == 1)
    assert torch.allclose(Q, w / w.sum(1, keepdim=True), atol=1e-10)


@pytest.mark.parametrize("target,radius", [("ising8", 1.0), ("ising8", 2.0), ("rbm", 3.3)])
def test_rwm_binary_kernel_is_exact(models, target, radius):
    model = models[target]
    rwm = make_rwm(radius=radius)
    Q = proposal_matrix(rwm, model)
    assert rows_sum_to_one(Q)
    assert torch.allclose(Q, Q.T)  # symmetric proposal
    P = transition_matrix(rwm, model)
    assert tv_distance(kernel_stationary(P), exact_probs(model)) < 1e-9


@pytest.mark.parametrize("radius", [0.7, 2.0])
def test_rwm_ordinal_kernel_is_exact(models, radius):
    model = models["ord3"]
    rwm = make_rwm(radius=radius)
    Q = proposal_matrix(rwm, model)
    assert torch.allclose(Q, Q.T)
    assert bool((Q.sum(1) <= 1 + 1e-12).all())  # mass off the box is rejected
    P = transition_matrix(rwm, model)
    assert tv_distance(kernel_stationary(P), exact_probs(model)) < 1e-9


def hb_kernel(model, k: int, l: int) -> torch.Tensor:
    """Exact HB-k-l kernel: mean over blocks B of sum_u U(u|x) p(x') 1[x' in H_B(u)] / Z_B(u)."""
    X = enumerate_states(model).double()
    n, D = X.shape
    p = exact_probs(model)
    diff = X[:, None, :] != X[None, :, :]  # [n, n, D]
    P = torch.zeros(n, n, dtype=torch.float64)
    blocks = list(itertools.combinations(range(D), k))
    S = 2 if model.state_kind == "binary" else model.n_states
    H = ball_size(k, l, S)
    for B in blocks:
        inb = torch.zeros(D, dtype=torch.bool)
        inb[list(B)] = True
        ball = (~diff[:, :, ~inb]).all(-1) & (diff[:, :, inb].sum(-1) <= l)  # u in H_B(x)
        ball = ball.double()
        assert torch.all(ball.sum(1) == H)
        G = ball * p[None, :]
        G = G / G.sum(1, keepdim=True)  # x' | u
        P += (ball / H) @ G
    return P / len(blocks)


@pytest.mark.parametrize("target,k,l", [("ising8", 3, 1), ("ising8", 4, 2), ("ord3", 2, 1)])
def test_hb_exact_kernel_is_reversible(models, target, k, l):
    model = models[target]
    P = hb_kernel(model, k, l)
    p = exact_probs(model)
    flow = p[:, None] * P
    assert torch.allclose(P.sum(1), torch.ones(len(p), dtype=P.dtype), atol=1e-12)
    assert torch.allclose(flow, flow.T, atol=1e-14)
    assert tv_distance(kernel_stationary(P), p) < 1e-9


def test_ball_offsets_enumerate_the_ball():
    for k, l, S in [(10, 1, 2), (4, 2, 2), (3, 2, 5)]:
        off = ball_offsets(k, l, S)
        assert off.shape == (ball_size(k, l, S), k)
        assert len({tuple(r) for r in off.tolist()}) == off.shape[0]
        assert int((off != 0).sum(1).max()) == min(k, l)
        neg = {tuple(r) for r in torch.remainder(-off, S).tolist()}
        assert neg == {tuple(r) for r in off.tolist()}  # closed under negation
    assert ball_size(10, 1, 2) == 11 and ball_size(10, 1, 21) == 201


# ------------------------------------------------------------------ Monte Carlo (real step code)


@pytest.mark.parametrize(
    "name,make,target,n_steps",
    [
        ("lb1", lambda: make_lb(), "ising8", 60),
        ("lb1-pm1", lambda: make_lb(neighbourhood="pm1"), "ord3", 100),
        ("rwm", lambda: make_rwm(radius=2.0), "rbm", 100),
        ("rwm-ord", lambda: make_rwm(radius=1.5), "ord4", 100),
        ("hb-3-1", lambda: make_hb(3, 1), "rbm", 60),
        ("hb-2-1-ord", lambda: make_hb(2, 1), "ord4", 60),
    ],
)
def test_step_samples_the_target(models, name, make, target, n_steps):
    model = models[target]
    sampler = make()
    if isinstance(sampler, (LocallyBalanced, RWMKernel)):  # q(y|x) is tractable: the chains
        # must forget the start well below the floor
        assert kernel_marginal_tv(sampler, model, n_steps) < 2e-3
    tv, floor = sample_tv(sampler, model, n_chains=4000, n_steps=n_steps, seed=3)
    assert tv <= floor, f"{name}: TV {tv:.4f} > iid floor {floor:.4f}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "make,n_steps",
    [
        (lambda: make_lb(), 150),
        (lambda: make_rwm(radius=1.5), 300),
        (lambda: make_hb(4, 1), 150),
    ],
)
@pytest.mark.parametrize("target", ["ising10", "rbm", "ord4"])
def test_step_samples_the_target_full(make, n_steps, target):
    """The harness's default scale: 20,000 chains on its three default targets."""
    model = {"ising10": frustrated_ising, "rbm": strong_rbm, "ord4": ordinal_target}[target]()
    assert_exact(make(), model, n_chains=20000, n_steps=n_steps, seed=0)


def test_hb_step_count_mixes_and_negative_control(models):
    """HB-3-1 mixes within 60 steps (exact kernel); sampling a tempered target is caught."""
    model = models["rbm"]
    P = hb_kernel(model, 3, 1)
    mu = torch.full((P.shape[0],), 1.0 / P.shape[0], dtype=torch.float64)
    for _ in range(60):
        mu = mu @ P
    assert tv_distance(mu, exact_probs(model)) < 2e-3
    hot = strong_rbm(weight_scale=1.2)  # a different target: the MC check must fail
    gen = torch.Generator().manual_seed(3)
    x = run_chains(make_hb(3, 1), hot, random_init(hot, 4000, gen), 60, gen)
    floor = tv_noise_floor(exact_probs(model), 4000)
    assert tv_distance(empirical_probs(x, model), exact_probs(model)) > 2 * floor


# ------------------------------------------------------------------ costs, caches, adaptation


def test_lb1_costs_and_neighbour_cache(models, gen):
    for target, nb, M in [("ising8", "hamming", 8), ("ord4", "hamming", 16), ("ord4", "pm1", 8)]:
        model = models[target]
        lb = make_lb(neighbourhood=nb)
        assert lb.n_neighbours(model) == M
        state = lb.init(model, random_init(model, 50, gen))
        assert lb.init_cost() == (M + 1, 0)
        for _ in range(5):
            state, info = lb.step(model, state, gen)
            assert info.n_log_prob == M and info.n_grad == 0
        # the cache holds the neighbours' log_probs of the CURRENT states
        _, nbr, _ = lb._nbr_log_probs(model, state.x, state.x.shape, *_space(model))
        assert torch.allclose(state.extra["lb_nbr"], nbr)
        assert torch.allclose(state.log_prob, model.log_prob(state.x))
        # one coordinate moves per accepted step (by one unit for pm1)
        assert bool((info.jump <= (1 if nb == "pm1" or target == "ising8" else 4)).all())


def test_lb1_recomputes_stale_cache(models, gen):
    model = models["ising8"]
    lb = make_lb()
    state = lb.init(model, random_init(model, 20, gen))
    other = random_init(model, 20, gen)  # e.g. moved by another sampler, extra kept
    moved = state.replace(x=other, log_prob=model.log_prob(other))
    new, info = lb.step(model, moved, gen)
    assert info.n_log_prob == 2 * 8
    _, nbr, _ = lb._nbr_log_probs(model, new.x, new.x.shape, "binary", 2)
    assert torch.allclose(new.extra["lb_nbr"], nbr)


def test_chunked_evaluation_gives_the_same_chain(models):
    """chunk_size only splits the batched log_prob calls: identical draws for a fixed seed."""
    model = models["ord4"]
    for make in (
        lambda c: make_lb(chunk_size=c),
        lambda c: make_hb(2, 1, chunk_size=c),
    ):
        xs = []
        for c in (None, 7):
            gen = torch.Generator().manual_seed(5)
            xs.append(run_chains(make(c), model, random_init(model, 30, gen), 5, gen))
        assert torch.equal(xs[0], xs[1])


def test_hb_costs_and_jumps(models, gen):
    for target, k, l, H in [("rbm", 3, 1, 4), ("rbm", 4, 2, 11), ("ord4", 2, 1, 9)]:
        model = models[target]
        hb = make_hb(k, l)
        assert hb.n_ball(model) == H
        state = hb.init(model, random_init(model, 200, gen))
        for _ in range(3):
            old = state.x
            state, info = hb.step(model, state, gen)
            assert info.n_log_prob == H and info.n_grad == 0
            changed = (state.x != old).sum(-1)
            assert int(changed.max()) <= min(k, 2 * l)  # x, x' both within l of u, inside B
        assert torch.allclose(state.log_prob, model.log_prob(state.x))
    with pytest.raises(ValueError, match="block_size"):
        make_hb(10, 1).step(models["rbm"], state, gen)


def _space(model):
    return ("binary", 2) if model.state_kind == "binary" else ("ordinal", model.n_states)


def _adapted_acceptance(model, seed: int) -> tuple[RWMKernel, float]:
    gen = torch.Generator().manual_seed(seed)
    rwm = from_conf("sampler/rwm", radius=1.0, adapt_steps=400)
    stats: dict = {}
    run_chains(rwm, model, random_init(model, 200, gen), 400, gen, stats=stats)
    assert rwm.done and rwm.t == 400
    kernel = rwm.frozen()
    radius = kernel.radius
    frozen: dict = {}
    run_chains(kernel, model, stats["final_state"].x, 200, gen, stats=frozen)
    assert kernel.radius == radius  # the frozen kernel keeps it
    return kernel, frozen["accept_rate"]


def test_rwm_adaptation_reaches_0234_ordinal():
    model = LatticeGaussian(
        structure="rotated", condition="medium", dim=10, n_states=21, center=None, seed=1
    )
    rwm, acc = _adapted_acceptance(model, 0)
    assert abs(acc - 0.234) < 0.03, (rwm.radius, acc)
    assert 0.1 < rwm.radius < 1.0


def test_rwm_adaptation_reaches_0234_binary():
    model = frustrated_ising(d=30, coupling=0.1, field=0.3)
    rwm, acc = _adapted_acceptance(model, 0)
    assert abs(acc - 0.234) < 0.035, (rwm.radius, acc)
    assert rwm.radius > 1.5  # started at 1 (acceptance ~0.6 there) and grew


def test_rwm_state_dict_roundtrip():
    a: RWM = from_conf("sampler/rwm", radius=1.0, adapt_steps=10)
    a.kernel.radius, a.t = 3.25, 7
    b: RWM = from_conf("sampler/rwm", radius=1.0, adapt_steps=10)
    b.load_state_dict(a.state_dict())
    assert a.state_dict() == {"radius": 3.25, "t": 7}  # the keys of checkpoints before 44
    assert (b.kernel.radius, b.t, b.done) == (3.25, 7, False)


def test_rwm_ordinal_never_evaluates_outside_the_box(gen):
    seen = []

    class Spy(LatticeGaussian):
        def log_prob(self, x):
            seen.append(x.clone())
            return super().log_prob(x)

    model = Spy(structure="rotated", condition="low", dim=5, n_states=3, center=0.0, seed=0)
    rwm = make_rwm(radius=3.0)
    state = rwm.init(model, random_init(model, 100, gen))
    for _ in range(5):
        state, info = rwm.step(model, state, gen)
    allx = torch.cat(seen)
    assert allx.min() >= 0 and allx.max() <= 2
    assert float(info.accept_prob.mean()) < 0.5  # most radius-3 proposals leave the box


# ------------------------------------------------------------------ config errors and yaml


@pytest.mark.parametrize(
    "make,key",
    [
        (lambda: make_rwm(radius=0.0), "radius"),
        (lambda: make_rwm(adapt_steps=-1), "adapt_steps"),
        (lambda: make_rwm(target_accept=1.0), "target_accept"),
        (lambda: make_rwm(adapt_rate=float("nan")), "adapt_rate"),
        (lambda: make_lb(neighbourhood="ball"), "neighbourhood"),
        (lambda: make_lb(balance="linear"), "balance"),
        (lambda: make_hb(block_size=0), "block_size"),
        (lambda: make_hb(block_size=3, radius=4), "radius"),
        (lambda: make_hb(block_size=40, radius=20), "radius"),
        (lambda: make_hb(chunk_size=0), "chunk_size"),
        (lambda: make_lb(chunk_size=2.5), "chunk_size"),
    ],
)
def test_bad_hyperparameters_raise_config_error(make, key):
    with pytest.raises(ConfigError) as e:
        make()
    assert e.value.key == f"sampler.{key}" and "got" in e.value.message


@pytest.mark.parametrize("name", ["rwm", "lb1", "hb_10_1"])
def test_sampler_yaml_instantiates_and_steps(name, gen):
    sampler = instantiate(OmegaConf.load(CONF / "sampler" / f"{name}.yaml"))
    model = frustrated_ising(d=12)
    state = sampler.init(model, random_init(model, 4, gen))
    state, info = sampler.step(model, state, gen)
    assert state.x.shape == (4, 12) and info.accept_prob.shape == (4,)
