import math

import pytest
import torch

from ebmlab.metrics.ess import ess_1d, ess_per_dim, hamming_to_reference, multichain_ess

pytestmark = pytest.mark.usefixtures("one_thread")


def ar1(n, chains, rho, gen, d=None):
    """Stationary AR(1): x_t = rho x_{t-1} + sqrt(1 - rho^2) e_t; ESS = n (1 - rho) / (1 + rho)."""
    shape = (n, chains) if d is None else (n, chains, d)
    e = torch.randn(shape, generator=gen, dtype=torch.float64)
    x = torch.empty_like(e)
    x[0] = e[0]
    s = math.sqrt(1 - rho**2)
    for t in range(1, n):
        x[t] = rho * x[t - 1] + s * e[t]
    return x


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.9])
def test_ess_1d_ar1_matches_analytic(rho, gen):
    n, chains = 4000, 100
    x = ar1(n, chains, rho, gen)
    ess = ess_1d(x)
    analytic = n * (1 - rho) / (1 + rho)
    # per-chain spread measured ~5% (rho 0), 8% (0.5), 18% (0.9) of the analytic value;
    # the mean of 100 chains has ~2% noise; allow 6% (truncation bias is ~2% at rho = 0)
    assert ess.shape == (chains,)
    assert abs(ess.mean().item() / analytic - 1) < 0.06
    # the pooled estimator agrees for stationary chains with one common law
    assert abs(multichain_ess(x) / (chains * analytic) - 1) < 0.06


def test_ess_iid_is_about_n_and_shift_scale_invariant(gen):
    n = 2000
    x = torch.randn(n, 50, generator=gen)
    ess = ess_1d(x)
    assert abs(ess.mean().item() / n - 1) < 0.05
    torch.testing.assert_close(ess_1d(x + 1000.0), ess, rtol=1e-3, atol=0)
    torch.testing.assert_close(ess_1d(3.0 * x - 7.0), ess, rtol=1e-6, atol=0)
    assert multichain_ess(x + 1000.0) == pytest.approx(multichain_ess(x), rel=1e-3)


def test_ess_antithetic_chain_exceeds_n_but_is_capped(gen):
    x = ar1(2000, 20, -0.5, gen)
    ess = ess_1d(x)
    assert (ess > 2000).all()
    assert (ess <= 2000 * math.log10(2000) + 1e-6).all()


def test_constant_series_convention(gen):
    x = torch.randn(100, 3, generator=gen)
    x[:, 1] = 0.3
    ess = ess_1d(x)
    assert ess[1].item() == 1.0 and ess[0].item() > 10
    assert math.isnan(ess_1d(x, constant_value=float("nan"))[1].item())
    assert multichain_ess(torch.full((50, 4), 2.0)) == 1.0


def test_multichain_ess_penalises_disagreeing_chains(gen):
    n, m = 1000, 8
    x = torch.randn(n, m, generator=gen, dtype=torch.float64)
    stuck = x + torch.arange(m, dtype=torch.float64) * 5.0  # each chain in its own mode
    assert multichain_ess(x) > 0.8 * n * m
    assert multichain_ess(stuck) < 0.01 * n * m
    # per-chain ESS cannot see it
    assert ess_1d(stuck).mean() > 0.8 * n


def test_ess_per_dim_burn_in_and_constant_dims(gen):
    n, chains, d = 1000, 4, 6
    x = ar1(n, chains, 0.5, gen, d=d)
    per_chain = ess_per_dim(x)
    manual = ess_1d(x.reshape(n, chains * d)).reshape(chains, d).mean(1)
    torch.testing.assert_close(per_chain, manual)
    torch.testing.assert_close(ess_per_dim(x, chunk=5), manual)
    # burn-in drops the first 10% of steps
    torch.testing.assert_close(
        ess_per_dim(x, burn_in=0.1), ess_1d(x[100:].reshape(900, -1)).reshape(chains, d).mean(1)
    )
    # a frozen dimension counts as 1 by default, is excluded with NaN
    y = x.clone()
    y[:, :, 0] = 1.0
    rest = ess_1d(y[:, :, 1:].reshape(n, -1)).reshape(chains, d - 1)
    torch.testing.assert_close(ess_per_dim(y), (rest.sum(1) + 1.0) / d)
    torch.testing.assert_close(ess_per_dim(y, constant_value=float("nan")), rest.mean(1))
    with pytest.raises(ValueError, match="burn_in"):
        ess_per_dim(x, burn_in=1.0)


def test_hamming_to_reference(gen):
    xs = torch.bernoulli(torch.full((5, 3, 8), 0.5), generator=gen)
    ref = torch.bernoulli(torch.full((8,), 0.5), generator=gen)
    h = hamming_to_reference(xs, ref)
    assert h.shape == (5, 3)
    for t in range(5):
        for c in range(3):
            assert h[t, c].item() == float((xs[t, c] != ref).sum())
    # integer (ordinal) states count differing coordinates
    xi = torch.tensor([[[0, 3, 5]]])
    assert hamming_to_reference(xi, torch.tensor([0, 2, 5])).item() == 1.0
