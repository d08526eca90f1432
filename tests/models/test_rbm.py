"""Bernoulli RBM, block Gibbs exactness, CD-k training and the trained-RBM cache."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from ebmlab.errors import ConfigError, DivergenceError
from ebmlab.learning.cd import CD, reconstruction_error
from ebmlab.learning.rbm_target import cached_rbm, config_hash
from ebmlab.models.rbm import BernoulliRBM, all_binary, best_class_by_log_prob
from ebmlab.samplers.block_gibbs import BlockGibbs
from tests.helpers import from_conf


def rbm(n_visible: int, n_hidden: int, **kw) -> BernoulliRBM:
    """conf/model/rbm.yaml at the given size (``kw`` overrides init_std / init_seed)."""
    return from_conf("model/rbm", n_visible=n_visible, n_hidden=n_hidden, **kw)


def tiny_rbm(V=5, H=3, scale=1.5, seed=0) -> BernoulliRBM:
    m = rbm(V, H, init_std=scale, init_seed=seed)
    g = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        m.b.copy_(torch.randn(V, generator=g))
        m.c.copy_(torch.randn(H, generator=g))
    return m.double()


def exact_visible_probs(m: BernoulliRBM) -> torch.Tensor:
    """p(v) by brute force over the JOINT (v, h), independent of log_prob's formula."""
    v = all_binary(m.n_visible, torch.float64)
    h = all_binary(m.n_hidden, torch.float64)
    vv = v.repeat_interleave(len(h), 0)
    hh = h.repeat(len(v), 1)
    lj = m.log_joint(vv, hh).detach().view(len(v), len(h))
    return torch.softmax(lj.logsumexp(1), 0)


def state_index(x: torch.Tensor) -> torch.Tensor:
    w = 2 ** torch.arange(x.shape[1] - 1, -1, -1, dtype=torch.long)
    return (x.long() * w).sum(1)  # matches all_binary's row order


def tv_floor(p: np.ndarray, n: int, q: float = 0.999, seed: int = 0) -> float:
    """TV that an iid sample of size n from p exceeds with probability 1 - q (simulated)."""
    counts = np.random.default_rng(seed).multinomial(n, p, size=2000)
    return float(np.quantile(0.5 * np.abs(counts / n - p).sum(1), q))


# --------------------------------------------------------------------------- the model


def test_log_prob_matches_joint_marginalisation():
    m = tiny_rbm()
    v = all_binary(5, torch.float64)
    h = all_binary(3, torch.float64)
    lj = m.log_joint(v.repeat_interleave(8, 0), h.repeat(32, 1)).view(32, 8)
    assert torch.allclose(m.log_prob(v), lj.logsumexp(1), atol=1e-10)
    assert torch.allclose(m.energy(v), -m.log_prob(v))
    # exact log Z by both enumeration directions
    assert torch.allclose(m.exact_log_partition(), lj.logsumexp((0, 1)), atol=1e-10)
    wide = rbm(3, 6, init_std=1.0).double()
    vv, hh = all_binary(3, torch.float64), all_binary(6, torch.float64)
    lz = wide.log_joint(vv.repeat_interleave(64, 0), hh.repeat(8, 1)).logsumexp(0)
    assert torch.allclose(wide.exact_log_partition(), lz, atol=1e-10)


def test_analytic_grad_equals_autograd(gen):
    m = rbm(20, 7, init_std=0.5)
    x = (torch.rand(6, 20, generator=gen) < 0.5).float()
    lp, g = m.log_prob_and_grad(x)
    xg = x.clone().requires_grad_(True)
    (ga,) = torch.autograd.grad(m.log_prob(xg).sum(), xg)
    assert torch.allclose(lp, m.log_prob(x).detach(), atol=1e-5)
    assert torch.allclose(g, ga, atol=1e-5)
    assert not g.requires_grad and not lp.requires_grad


def test_conditionals_match_joint(gen):
    m = tiny_rbm()
    v = all_binary(5, torch.float64)[[3, 17, 30]]
    h_all = all_binary(3, torch.float64)
    lj = torch.stack([m.log_joint(vi.expand(8, 5), h_all) for vi in v])  # [3, 8]
    p_h1 = (torch.softmax(lj, 1) @ h_all).detach()  # P(h_j = 1 | v) by enumeration
    assert torch.allclose(torch.sigmoid(m.hidden_logits(v)).detach(), p_h1, atol=1e-10)
    # sample_h frequencies
    n = 40000
    hs = m.sample_h(v[1].expand(n, 5), gen)
    se = torch.sqrt(p_h1[1] * (1 - p_h1[1]) / n)
    assert torch.all((hs.mean(0) - p_h1[1]).abs() < 5 * se)


