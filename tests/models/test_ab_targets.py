"""AB paper sampling targets: shapes, log_prob vs direct formulas, analytic gradients vs
autograd, condition numbers of the lattice-Gaussian precisions, data generation."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from ebmlab.errors import ConfigError
from ebmlab.models.ab_targets import CONDITIONS
from tests.helpers import from_conf

CONF = Path(__file__).resolve().parents[2] / "conf" / "model"


def lattice_gaussian(**kw):
    return from_conf("model/lattice_gaussian", **kw)


def blr(**kw):
    return from_conf("model/blr", **kw)


def qmm(**kw):
    return from_conf("model/quartic_mixture", **kw)


def _ordinal(model, n, gen):
    return torch.randint(0, model.n_states, (n, model.dim), generator=gen).double()


def _autograd(model, x):
    x = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(model.log_prob(x).sum(), x)
    return g


# ------------------------------------------------------------------ lattice Gaussians


@pytest.mark.parametrize("condition", ["low", "medium", "high"])
def test_rotated_precision_has_condition_L(condition):
    m = lattice_gaussian(structure="rotated", condition=condition).double()
    A = m.precision()
    assert A.shape == (100, 100) and torch.allclose(A, A.T)
    ev = torch.linalg.eigvalsh(A)
    L = CONDITIONS[condition]
    assert ev.min() == pytest.approx(1.0, rel=1e-5) and ev.max() == pytest.approx(L, rel=1e-5)
    assert float(ev.max() / ev.min()) == pytest.approx(L, rel=1e-5)
    assert torch.all(m.b == 10.0)  # centre of {0..20}


@pytest.mark.parametrize("condition", ["low", "medium", "high"])
def test_sparse_precision_is_a_scaled_cycle(condition):
    m = lattice_gaussian(structure="sparse", condition=condition).double()
    A = m.precision()
    L = CONDITIONS[condition]
    d = 100
    # diagonal Lambda_ii^2 = 1 + (i-1)(L-1)/99 (M_ii = 1); non-zeros only on the cycle
    assert torch.allclose(torch.diagonal(A), 1 + torch.arange(d).double() * (L - 1) / (d - 1))
    i = torch.arange(d)
    support = torch.zeros(d, d, dtype=torch.bool)
    support[i, i] = support[i, (i + 1) % d] = support[(i + 1) % d, i] = True
    assert torch.all(A[~support] == 0) and torch.all(A[support] != 0)
    # M = Lambda^-1 A Lambda^-1 has off-diagonals ~ N(0, 0.04) and is positive definite
    lam = torch.sqrt(torch.diagonal(A))
    M = A / lam[:, None] / lam[None, :]
    off = M[i, (i + 1) % d]
    assert 0.15 < float(off.std()) < 0.25
    ev_m = torch.linalg.eigvalsh(M)
    assert ev_m.min() > 0
    # cond(A) is L up to the conditioning of M: L / cond(M) <= cond(A) <= L cond(M)
    ev = torch.linalg.eigvalsh(A)
    kappa, kappa_m = float(ev.max() / ev.min()), float(ev_m.max() / ev_m.min())
    assert L / kappa_m <= kappa <= L * kappa_m
    assert torch.all(m.b == 0.0)  # App. B.3: bias vector b = 0


def test_condition_ordering_and_numeric_condition():
    k = []
    for c in ["low", "medium", "high"]:
        ev = torch.linalg.eigvalsh(
            lattice_gaussian(structure="sparse", condition=c).double().precision()
        )
        k.append(float(ev.max() / ev.min()))
    assert k[0] < k[1] < k[2]
    ev = torch.linalg.eigvalsh(
        lattice_gaussian(structure="rotated", condition=7.0, dim=20).double().precision()
    )
    assert float(ev.max() / ev.min()) == pytest.approx(7.0, rel=1e-6)


@pytest.mark.parametrize("structure", ["rotated", "sparse"])
def test_lattice_gaussian_log_prob_and_grad(structure, gen):
    m = lattice_gaussian(structure=structure, condition="medium", center=4.5).double()
    x = _ordinal(m, 7, gen)
    lp = m.log_prob(x)
    assert lp.shape == (7,)
    z = x - 4.5
    direct = torch.stack([-0.5 * zi @ m.A @ zi for zi in z])
    assert torch.allclose(lp, direct)
    lp2, g = m.log_prob_and_grad(x)
    assert torch.allclose(lp2, lp) and torch.allclose(g, _autograd(m, x))
    assert m.state_kind == "ordinal" and m.n_states == 21 and m.dim == 100


def test_lattice_gaussian_is_seeded():
    a, b = lattice_gaussian(seed=3), lattice_gaussian(seed=3)
    assert torch.equal(a.A, b.A)
    assert not torch.equal(a.A, lattice_gaussian(seed=4).A)


# ------------------------------------------------------------------ Bayesian logistic regression


def test_blr_data_and_log_prob(gen):
    m = blr().double()
    assert m.X.shape == (50, 100) and m.y.shape == (50,) and m.dim == 100
    assert m.state_kind == "binary"
    assert torch.equal(m.beta_true, (torch.arange(100) < 7).double())
    assert set(m.y.unique().tolist()) <= {0.0, 1.0}
    x = torch.randint(0, 2, (6, 100), generator=gen).double()
    lp = m.log_prob(x)
    # Eq. 22 literally: -sum y log(1 + e^-v) + (1 - y) log(1 + e^v)
    v = x @ m.X.T
    direct = -(m.y * torch.log1p(torch.exp(-v)) + (1 - m.y) * torch.log1p(torch.exp(v))).sum(-1)
    assert torch.allclose(lp, direct)
    lp2, g = m.log_prob_and_grad(x)
    assert torch.allclose(lp2, lp) and torch.allclose(g, _autograd(m, x))


def test_blr_design_covariance():
    """Rows X_i ~ N(0, 0.25 Lambda Sigma Lambda): check on a large draw."""
    m = blr(n_data=20000, seed=1).double()
    d = 100
    lam = torch.exp(-0.25 + torch.arange(d).double() / (d - 1))
    sigma = torch.full((d, d), 0.25, dtype=torch.float64) + torch.eye(d, dtype=torch.float64)
    cov = 0.25 * lam[:, None] * sigma * lam[None, :]
    emp = m.X.T @ m.X / m.X.shape[0]
    # sd of an empirical covariance entry <= sqrt(2 / n) * max variance
    tol = 5 * math.sqrt(2 / 20000) * float(cov.diagonal().max())
    assert float((emp - cov).abs().max()) < tol


def test_blr_posterior_prefers_the_truth():
    m = blr()
    zeros = torch.zeros(1, 100)
    assert float(m.log_prob(m.beta_true[None])) > float(m.log_prob(zeros))


# ------------------------------------------------------------------ quartic mixture


def test_qmm_log_prob_and_grad(gen):
    m = qmm().double()
    assert m.dim == 50 and m.n_states == 21 and m.n_components == 50
    assert torch.allclose(m.P @ m.P.T, torch.eye(50, dtype=torch.float64), atol=1e-6)
    s = 20 * torch.exp(-0.5 + torch.arange(50).double() / 49)
    assert torch.allclose(m.s, s)
    # near the diagonal of the box (where the mass is) and random points
    x = torch.cat([torch.full((3, 50), 7.0), torch.full((1, 50), 13.0), _ordinal(m, 3, gen)])
    x[:3, :3] += 1
    lp = m.log_prob(x)
    assert lp.shape == (7,)
    xt = x / 20
    direct = []
    for xi in xt:
        polys = torch.stack(
            [((s * (m.P @ (xi - k / 49))) ** 4).sum() for k in range(50)]  # b_k = (k-1)/49 1
        )
        direct.append(torch.logsumexp(-polys, 0))
    assert torch.allclose(lp, torch.stack(direct))
    lp2, g = m.log_prob_and_grad(x)
    assert torch.allclose(lp2, lp) and torch.allclose(g, _autograd(m, x), rtol=1e-8, atol=1e-8)
    assert float(lp[:4].min()) > float(lp[4:].max())  # the diagonal carries the mass


# ------------------------------------------------------------------ configs


@pytest.mark.parametrize(
    "make,key",
    [
        (lambda: lattice_gaussian(structure="dense"), "structure"),
        (lambda: lattice_gaussian(condition="extreme"), "condition"),
        (lambda: lattice_gaussian(condition=0.5), "condition"),
        (lambda: lattice_gaussian(n_states=1), "n_states"),
        (lambda: lattice_gaussian(center=float("inf")), "center"),
        (lambda: blr(n_active=101), "n_active"),
        (lambda: qmm(scale=-1.0), "scale"),
        (lambda: qmm(n_components=0), "n_components"),
    ],
)
def test_bad_arguments_raise_config_error(make, key):
    with pytest.raises(ConfigError) as e:
        make()
    assert e.value.key == f"model.{key}" and "got" in e.value.message


@pytest.mark.parametrize(
    "name,dim,kind",
    [
        ("lattice_gaussian", 100, "ordinal"),
        ("blr", 100, "binary"),
        ("quartic_mixture", 50, "ordinal"),
    ],
)
def test_model_yaml_instantiates(name, dim, kind, gen):
    m = instantiate(OmegaConf.load(CONF / f"{name}.yaml"))
    assert m.dim == dim and m.state_kind == kind
    S = 2 if kind == "binary" else m.n_states
    x = torch.randint(0, S, (3, dim), generator=gen).float()
    assert torch.isfinite(m.log_prob(x)).all()
