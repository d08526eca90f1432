"""What a step caches for the next one (ChainState.aux) changes no result: the Langevin
kernels' reverse terms, GWG's index log-probabilities and the models' single-flip updates
(GWG-1, Gibbs-1) give the chains the generic code gives, and stay exact."""

from __future__ import annotations

import pytest
import torch

from ebmlab.models.ising import LatticeIsing
from ebmlab.models.rbm import BernoulliRBM
from ebmlab.samplers import proposals
from ebmlab.samplers.ab import AB1stKernel
from ebmlab.samplers.acs import ACSKernel
from ebmlab.samplers.dlp import DMALA
from ebmlab.samplers.gibbs import RandomScanGibbs, SweepGibbs
from ebmlab.samplers.gwg import GWG
from tests.exactness import assert_exact, frustrated_ising, random_init, strong_rbm


def _run(sampler, model, x0, n_steps, seed, drop_aux=False):
    gen = torch.Generator().manual_seed(seed)
    st = sampler.init(model, x0)
    out = []
    for _ in range(n_steps):
        if drop_aux:
            st = st.replace(aux={})
        st, info = sampler.step(model, st, gen)
        out.append((st.x.clone(), st.log_prob.clone(), info.accepted.clone()))
    return st, out


def _same(a, b):
    return all(torch.equal(u, v) for ra, rb in zip(a, b) for u, v in zip(ra, rb))


@pytest.mark.parametrize(
    "sampler",
    [
        DMALA(0.4, None),
        AB1stKernel(sigma=0.7, alpha=0.6),
        ACSKernel(alpha=1.5, beta=0.75, mh=True, state_kind="auto"),
        GWG(1),
        GWG(3),
    ],
    ids=["dmala", "ab1st", "acs", "gwg1", "gwg3"],
)
@pytest.mark.parametrize("make", [strong_rbm, frustrated_ising], ids=["rbm", "ising"])
def test_cached_terms_change_nothing(sampler, make):
    """Bit-identical chains with the aux cache and with it dropped before every step."""
    model = make()
    x0 = random_init(model, 64, torch.Generator().manual_seed(0))
    st, cached = _run(sampler, model, x0, 30, seed=1)
    _, fresh = _run(sampler, model, x0, 30, seed=1, drop_aux=True)
    assert _same(cached, fresh)
    assert any(not torch.equal(a[0], b[0]) for a, b in zip(cached, cached[1:]))  # chains move
    name = "gwg" if isinstance(sampler, GWG) else "langevin"
    assert name in st.aux  # the cache was kept across steps


def test_cached_langevin_terms_are_those_of_the_state():
    """After a run, the cached flip logits are the ones recomputed at the state's (x, grad)."""
    model = strong_rbm()
    s = DMALA(0.4, None)
    st, _ = _run(s, model, random_init(model, 64, torch.Generator().manual_seed(0)), 10, 2)
    p = s.proposal(model.dim, st.x.device, st.x.dtype)
    _, (a, norm) = st.aux["langevin"]
    a_ref = proposals.flip_logits(st.x, st.grad.to(st.x.dtype), p)
    assert torch.equal(a, a_ref)
    assert torch.equal(norm, proposals.flip_norm(a_ref))


class _NoFlips(torch.nn.Module):
    """The same model without its single-flip methods (the generic code path)."""

    def __init__(self, model):
        super().__init__()
        self.inner = model
        self.dim, self.state_kind, self.n_states = model.dim, model.state_kind, 2

    def log_prob(self, x):
        return self.inner.log_prob(x)

    def log_prob_and_grad(self, x):
        return self.inner.log_prob_and_grad(x)


def _ebm_rbm() -> BernoulliRBM:
    ref = strong_rbm()
    m = BernoulliRBM(ref.dim, ref.W.shape[0], 1.0, 0)
    with torch.no_grad():
        m.W.copy_(ref.W)
        m.b.copy_(ref.b)
        m.c.copy_(ref.c)
    m.requires_grad_(False)
    return m


FLIP_MODELS = {"rbm": _ebm_rbm, "lattice": lambda: LatticeIsing(3, 0.1, 0.2)}


