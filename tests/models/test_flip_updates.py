"""Single-flip updates of the RBM and the Ising models (used by GWG-1 and Gibbs-1): the same
log-probability, gradient and cache as a full evaluation, and no drift over many flips."""

from __future__ import annotations

import pytest
import torch

from ebmlab.models.ising import BAIsing, DenseIsing, LatticeIsing
from ebmlab.models.rbm import BernoulliRBM


def _rbm() -> BernoulliRBM:
    m = BernoulliRBM(12, 7, 0.8, 0)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        m.b.copy_(torch.randn(12, generator=g))
        m.c.copy_(torch.randn(7, generator=g))
    return m


def _dense() -> DenseIsing:
    torch.manual_seed(0)
    return DenseIsing(10, 0.5, True)


MODELS = {
    "rbm": _rbm,
    "lattice": lambda: LatticeIsing(4, 0.3, 0.2),
    "ba": lambda: BAIsing(12, 2, 0.4, 0.1, 0),
    "dense": _dense,
}


def _flip(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    rows = torch.arange(x.shape[0])
    y[rows, idx] = 1 - x[rows, idx]
    return y


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_flip_update_matches_full_evaluation(name, dtype):
    m = MODELS[name]().to(dtype)
    g = torch.Generator().manual_seed(2)
    x = torch.randint(0, 2, (16, m.dim), generator=g).to(dtype)
    idx = torch.randint(0, m.dim, (16,), generator=g)
    lp_x, g_x, cache = m.flip_cache(x, True)
    lp_ref, g_ref = m.log_prob_and_grad(x)
    assert cache.dtype == torch.float64
    torch.testing.assert_close(lp_x, lp_ref, rtol=0, atol=0)
    torch.testing.assert_close(g_x, g_ref, rtol=0, atol=0)
    y = _flip(x, idx)
    lp_y, g_y, cache_y = m.flip_update(y, idx, cache, True)
    lp_full, g_full = m.log_prob_and_grad(y)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(lp_y, lp_full, rtol=tol, atol=tol)
    torch.testing.assert_close(g_y, g_full, rtol=tol, atol=tol)
    torch.testing.assert_close(cache_y, m.flip_cache(y, False)[2], rtol=tol, atol=tol)
    lp_only, none, _ = m.flip_update(y, idx, cache, False)
    assert none is None and torch.equal(lp_only, lp_y)
    # a flip that changes nothing is not a flip: the update really moves the state
    assert not torch.allclose(lp_y, lp_x)


@pytest.mark.parametrize("name", ["rbm", "lattice"])
def test_no_drift_over_many_flips(name):
    """5000 successive flips from the cache agree with a fresh evaluation to float64 rounding."""
    m = MODELS[name]().double()
    g = torch.Generator().manual_seed(3)
    x = torch.randint(0, 2, (4, m.dim), generator=g).double()
    _, _, cache = m.flip_cache(x, False)
    for _ in range(5000):
        idx = torch.randint(0, m.dim, (4,), generator=g)
        x = _flip(x, idx)
        lp, _, cache = m.flip_update(x, idx, cache, False)
    torch.testing.assert_close(cache, m.flip_cache(x, False)[2], rtol=0, atol=1e-11)
    torch.testing.assert_close(lp, m.log_prob(x), rtol=0, atol=1e-10)


def test_flip_tag_follows_parameter_updates():
    m = _rbm()
    tag = m.flip_tag()
    assert m.flip_tag() == tag
    with torch.no_grad():
        m.W.add_(0.1)
    assert m.flip_tag() != tag
    ising = LatticeIsing(3, 0.2, 0.0)
    t = ising.flip_tag()
    ising.J.mul_(2.0)
    assert ising.flip_tag() != t


# -- flip_deltas: the neighbour terms of ratio matching --------------------------------------------
def _asymmetric_dense() -> DenseIsing:
    """J_raw asymmetric with a non-zero diagonal, as it is inside an optimiser step."""
    m = _dense()
    with torch.no_grad():
        m.J_raw.add_(0.3 * torch.randn(10, 10, generator=torch.Generator().manual_seed(4)))
        m.bias.copy_(torch.randn(10, generator=torch.Generator().manual_seed(5)))
    return m


def _mlp():
    from ebmlab.models.mlp_energy import MLPEnergy

    torch.manual_seed(3)
    return MLPEnergy(10, 16, 2, True).double()


STRUCTURED = {
    "lattice": lambda: LatticeIsing(4, 0.3, 0.2),
    "dense": _asymmetric_dense,
    "mlp": _mlp,
}


@pytest.mark.parametrize("name", sorted(STRUCTURED))
@pytest.mark.parametrize("sampled", [False, True])
def test_structured_flip_deltas_equal_the_generic_batch(name, sampled):
    """The models' closed forms (Ising: one [n, d] x [d, d] product; MLP: the first layer's
    linearity) give the generic batch's values AND parameter gradients, for every bit and
    for drawn indices."""
    from ebmlab.models.base import EnergyModel

    model = STRUCTURED[name]()
    dtype = next(model.parameters(), torch.zeros((), dtype=torch.float32)).dtype
    d = model.dim
    g = torch.Generator().manual_seed(7)
    x = torch.randint(0, 2, (6, d), generator=g).to(dtype)
    idx = torch.randint(0, d, (6, 4), generator=g) if sampled else None
    weights = torch.randn(6, 4 if sampled else d, generator=g).to(dtype)

    def value_and_grads(fn):
        out = fn(model, x, idx)
        params = [p for p in model.parameters() if p.requires_grad]
        grads = torch.autograd.grad((weights * out).sum(), params) if params else []
        return out.detach(), grads

    fast, fast_g = value_and_grads(type(model).flip_deltas)
    slow, slow_g = value_and_grads(EnergyModel.flip_deltas)
    assert type(model).flip_deltas is not EnergyModel.flip_deltas
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    assert torch.allclose(fast, slow, atol=tol, rtol=tol)
    for a, b in zip(fast_g, slow_g):
        assert torch.allclose(a, b, atol=tol, rtol=tol)
