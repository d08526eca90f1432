"""Learners' and evaluators' chains go through the one chain runner (issue 44): PCD's inner
steps are one ``run(K)`` block per iteration with nothing read back to the host (issue 46), the
same draws as stepping the sampler by hand; GRBM negatives, Gibbs evaluation chains and AIS
transitions are runner steps too."""

from __future__ import annotations

import itertools
from contextlib import contextmanager

import pytest
import torch
import torch.nn.functional as F

from ebmlab.core.chain import ChainRunner
from ebmlab.learning.gibbs_generation import gibbs_samples
from ebmlab.learning.grbm_cd import sample_from_noise
from ebmlab.learning.pcd import PersistentChains
from ebmlab.metrics.ais import IntermediateRBMGibbs, rbm_ais_log_z
from ebmlab.samplers.dlp import DMALA
from tests.helpers import from_conf

HOST_READS = ("item", "tolist", "__float__", "__int__", "__bool__", "__index__", "numpy")


class Reads(list):
    """Host reads seen (names of the Tensor methods); none recorded while ``paused``."""

    paused = False


@contextmanager
def host_reads(monkeypatch):
    """Records every read of a tensor's value on the host (what syncs with a GPU)."""
    seen = Reads()
    for name in HOST_READS:
        orig = getattr(torch.Tensor, name)

        def spy(self, *a, _orig=orig, _name=name, **kw):
            if not seen.paused:
                seen.append(_name)
            return _orig(self, *a, **kw)

        monkeypatch.setattr(torch.Tensor, name, spy)
    try:
        yield seen
    finally:
        monkeypatch.undo()


def uncounted(seen: Reads, optimizer) -> None:
    """Adam reads its step counters, which torch keeps on the CPU (no GPU sync): not counted."""
    step = optimizer.step

    def quiet(*a, **kw):
        seen.paused = True
        try:
            return step(*a, **kw)
        finally:
            seen.paused = False

    optimizer.step = quiet


@pytest.fixture
def blocks(monkeypatch):
    """The sizes of the blocks ChainRunner.run is asked for, in order."""
    sizes: list[int] = []
    run = ChainRunner.run
    monkeypatch.setattr(ChainRunner, "run", lambda self, n: sizes.append(n) or run(self, n))
    return sizes


def rbm(v: int = 12, h: int = 5, seed: int = 1):
    m = from_conf("model/rbm", n_visible=v, n_hidden=h, init_std=0.01, init_seed=0)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in (m.W, m.b, m.c):
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return m


def tiny_ebm():
    """A 12-pixel ResNet EBM with a Bernoulli base (what learner=pcd_buffer trains)."""
    torch.manual_seed(0)
    m = from_conf("model/resnet_ebm", dim=12, n_channels=4, n_blocks=1, image_shape=[3, 4])
    m.set_base_mean(torch.rand(12, generator=torch.Generator().manual_seed(1)) * 0.8 + 0.1)
    return m


def pcd(**kw):
    args = dict(buffer_size=10, batch_size=8, sampler_steps=5, lr=0.01, l1=0.0,
                buffer_init="uniform")  # fmt: skip
    return from_conf("learner/pcd", **{**args, **kw})


def data(n: int = 40, d: int = 12, seed: int = 0):
    return (torch.rand(n, d, generator=torch.Generator().manual_seed(seed)) < 0.3).float()


# -------------------------------------------------------------------- no host reads


def test_replay_buffer_sampling_reads_nothing_back(monkeypatch):
    """The old PCDBuffer read float(accept), float(jump) after each of its sampler steps."""
    g, m = torch.Generator().manual_seed(0), tiny_ebm()
    learner = from_conf("learner/pcd_buffer", buffer_size=12, batch_size=6, sampler_steps=4)
    learner.setup(m, data(6), g, DMALA(0.2, None))
    x0 = learner.buffer[:6]
    with host_reads(monkeypatch) as seen:
        xs, info = learner._sample(m, x0, g)
    assert seen == []
    assert isinstance(info["accept_rate"], torch.Tensor) and 0 < float(info["accept_rate"]) <= 1


