"""Basic behaviour of Gibbs / GWG / DMALA / DULA: arguments, evaluation counts, caches, configs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from ebmlab.errors import ConfigError
from ebmlab.models.base import EnergyModel
from ebmlab.samplers.base import mh_accept, value_and_grad
from ebmlab.samplers.dlp import DMALA, DULA
from ebmlab.samplers.gibbs import RandomScanGibbs, SweepGibbs
from ebmlab.samplers.gwg import GWG
from tests.exactness import frustrated_ising, ordinal_target, random_init, strong_rbm

CONF = Path(__file__).resolve().parents[2] / "conf" / "sampler"


class Counting(EnergyModel):
    """Wraps a model and counts log_prob calls: forwards, rows, and calls that need a gradient."""

    def __init__(self, inner: EnergyModel):
        super().__init__()
        self.inner = inner
        self.dim, self.state_kind, self.n_states = inner.dim, inner.state_kind, inner.n_states
        self.calls = self.rows = self.grad_calls = 0

    def log_prob(self, x):
        self.calls += 1
        self.rows += x.shape[0]
        self.grad_calls += int(x.requires_grad)
        return self.inner.log_prob(x)


class Image(EnergyModel):
    """The RBM target on x of shape [chains, 1, 2, 4] (non-flat state)."""

    def __init__(self):
        super().__init__()
        self.inner = strong_rbm()
        self.dim = 8

    def log_prob(self, x):
        return self.inner.log_prob(x.reshape(x.shape[0], -1))


ALL = [RandomScanGibbs(), SweepGibbs(), GWG(1), GWG(3), DMALA(0.3, None), DULA(0.2, None)]
IDS = ["gibbs", "sweep", "gwg1", "gwg3", "dmala", "dula"]


# ------------------------------------------------------------------ arguments


@pytest.mark.parametrize("bad", [0.0, -0.1, float("nan"), float("inf"), True, "0.2"])
@pytest.mark.parametrize("cls", [DMALA, DULA])
def test_step_size_validated(cls, bad):
    with pytest.raises(ConfigError) as e:
        cls(step_size=bad, precond=None)
    assert e.value.key == "step_size"


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_n_flips_validated(bad):
    with pytest.raises(ConfigError) as e:
        GWG(n_flips=bad)
    assert e.value.key == "n_flips"


@pytest.mark.parametrize("bad", [[1.0, -1.0], [0.0], [], ["a"], 3.0])
def test_precond_validated(bad):
    with pytest.raises(ConfigError) as e:
        DMALA(0.2, precond=bad)
    assert e.value.key == "precond"


def test_precond_length_checked_against_model(gen):
    m = strong_rbm()
    s = DMALA(0.2, precond=[1.0, 2.0])
    st = s.init(m, random_init(m, 4, gen))
    with pytest.raises(ConfigError, match="one entry per model coordinate"):
        s.step(m, st, gen)


def test_constant_precond_equals_rescaled_step_size(gen):
    """DLP App. H: g_i = c for all i is the plain proposal with alpha c^2."""
    m = ordinal_target()
    x = random_init(m, 16, gen)
    y = random_init(m, 16, gen)
    _, g = value_and_grad(m, x)
    a = DMALA(0.1, precond=[2.0] * m.dim).log_proposal(m, x, g, y)
    b = DMALA(0.4, None).log_proposal(m, x, g, y)
    torch.testing.assert_close(a, b)


def test_gwg_rejects_ordinal(gen):
    m = ordinal_target()
    s = GWG(1)
    with pytest.raises(ValueError, match="binary"):
        s.step(m, s.init(m, random_init(m, 4, gen)), gen)


# ------------------------------------------------------------------ evaluation counts


@pytest.mark.parametrize(
    "sampler",
    [GWG(1), GWG(4), DMALA(0.2, None), DULA(0.1, None)],
    ids=["gwg1", "gwg4", "dmala", "dula"],
)
def test_gradient_samplers_cost_one_forward_one_backward(sampler, gen):
    m = Counting(frustrated_ising())
    n = 32
    st = sampler.init(m, random_init(m, n, gen))
    assert (m.calls, m.grad_calls) == sampler.init_cost()
    for _ in range(5):
        m.calls = m.rows = m.grad_calls = 0
        st, info = sampler.step(m, st, gen)
        assert (m.calls, m.grad_calls, m.rows) == (1, 1, n)
        assert (info.n_log_prob, info.n_grad) == (1, 1)


def test_analytic_gradient_model_is_used(gen):
    """With log_prob_and_grad (LatticeIsing) no autograd call happens; GWG-1 uses the
    model's single-flip update instead of a full evaluation."""
    from ebmlab.models.ising import LatticeIsing

    class Spy(LatticeIsing):
        n_lpg = n_lp = n_flip = 0

        def log_prob_and_grad(self, x):
            self.n_lpg += 1
            return super().log_prob_and_grad(x)

        def log_prob(self, x):
            self.n_lp += 1
            return super().log_prob(x)

        def flip_update(self, y, idx, cache, with_grad):
            self.n_flip += 1
            return super().flip_update(y, idx, cache, with_grad)

    m = Spy(n_side=4, sigma=0.3, bias=0.1)
    for s, calls in ((GWG(1), (0, 0, 3)), (GWG(2), (3, 0, 0)), (DMALA(0.3, None), (3, 0, 0))):
        st = s.init(m, random_init(m, 8, gen))
        m.n_lpg = m.n_lp = m.n_flip = 0
        for _ in range(3):
            st, info = s.step(m, st, gen)
            assert (info.n_log_prob, info.n_grad) == (1, 1)
        assert (m.n_lpg, m.n_lp, m.n_flip) == calls