def test_visible_bias_init_and_validation():
    m = rbm(4, 2)
    m.init_visible_bias_from_data(torch.tensor([0.0, 0.5, 0.9, 1.0]))
    want = torch.logit(torch.tensor([0.01, 0.5, 0.9, 0.99]))
    assert torch.allclose(m.b.detach(), want, atol=1e-5)
    W, b, c = m.parameters_for_ais()
    assert W.shape == (2, 4) and b.shape == (4,) and c.shape == (2,) and not W.requires_grad
    assert abs(float(rbm(784, 500).W.detach().std()) - 0.01) < 5e-4
    for kw, key in (
        ({"n_visible": 0}, "n_visible"),
        ({"n_hidden": 2.5}, "n_hidden"),
        ({"init_std": -1.0}, "init_std"),
    ):
        args = {"n_visible": 4, "n_hidden": 2, "init_std": 0.01, "init_seed": 0, **kw}
        with pytest.raises(ConfigError) as e:
            BernoulliRBM(**args)
        assert e.value.key == key


def test_best_class_by_log_prob():
    m = rbm(4, 2, init_std=0.0)
    m.init_visible_bias_from_data(torch.tensor([0.9, 0.9, 0.1, 0.1]))
    x = torch.tensor([[1.0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0]])
    labels = torch.tensor([2, 2, 0, 3])
    cls, means = best_class_by_log_prob(m, x, labels)
    assert cls == 2 and torch.isnan(means[1]) and means[2] > means[3] > means[0]


# ------------------------------------------------------------------------- block Gibbs


def test_block_gibbs_kernel_leaves_target_invariant():
    """Exact v -> v transition matrix T = P(h|v) P(v'|h) has the RBM marginal as fixed point."""
    m = tiny_rbm()
    v, h = all_binary(5, torch.float64), all_binary(3, torch.float64)
    ph = torch.sigmoid(m.hidden_logits(v)).detach()  # [32, 3]
    Ph = torch.exp(h @ ph.log().t() + (1 - h) @ (1 - ph).log().t()).t()  # [32 v, 8 h]
    pv = torch.sigmoid(m.visible_logits(h)).detach()  # [8, 5]
    Pv = torch.exp(v @ pv.log().t() + (1 - v) @ (1 - pv).log().t()).t()  # [8 h, 32 v]
    T = Ph @ Pv
    pi = exact_visible_probs(m)
    assert torch.allclose(T.sum(1), torch.ones(32, dtype=torch.float64))
    assert torch.allclose(pi @ T, pi, atol=1e-12)
    # mixing: 20 steps from the uniform start are within 1e-4 TV (used by the MC test)
    p20 = torch.full((32,), 1 / 32, dtype=torch.float64) @ torch.linalg.matrix_power(T, 20)
    assert 0.5 * float((p20 - pi).abs().sum()) < 1e-4


def run_block_gibbs(m, n, steps, n_sweeps, g):
    s = BlockGibbs(n_sweeps=n_sweeps)
    state = s.init(m, (torch.rand(n, m.n_visible, generator=g, dtype=torch.float64) < 0.5).double())
    for _ in range(steps):
        state, _ = s.step(m, state, g)
    return torch.bincount(state_index(state.x), minlength=2**m.n_visible).double() / n


def test_block_gibbs_exact_by_enumeration():
    """Empirical law of 10,000 independent chains after 20 steps vs the enumerated marginal.

    (test_block_gibbs_kernel_leaves_target_invariant shows 20 steps from uniform are within
    1e-4 TV of the target, far below the Monte Carlo floor of about 0.03.)"""
    m = tiny_rbm()
    pi = exact_visible_probs(m)
    n, steps = 10000, 20
    g = torch.Generator().manual_seed(1)
    s = BlockGibbs(n_sweeps=1)
    state = s.init(m, (torch.rand(n, 5, generator=g, dtype=torch.float64) < 0.5).double())
    for _ in range(steps):
        state, info = s.step(m, state, g)
    emp = torch.bincount(state_index(state.x), minlength=32).double() / n
    tv = 0.5 * float((emp - pi).abs().sum())
    floor = tv_floor(pi.numpy(), n)
    assert tv < floor, (tv, floor)
    # several sweeps per step: same law
    emp3 = run_block_gibbs(m, n, 7, 3, g)
    assert 0.5 * float((emp3 - pi).abs().sum()) < floor
    # a sampler with the visible bias dropped must fail the same check (the test has power)

    class NoBias(BernoulliRBM):
        def visible_logits(self, h):
            return h @ self.W

    bad = NoBias(5, 3, 0.0, 0)
    bad.load_state_dict(m.state_dict())
    bad = bad.double()
    st = s.init(bad, state.x)
    for _ in range(steps):
        st, _ = s.step(bad, st, g)
    emp_bad = torch.bincount(state_index(st.x), minlength=32).double() / n
    assert 0.5 * float((emp_bad - pi).abs().sum()) > 3 * floor