@pytest.mark.parametrize(
    "sampler", [GWG(1), RandomScanGibbs(), SweepGibbs()], ids=["gwg1", "gibbs", "sweep"]
)
@pytest.mark.parametrize("name", list(FLIP_MODELS))
def test_flip_updates_follow_the_generic_chain(sampler, name):
    """float64: the single-flip path takes the generic path's moves, log_probs to rounding."""
    model = FLIP_MODELS[name]().double()
    x0 = random_init(model, 32, torch.Generator().manual_seed(0)).double()
    st, fast = _run(sampler, model, x0, 40, seed=3)
    _, slow = _run(sampler, _NoFlips(model), x0, 40, seed=3)
    assert "flip" in st.aux
    for (xa, la, aa), (xb, lb, ab) in zip(fast, slow):
        assert torch.equal(xa, xb) and torch.equal(aa, ab)
        torch.testing.assert_close(la, lb, rtol=0, atol=1e-10)
    torch.testing.assert_close(st.log_prob, model.log_prob(st.x), rtol=0, atol=1e-10)


@pytest.mark.parametrize(
    "name,sampler,n_chains,n_steps",
    [
        ("rbm", GWG(1), 10000, 50),
        ("lattice", GWG(1), 10000, 50),
        ("rbm", RandomScanGibbs(), 10000, 120),
        ("lattice", RandomScanGibbs(), 10000, 120),
    ],
    ids=["rbm-gwg1", "lattice-gwg1", "rbm-gibbs", "lattice-gibbs"],
)
def test_flip_update_chains_are_exact(name, sampler, n_chains, n_steps):
    assert_exact(sampler, FLIP_MODELS[name](), n_chains=n_chains, n_steps=n_steps, seed=1)


def test_flip_cache_is_rebuilt_when_parameters_change():
    """A parameter update invalidates the cache: the next step re-evaluates (and says so)."""
    model = FLIP_MODELS["rbm"]().double()
    gen = torch.Generator().manual_seed(0)
    x0 = random_init(model, 16, gen).double()
    s = GWG(1)
    st = s.init(model, x0)
    st, info = s.step(model, st, gen)
    assert (info.n_log_prob, info.n_grad) == (1, 1)
    with torch.no_grad():
        model.W.mul_(0.5)
    st, info = s.step(model, st, gen)
    assert (info.n_log_prob, info.n_grad) == (2, 2)
    lp, g = model.log_prob_and_grad(st.x)
    torch.testing.assert_close(st.log_prob, lp, rtol=0, atol=1e-10)
    torch.testing.assert_close(st.grad, g, rtol=0, atol=1e-10)
    gibbs = RandomScanGibbs()
    st = gibbs.init(model, x0)
    with torch.no_grad():
        model.c.add_(0.3)
    st, info = gibbs.step(model, st, gen)
    assert info.n_log_prob == 2
    torch.testing.assert_close(st.log_prob, model.log_prob(st.x), rtol=0, atol=1e-10)


def test_checkpointed_flip_cache_resumes_exactly_and_is_checked():
    """A state restored from a checkpoint continues bit for bit, at no extra evaluation, when
    its flip cache agrees with the model; a cache that does not (parameters changed) is
    rebuilt and the rebuild is counted."""
    model = FLIP_MODELS["rbm"]()
    gen = torch.Generator().manual_seed(0)
    s = GWG(1)
    st = s.init(model, random_init(model, 16, gen))
    for _ in range(30):
        st, _ = s.step(model, st, gen)
    saved, state_gen = st.state_dict(), gen.get_state()
    assert "flip_cache" in saved
    cont = [s.step(model, st, gen) for _ in range(1)][0]
    gen.set_state(state_gen)
    resumed, info = s.step(model, st.restored(saved), gen)
    assert info.n_log_prob == 1 and torch.equal(resumed.x, cont[0].x)
    assert torch.equal(resumed.log_prob, cont[0].log_prob)
    with torch.no_grad():
        model.W.mul_(0.5)
    _, info = s.step(model, st.restored(saved), gen)
    assert info.n_log_prob == 2  # the stale cache was detected and rebuilt