def test_gibbs_counts(gen):
    m = Counting(frustrated_ising())
    st = RandomScanGibbs().init(m, random_init(m, 16, gen))
    m.calls = m.rows = m.grad_calls = 0
    st, info = RandomScanGibbs().step(m, st, gen)
    assert (m.calls, m.rows, m.grad_calls, info.n_log_prob, info.n_grad) == (1, 16, 0, 1, 0)
    m.calls = m.rows = 0
    st, info = SweepGibbs().step(m, st, gen)
    assert (m.calls, m.rows, info.n_log_prob) == (m.dim, 16 * m.dim, m.dim)
    o = Counting(ordinal_target())
    st = RandomScanGibbs().init(o, random_init(o, 16, gen))
    o.calls = o.rows = 0
    st, info = RandomScanGibbs().step(o, st, gen)
    # the S-1 alternatives in ONE batched call
    assert (o.calls, o.rows, info.n_log_prob) == (1, 16 * 4, 4)


# ------------------------------------------------------------------ caches and info


@pytest.mark.parametrize("sampler", ALL, ids=IDS)
def test_cache_jump_and_domain(sampler, gen):
    m = strong_rbm()
    st = sampler.init(m, random_init(m, 64, gen))
    for _ in range(10):
        x_old = st.x
        st, info = sampler.step(m, st, gen)
        assert set(st.x.unique().tolist()) <= {0.0, 1.0}
        torch.testing.assert_close(info.jump.float(), (st.x != x_old).sum(-1).float())
        assert info.accepted.dtype == torch.bool
        assert ((info.accept_prob >= 0) & (info.accept_prob <= 1)).all()
        unmoved = ~info.accepted
        assert torch.equal(st.x[unmoved], x_old[unmoved])
    torch.testing.assert_close(st.log_prob, m.log_prob(st.x).detach())
    if sampler.needs_grad:
        torch.testing.assert_close(st.grad, value_and_grad(m, st.x)[1])


@pytest.mark.parametrize(
    "sampler",
    [RandomScanGibbs(), DMALA(0.5, None), DULA(0.5, None)],
    ids=["gibbs", "dmala", "dula"],
)
def test_ordinal_domain_and_l1_jump(sampler, gen):
    m = ordinal_target()
    st = sampler.init(m, random_init(m, 64, gen))
    moved = 0
    for _ in range(10):
        x_old = st.x
        st, info = sampler.step(m, st, gen)
        assert st.x.min() >= 0 and st.x.max() <= m.n_states - 1
        assert torch.equal(st.x, st.x.round())
        torch.testing.assert_close(info.jump.float(), (st.x - x_old).abs().sum(-1).float())
        moved += int(info.jump.sum())
    assert moved > 0
    torch.testing.assert_close(st.log_prob, m.log_prob(st.x).detach())


def test_gwg_k_flips_at_most_k(gen):
    m = frustrated_ising()
    s = GWG(3)
    st = s.init(m, random_init(m, 256, gen))
    jumps = []
    for _ in range(10):
        st, info = s.step(m, st, gen)
        jumps.append(info.jump[info.accepted])
    j = torch.cat(jumps)
    assert j.max() <= 3 and j.min() >= 1
    assert (j == 3).any()


def test_dula_always_accepts_and_is_marked_inexact(gen):
    m = strong_rbm()
    s = DULA(0.3, None)
    assert DULA.exact is False and DMALA.exact is True
    st, info = s.step(m, s.init(m, random_init(m, 32, gen)), gen)
    assert info.accepted.all() and torch.all(info.accept_prob == 1)