def test_a_training_update_reads_nothing_back(monkeypatch):
    """One PCD iteration reads no value on the host: the loss stays on the device and its
    divergence checks are kept there until the loop asks (the old code read the loss and a
    finite-parameters flag every iteration; before that one flag per parameter tensor, and
    PCDBuffer two per sampler step). The check, when asked, is one read."""
    g, m = torch.Generator().manual_seed(0), tiny_ebm()
    buffered = from_conf("learner/pcd_buffer", buffer_size=12, batch_size=6, sampler_steps=4)
    buffered.setup(m, data(6), g, DMALA(0.2, None))
    r = rbm()
    learner = pcd()
    learner.setup(r, data(), g, DMALA(0.2, None))
    batch = data(8, seed=2)
    with host_reads(monkeypatch) as seen:
        uncounted(seen, buffered.optimizer)
        info = buffered.update(m, data(6), g)
    assert seen == [] and isinstance(info["loss"], torch.Tensor)
    with host_reads(monkeypatch) as seen:
        uncounted(seen, learner.optimizer)
        info = learner.update(r, batch, g)
    assert seen == [] and isinstance(info["loss"], torch.Tensor)
    with host_reads(monkeypatch) as seen:
        learner.check_divergence()
        buffered.check_divergence()
    assert seen == ["tolist", "tolist"]


def test_pcd_and_acs_pcd_sampling_read_nothing_back(monkeypatch):
    g, m = torch.Generator().manual_seed(0), rbm()
    learner = pcd()
    learner.setup(m, data(), g, DMALA(0.2, None))
    sched = dict(cycle_length=4, retune_max_every=10, retune_min_every=10, tune_budget=10,
                 adaptive_floor=False, explore_steps=3)  # fmt: skip
    acs_learner = from_conf("learner/acs_pcd", buffer_size=8, batch_size=8, sampler_steps=6,
                            acs=sched)  # fmt: skip
    acs_learner.setup(m, data(), g, from_conf("sampler/acs", tune=False))
    acs_learner.iteration = 3  # an exploitation iteration (re-tuning reads acceptances: Alg. 4)
    with host_reads(monkeypatch) as seen:
        learner.sample(m, g)
        acs_learner.sample(m, g)
    assert seen == []


# -------------------------------------------------------------------- one runner, in blocks


def test_pcd_iterations_are_runner_blocks(blocks):
    g, m = torch.Generator().manual_seed(0), rbm()
    learner = pcd(sampler_steps=5)
    learner.setup(m, data(), g, from_conf("sampler/gwg"))
    for _ in range(3):
        learner.step(m, g)
    assert blocks == [5, 5, 5]
    (runner,) = [r for _, r in learner.chains.runners.values()]
    assert runner.steps == 15  # one runner kept across iterations


def test_replay_buffer_iterations_are_runner_blocks(blocks):
    g, m = torch.Generator().manual_seed(0), tiny_ebm()
    learner = from_conf("learner/pcd_buffer", buffer_size=12, batch_size=6, sampler_steps=4)
    learner.setup(m, data(6), g, DMALA(0.2, None))
    for _ in range(2):
        learner.step(m, g)
    assert blocks == [4, 4]


def test_a_block_takes_the_draws_of_stepping_by_hand():
    m, sampler = rbm(), DMALA(0.2, None)
    x = data(8, seed=3)
    g = torch.Generator().manual_seed(5)
    chains = PersistentChains()
    y, info = chains.advance(m, sampler, x, g, 6)
    y2, _ = chains.advance(m, sampler, y, g, 6)
    g = torch.Generator().manual_seed(5)
    state, acc, ref = sampler.init(m, x), [], []
    for _ in range(12):
        state, step = sampler.step(m, state, g)
        acc.append(step.accept_prob.float().mean())
        ref.append(state.x) if len(acc) == 6 else None
        state = sampler.init(m, state.x) if len(acc) == 6 else state  # the new block's init
    assert torch.equal(y, ref[0]) and torch.equal(y2, state.x)
    assert info["accept_rate"] == sum(a.double() for a in acc[:6]) / 6
    assert info["n_log_prob"] == 1 + 6 and info["n_grad"] == 1 + 6


def test_evaluation_chains_are_runner_blocks(blocks):
    g = torch.Generator().manual_seed(0)
    gibbs_samples(rbm(), data(4), 3, g)
    grbm = from_conf("model/grbm", n_visible=6, n_hidden=4)
    sample_from_noise(grbm, from_conf("sampler/grbm_gibbs"), 5, 7, g)
    assert blocks == [3, 7]


# -------------------------------------------------------------------- AIS transitions