def test_block_gibbs_state_and_info(gen):
    m = rbm(12, 5, init_std=1.0)
    s = BlockGibbs(n_sweeps=1)
    x0 = (torch.rand(7, 12, generator=gen) < 0.5).float()
    st = s.init(m, x0)
    assert torch.allclose(st.log_prob, m.log_prob(x0).detach())
    for _ in range(3):
        new, info = s.step(m, st, gen)
        assert torch.allclose(new.log_prob, m.log_prob(new.x).detach(), atol=1e-5)
        assert torch.equal(info.jump, (new.x != st.x).sum(1).float())
        assert info.accepted.all() and torch.all(info.accept_prob == 1)
        assert (info.n_log_prob, info.n_grad) == (0, 0)
        st = new
    # x replaced outside the sampler: the cached hidden logits are not trusted
    x1 = 1 - st.x
    st2 = st.replace(x=x1, log_prob=m.log_prob(x1).detach())
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    a, _ = s.step(m, st2, g1)
    b, _ = s.step(m, s.init(m, x1), g2)
    assert torch.equal(a.x, b.x)
    assert s.init_cost() == (0, 0) and s.matmuls_per_step == 2


def test_block_gibbs_rejects_non_rbm():
    class Plain(torch.nn.Module):
        def log_prob(self, x):
            return x.sum(-1)

    with pytest.raises(ConfigError) as e:
        BlockGibbs(n_sweeps=1).init(Plain(), torch.zeros(2, 3))
    assert e.value.key == "sampler" and "rbm" in e.value.message
    with pytest.raises(ConfigError) as e:
        BlockGibbs(n_sweeps=0)
    assert e.value.key == "n_sweeps"


# ---------------------------------------------------------------------------------- CD-k