@pytest.mark.parametrize(
    "sampler", [GWG(2), DMALA(0.3, None), RandomScanGibbs()], ids=["gwg2", "dmala", "gibbs"]
)
def test_non_flat_state(sampler, gen):
    m = Image()
    x0 = random_init(m, 16, gen).reshape(16, 1, 2, 4)
    st = sampler.init(m, x0)
    for _ in range(5):
        st, _ = sampler.step(m, st, gen)
    assert st.x.shape == (16, 1, 2, 4)
    torch.testing.assert_close(st.log_prob, m.log_prob(st.x))


@pytest.mark.parametrize("sampler", ALL, ids=IDS)
def test_deterministic_given_seed(sampler):
    m = frustrated_ising()
    out = []
    for _ in range(2):
        g = torch.Generator().manual_seed(7)
        st = sampler.init(m, random_init(m, 16, g))
        for _ in range(5):
            st, _ = sampler.step(m, st, g)
        out.append(st.x)
    assert torch.equal(out[0], out[1])


def test_dmala_extreme_gradients_are_finite(gen):
    """logsigmoid path: huge gradients must not overflow into NaN acceptance."""

    class Steep(EnergyModel):
        dim = 6

        def log_prob(self, x):
            return 1e4 * (x * torch.arange(1.0, 7.0)).sum(-1)

    m = Steep()
    for s in (DMALA(1e3, None), DULA(1e-3, None), GWG(1)):
        st = s.init(m, random_init(m, 8, gen))
        for _ in range(3):
            st, info = s.step(m, st, gen)
            assert torch.isfinite(info.accept_prob).all()
        assert torch.isfinite(st.log_prob).all()


# ------------------------------------------------------------------ configs


@pytest.mark.parametrize("path", sorted(CONF.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_sampler_declares_its_capabilities(path):
    """state_spaces (checked against the model before any compute), exact, and no code
    default for any hyperparameter (the YAML sets them all)."""
    import inspect

    from hydra.utils import get_object

    from ebmlab.core.protocols import BINARY, CATEGORICAL, CONTINUOUS, ORDINAL

    node = OmegaConf.load(path)
    cls = get_object(node._target_)
    assert cls.state_spaces and set(cls.state_spaces) <= {BINARY, ORDINAL, CATEGORICAL, CONTINUOUS}
    assert isinstance(cls.exact, bool)
    params = inspect.signature(cls.__init__).parameters
    for name, p in params.items():
        if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            assert p.default is inspect.Parameter.empty, f"{name} has a code default"
            assert name in node, f"{path.name} does not set {name}"


@pytest.mark.parametrize("name", ["gibbs", "gibbs_sweep", "gwg", "dmala", "dula"])
def test_configs_instantiate(name):
    from hydra.utils import instantiate

    cfg = OmegaConf.load(CONF / f"{name}.yaml")
    s = instantiate(cfg, _convert_="all")
    expected = {
        "gibbs": RandomScanGibbs,
        "gibbs_sweep": SweepGibbs,
        "gwg": GWG,
        "dmala": DMALA,
        "dula": DULA,
    }[name]
    assert type(s) is expected
    if name in ("dmala", "dula"):
        assert s.step_size == {"dmala": 0.2, "dula": 0.1}[name]
        cfg.precond = [1.0] * 4
        assert instantiate(cfg, _convert_="all").precond == [1.0] * 4


@pytest.mark.parametrize(
    "sampler", [GWG(1), DMALA(0.3, None), DULA(0.3, None)], ids=["gwg", "dmala", "dula"]
)
def test_gradient_sampler_accepts_state_without_grad(sampler, gen):
    """A state from a gradient-free sampler (Gibbs) gets its gradient cache filled, counted."""
    m = strong_rbm()
    st = RandomScanGibbs().init(m, random_init(m, 8, gen))
    st, info = sampler.step(m, st, gen)
    assert (info.n_log_prob, info.n_grad) == (2, 2)
    torch.testing.assert_close(st.grad, value_and_grad(m, st.x)[1])


def test_mh_accept_rejects_undefined_ratios():
    """NaN log-ratios are rejected with probability 0; +inf is accepted, -inf rejected."""
    lr = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -1.0], dtype=torch.float64)
    accepted, prob = mh_accept(lr, torch.Generator().manual_seed(0))
    assert accepted.tolist()[:4] == [False, True, False, True]
    torch.testing.assert_close(prob, torch.tensor([0.0, 1.0, 0.0, 1.0, math.exp(-1.0)]))
