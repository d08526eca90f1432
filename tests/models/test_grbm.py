"""GRBM model: energies, conditionals, analytic gradients, exact partition function."""

import math

import pytest
import torch

from ebmlab.data.gmm_toy import gmm_toy, gmm_toy_log_prob
from ebmlab.errors import ConfigError
from ebmlab.models.grbm import GRBM, all_binary
from tests.helpers import from_conf

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny(d=3, h=4, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    m = from_conf("model/grbm", n_visible=d, n_hidden=h).to(dtype)
    with torch.no_grad():
        m.W.copy_(torch.randn(d, h, generator=g, dtype=dtype))
        m.b.copy_(torch.randn(h, generator=g, dtype=dtype))
        m.mu.copy_(torch.randn(d, generator=g, dtype=dtype))
        m.log_var.copy_(0.5 * torch.randn(d, generator=g, dtype=dtype))
    return m


def test_init_and_validation():
    m = from_conf("model/grbm", n_visible=784, n_hidden=216)
    assert m.state_kind == "continuous" and m.dim == 784
    assert abs(m.W.std().item() - 1 / math.sqrt(1000)) < 2e-3
    assert torch.all(m.b == 0) and torch.all(m.mu == 0) and torch.all(m.log_var == 0)
    with pytest.raises(ConfigError, match="n_hidden"):
        GRBM(2, 0, None, 1.0)
    with pytest.raises(ConfigError, match="init_var"):
        GRBM(2, 3, None, init_var=-1.0)


def test_free_energy_is_log_sum_over_h():
    m = tiny()
    v = torch.randn(7, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    hs = all_binary(4, dtype=torch.float64)
    e = m.energy_joint(v.repeat_interleave(16, 0), hs.repeat(7, 1)).view(7, 16)
    expected = -torch.logsumexp(-e, 1)
    torch.testing.assert_close(m.free_energy(v), expected)
    torch.testing.assert_close(m.log_prob(v), -expected)


def test_energy_matches_eq1_literally():
    m = tiny()
    v = torch.randn(5, 3, dtype=torch.float64)
    h = (torch.rand(5, 4) < 0.5).double()
    var = m.log_var.exp()
    e = 0.5 * (((v - m.mu) / var.sqrt()) ** 2).sum(1) - ((v / var) @ m.W * h).sum(1) - h @ m.b
    torch.testing.assert_close(m.energy_joint(v, h), e)


def test_log_prob_grad_matches_autograd():
    m = tiny()
    v = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    (g_auto,) = torch.autograd.grad(m.log_prob(v).sum(), v)
    lp, g = m.log_prob_and_grad(v.detach())
    torch.testing.assert_close(g, g_auto)
    torch.testing.assert_close(lp, m.log_prob(v).detach())
    h = (torch.rand(6, 4) < 0.5).double()
    (ge,) = torch.autograd.grad(m.energy_joint(v, h).sum(), v)
    torch.testing.assert_close(m.energy_grad_v(v.detach(), h), ge)


@pytest.mark.parametrize("joint", [True, False])
def test_param_grads_match_autograd(joint):
    m = tiny()
    g = torch.Generator().manual_seed(3)
    v = torch.randn(9, 3, generator=g, dtype=torch.float64)
    h = (torch.rand(9, 4, generator=g) < 0.5).double() if joint else None
    w = torch.rand(9, generator=g, dtype=torch.float64)
    w = w / w.sum()
    e = m.energy_joint(v, h) if joint else m.free_energy(v)
    auto = torch.autograd.grad((e * w).sum(), [m.W, m.b, m.mu, m.log_var])
    ana = m.energy_param_grads(v, h, weights=w)
    for name, ga in zip(["W", "b", "mu", "log_var"], auto):
        torch.testing.assert_close(ana[name], ga, msg=name)
    # cd_grads = <.>_pos - <.>_neg with plain means
    v2 = torch.randn(4, 3, generator=g, dtype=torch.float64)
    cd = m.cd_grads(v, v2)
    loss = m.free_energy(v).mean() - m.free_energy(v2).mean()
    auto = torch.autograd.grad(loss, [m.W, m.b, m.mu, m.log_var])
    for name, ga in zip(["W", "b", "mu", "log_var"], auto):
        torch.testing.assert_close(cd[name], ga, msg=name)


def test_conditionals_moments():
    m = tiny(seed=2)
    g = torch.Generator().manual_seed(4)
    n = 40000
    v = torch.randn(1, 3, dtype=torch.float64).expand(n, 3)
    h = m.sample_h_given_v(v, g)
    p = torch.sigmoid((v[0] / m.log_var.exp()) @ m.W + m.b)  # Eq. 4
    se = (p * (1 - p) / n).sqrt()
    assert ((h.mean(0) - p).abs() < 5 * se + 1e-12).all()
    h1 = torch.tensor([[1.0, 0.0, 1.0, 1.0]], dtype=torch.float64).expand(n, 4)
    vs = m.sample_v_given_h(h1, g)
    mean = m.W @ h1[0] + m.mu  # Eq. 3
    var = m.log_var.exp()
    assert ((vs.mean(0) - mean).abs() < 5 * (var / n).sqrt()).all()
    assert ((vs.var(0) / var - 1).abs() < 5 * math.sqrt(2 / n)).all()
    torch.testing.assert_close(m.mean_v_given_h(h1[:1]), mean[None])


def test_exact_log_partition_three_ways():
    m = tiny(d=1, h=3, seed=5)
    # 1) enumeration of h with the analytic Gaussian integral
    lz = m.log_partition()
    # 2) numerical quadrature of exp(-F(v)) on a grid
    lz_grid = m.log_partition_grid(-40, 40, 40001)
    torch.testing.assert_close(lz, lz_grid, atol=1e-6, rtol=0)
    # 3) the mixture representation integrates to one and matches log p(v) - log Z
    lw, means = m.mixture()
    v = torch.linspace(-3, 3, 11, dtype=torch.float64)[:, None]
    var = m.var
    comp = -0.5 * (v - means[:, 0]) ** 2 / var - 0.5 * torch.log(2 * math.pi * var)
    torch.testing.assert_close(torch.logsumexp(comp + lw, 1), m.log_prob(v) - lz)


def test_log_partition_grid_2d():
    m = tiny(d=2, h=3, seed=6)
    torch.testing.assert_close(
        m.log_partition(), m.log_partition_grid(-30, 30, 601), atol=1e-6, rtol=0
    )


def test_gmm_toy():
    g = torch.Generator().manual_seed(0)
    x = gmm_toy("aniso", 30000, g)
    assert x.shape == (30000, 2)
    # component 3 (mean (0, 5), std (0.5, 1.25)) is the only mass with y > 1
    top = x[x[:, 1] > 1.0]
    assert abs(len(top) / 30000 - 0.34) < 5 * math.sqrt(0.34 * 0.66 / 30000)
    assert abs(top[:, 0].std().item() - 0.5) < 0.02
    grid = torch.linspace(-15, 15, 601)
    gx, gy = torch.meshgrid(grid, grid, indexing="ij")
    pts = torch.stack([gx.reshape(-1), gy.reshape(-1)], 1).double()
    mass = gmm_toy_log_prob(pts, "iso").exp().sum() * (30 / 600) ** 2
    assert abs(mass.item() - 1) < 1e-3
    with pytest.raises(ConfigError, match="kind"):
        gmm_toy("diag", 10, g)


def test_log_bernoulli():
    logits = torch.tensor([[-30.0, -1.0, 0.0, 2.0, 40.0]], dtype=torch.float64)
    h = torch.tensor([[0.0, 1.0, 1.0, 0.0, 1.0]], dtype=torch.float64)
    ref = torch.distributions.Bernoulli(logits=logits).log_prob(h).sum(-1)
    torch.testing.assert_close(GRBM.log_bernoulli(h, logits), ref)