def two_mode_data(n=400, V=10, flip=0.05, seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    proto = torch.zeros(2, V)
    proto[0, : V // 2] = 1
    proto[1, V // 2 :] = 1
    x = proto[torch.randint(0, 2, (n,), generator=g)]
    noise = (torch.rand(n, V, generator=g) < flip).float()
    return (x + noise) % 2


def exact_mean_ll(m: BernoulliRBM, x: torch.Tensor) -> float:
    md = m.double()
    with torch.no_grad():
        out = float((md.log_prob(x.double()) - md.exact_log_partition()).mean())
    m.float()
    return out


def cd(**kw) -> CD:
    """conf/learner/cd.yaml with ``kw`` merged in."""
    return from_conf("learner/cd", **kw)


def test_cd_training_increases_likelihood():
    x = two_mode_data()
    m = rbm(10, 4, init_std=0.01, init_seed=1)
    m.init_visible_bias_from_data(x.mean(0))
    ll0, rec0 = exact_mean_ll(m, x), reconstruction_error(m, x)
    hist = cd(k=1, n_epochs=10, batch_size=40, lr=0.1).train(m, x, "static", progress=False)
    assert len(hist) == 10 * 10 and all(np.isfinite(hist))
    ll1, rec1 = exact_mean_ll(m, x), reconstruction_error(m, x)
    # independent-pixel start is about -6.9 nats; the two-mode data allow about -2.7
    assert ll1 > ll0 + 2.0, (ll0, ll1)
    assert rec1 < 0.5 * rec0, (rec0, rec1)


def test_cd_options_and_errors():
    x = two_mode_data(n=60)
    m = rbm(10, 3)
    hist = cd(k=2, n_iters=7, batch_size=25).train(m, x, "static", progress=False)
    assert len(hist) == 7  # wraps over epochs of 2 batches
    assert torch.allclose(m.b.detach(), torch.logit(x.mean(0).clamp(0.01, 0.99)), atol=0.05)
    for kw in {"k": 0}, {"lr": 0.0}, {"n_iters": -1}, {"batch_size": 0}:
        with pytest.raises(ConfigError):
            cd(**kw)
    with pytest.raises(ConfigError):
        cd(n_iters=5).train(m, x, "x", progress=False)
    with pytest.raises(ConfigError) as e:
        cd(n_iters=1).train(rbm(9, 2), x, "static", progress=False)
    assert e.value.key == "model.n_visible"
    xn = x.clone()
    xn[0, 0] = float("nan")
    with pytest.raises(DivergenceError, match="step 1"):
        cd(n_iters=3, batch_size=60, init_visible_bias=False).train(
            rbm(10, 2), xn, "static", progress=False
        )


def test_cd_learner_protocol_and_resume(gen):
    """setup / step / state_dict: a learner restored mid-epoch continues the same sequence."""
    x = two_mode_data(n=60)
    learner, m = cd(k=1, n_iters=0, n_epochs=3, batch_size=25), rbm(10, 3)
    assert not learner.needs_sampler
    learner.setup(m, x, gen)
    assert learner.n_steps == 3 * 2
    for _ in range(3):  # into the second epoch
        learner.step(m, gen)
    other, m2 = cd(k=1, n_iters=0, n_epochs=3, batch_size=25), rbm(10, 3)
    other.setup(m2, x, torch.Generator())  # as on resume: build, then load the states
    m2.load_state_dict(m.state_dict())
    other.load_state_dict(copy.deepcopy(learner.state_dict()))  # as a checkpoint would
    g1, g2 = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    for _ in range(3):
        a, b = learner.step(m, g1), other.step(m2, g2)
        assert torch.equal(a["cd_objective"], b["cd_objective"])
    assert other.iteration == 6


def test_cd_negatives_are_one_runner_block_equal_to_the_hand_loop(gen, monkeypatch):
    """CD-k's k sweeps are one ChainRunner.run(k) block of block Gibbs (issue 44), with the
    draws of the old hand loop ``model.gibbs``: the same negatives, objective and weights."""
    from ebmlab.core.chain import ChainRunner

    blocks = []
    run = ChainRunner.run

    def spy(self, n, record=None):
        blocks.append((type(self.kernel).__name__, n))
        return run(self, n, record)

    monkeypatch.setattr(ChainRunner, "run", spy)
    x, k = two_mode_data(n=60), 3
    learner, m = cd(k=k, n_iters=4, batch_size=20, lr=0.05), rbm(10, 3, init_seed=2)
    ref, m_ref = cd(k=k, n_iters=4, batch_size=20, lr=0.05), rbm(10, 3, init_seed=2)
    learner.setup(m, x, gen)
    ref.setup(m_ref, x, torch.Generator())
    opt = torch.optim.Adam(m_ref.parameters(), lr=0.05)
    for it in range(4):
        batch = x[20 * (it % 3) : 20 * (it % 3 + 1)]
        g, g_ref = torch.Generator().manual_seed(it), torch.Generator().manual_seed(it)
        out = learner.update(m, batch, g)
        x_neg = m_ref.gibbs(batch, k, g_ref)  # the old hand loop
        obj = m_ref.log_prob(batch).mean() - m_ref.log_prob(x_neg).mean()
        opt.zero_grad(set_to_none=True)
        (-obj).backward()
        opt.step()
        assert torch.equal(out["cd_objective"], obj.detach())
        assert torch.equal(g.get_state(), g_ref.get_state())  # the same number of draws
        for a, b in zip(m.parameters(), m_ref.parameters(), strict=True):
            assert torch.equal(a, b)
    assert blocks == [("BlockGibbs", k)] * 4
    (runner,) = (r for _, r in learner.chains.runners.values())
    assert runner.steps == 4 * k and runner.model is m


def test_cd_dynamic_binarisation():
    gray = torch.full((50, 6), 0.3)
    m = rbm(6, 2)
    cd(k=1, n_iters=3, batch_size=10).train(m, gray, "dynamic", progress=False)
    assert torch.allclose(m.b.detach(), torch.logit(torch.tensor(0.3)).expand(6), atol=0.01)


def test_cached_rbm_roundtrip(tmp_path):
    calls = []
    cfg = {"n_visible": 10, "n_hidden": 3, "k": 1, "n_iters": 5, "seed": 0, "data": "toy"}

    def train():
        calls.append(1)
        m = rbm(10, 3)
        cd(k=1, n_iters=5, batch_size=10).train(m, two_mode_data(n=50), "static", progress=False)
        return m

    a, cached = cached_rbm(cfg, train, tmp_path)
    path = tmp_path / f"rbm-{config_hash(cfg)}.pt"
    assert path.is_file() and not cached and len(calls) == 1
    assert list(tmp_path.glob("*.tmp")) == []
    b, cached = cached_rbm(dict(reversed(list(cfg.items()))), train, tmp_path)  # key order
    assert cached and len(calls) == 1
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k])
    blob = torch.load(path, weights_only=True)
    assert blob["n_hidden"] == 3 and '"k": 1' in blob["config"]
    _, cached = cached_rbm({**cfg, "k": 2}, train, tmp_path)
    assert not cached and len(calls) == 2 and len(list(tmp_path.glob("*.pt"))) == 2