@pytest.mark.parametrize("beta", [0.0, 0.35, 1.0])
def test_intermediate_rbm_gibbs_leaves_p_beta_invariant(beta):
    """T(v, v') = sum_h p_b(h|v) p_b(v'|h) enumerated; pi_b T = pi_b for the intermediate RBM's
    marginal f_b(v) = (1 - b) base_b.v + b b.v + sum_j softplus(b (W v + c)_j) (Salakhutdinov &
    Murray 2008, Sec. 4.1)."""
    m = rbm(v=4, h=3)
    W, b, c = m.W.detach().double(), m.b.detach().double(), m.c.detach().double()
    base_b = torch.tensor([0.3, -0.2, 0.5, 0.1], dtype=torch.float64)
    vs = torch.tensor(list(itertools.product([0.0, 1.0], repeat=4)), dtype=torch.float64)
    hs = torch.tensor(list(itertools.product([0.0, 1.0], repeat=3)), dtype=torch.float64)
    gibbs = IntermediateRBMGibbs(W, b, c, base_b)
    gibbs.beta = beta
    a = gibbs.init(None, vs).extra["a"]  # [16, 3]

    def bern(p, x):  # prod_i p_i^x_i (1 - p_i)^(1 - x_i), for every (row of p, row of x)
        return torch.exp(x @ torch.log(p).T + (1 - x) @ torch.log1p(-p).T).T

    p_h = bern(torch.sigmoid(beta * a), hs)  # [v, h]
    p_v = bern(torch.sigmoid((1 - beta) * base_b + beta * (hs @ W + b)), vs)  # [h, v']
    T = p_h @ p_v
    f = (1 - beta) * (vs @ base_b) + beta * (vs @ b) + F.softplus(beta * a).sum(-1)
    pi = torch.softmax(f, 0)
    torch.testing.assert_close(pi @ T, pi, rtol=1e-10, atol=1e-12)


def test_rbm_ais_transitions_are_runner_steps(monkeypatch):
    steps = []
    step = ChainRunner.step
    monkeypatch.setattr(ChainRunner, "step", lambda self: steps.append(1) or step(self))
    m, g = rbm(v=6, h=3), torch.Generator().manual_seed(0)
    rbm_ais_log_z(m.W, m.b, m.c, torch.zeros(6), n_temps=7, n_chains=5, generator=g)
    assert len(steps) == 7 - 2  # one per intermediate temperature


# -------------------------------------------------------------------- captured blocks (issue 46)


def _trained(make, capture, n_iters):
    """Buffer, parameters and scalars after ``n_iters`` iterations of the learner ``make()``
    returns (learner, model, sampler), its chains' blocks run through ``capture``."""
    learner, model, sampler = make()
    g = torch.Generator().manual_seed(0)
    learner.setup(model, data(40), g, sampler)
    learner.chains = PersistentChains(capture)
    if hasattr(learner, "acs"):
        learner.acs.chains = PersistentChains(capture)
    infos = [learner.step(model, g) for _ in range(n_iters)]
    return learner.buffer, [p.detach().clone() for p in model.parameters()], infos


@pytest.mark.parametrize("learner", ["pcd", "acs_pcd", "pcd_buffer"])
def test_learner_blocks_replay_as_captured_graphs(learner):
    """The K inner steps of a PCD iteration captured once and replayed (the stand-in capture
    of core.graphs, which fails on a host read or a replay that differs), with the model's
    parameters updated in place between replays: the same buffer, parameters and scalars as
    eager blocks."""
    from ebmlab.core import graphs

    sched = dict(cycle_length=3, retune_max_every=10, retune_min_every=10, tune_budget=5,
                 adaptive_floor=False, explore_steps=2)  # fmt: skip

    def make():
        if learner == "pcd":
            return pcd(), rbm(), DMALA(0.2, None)
        if learner == "acs_pcd":
            lr = from_conf("learner/acs_pcd", buffer_size=8, batch_size=8, sampler_steps=4,
                           acs=sched)  # fmt: skip
            return lr, rbm(), from_conf("sampler/acs", tune=False, alpha_candidates=5)
        lr = from_conf("learner/pcd_buffer", buffer_size=12, batch_size=6, sampler_steps=4)
        return lr, tiny_ebm(), DMALA(0.2, None)

    capture = graphs.GraphedSteps(graphs.StandInBackend())
    buf, params, infos = _trained(make, capture, 8)
    buf0, params0, infos0 = _trained(make, None, 8)
    assert capture.captures >= 1 and capture.graphs  # captured, then replayed
    assert torch.equal(buf, buf0) and all(map(torch.equal, params, params0))
    assert [float(i["accept_rate"]) for i in infos] == [float(i["accept_rate"]) for i in infos0]
