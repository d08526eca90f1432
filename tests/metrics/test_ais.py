import math

import pytest
import scipy.stats
import torch
import torch.nn.functional as F

from ebmlab.metrics.ais import (
    ais_log_z,
    gibbs_sweep_transition,
    group_spread,
    linear_betas,
    rbm_ais_log_z,
    rbm_exact_log_z,
    rbm_full_model_transition_log_z,
    rbm_log_prob,
    sigmoid_betas,
    weight_ess,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def small_rbm(gen, V=12, H=8, w_scale=1.5):
    W = torch.randn(H, V, generator=gen) * w_scale
    b = torch.randn(V, generator=gen) * 0.5
    c = torch.randn(H, generator=gen) * 0.5
    return W, b, c


def test_exact_log_z_matches_full_joint_enumeration(gen):
    W, b, c = small_rbm(gen, V=5, H=3)
    v, h = _binary_states(5).double(), _binary_states(3).double()
    W64, b64, c64 = W.double(), b.double(), c.double()
    joint = (h @ W64) @ v.T + (h @ c64)[:, None] + (v @ b64)[None, :]  # [2^H, 2^V]
    ref = torch.logsumexp(joint.flatten(), 0).item()
    assert rbm_exact_log_z(W, b, c) == pytest.approx(ref, abs=1e-10)
    # enumerating the other layer (V > H branch) gives the same
    assert rbm_exact_log_z(W.T.contiguous(), c, b) == pytest.approx(ref, abs=1e-10)
    # marginal log_prob is consistent: logsumexp_v log p~(v) = log Z
    assert torch.logsumexp(rbm_log_prob(v, W64, b64, c64), 0).item() == pytest.approx(
        ref, abs=1e-10
    )


def test_rbm_ais_normalisation_exact_without_weights(gen):
    # W = 0, base = visible bias: every weight increment telescopes deterministically,
    # so AIS must return log Z = sum softplus(b) + sum softplus(c) exactly (hidden H log 2 check)
    V, H = 6, 4
    b, c = torch.randn(V, generator=gen), torch.randn(H, generator=gen)
    W = torch.zeros(H, V)
    res = rbm_ais_log_z(W, b, c, base_b=b, n_temps=50, n_chains=7, generator=gen)
    truth = (F.softplus(b.double()).sum() + F.softplus(c.double()).sum()).item()
    assert res.log_z == pytest.approx(truth, abs=1e-6)
    assert rbm_exact_log_z(W, b, c) == pytest.approx(truth, abs=1e-10)
    assert res.log_z_stderr < 1e-6


def test_rbm_ais_matches_exact(gen):
    W, b, c = small_rbm(gen)
    exact = rbm_exact_log_z(W, b, c)
    base_b = torch.zeros(12)
    res = rbm_ais_log_z(W, b, c, base_b, n_temps=2000, n_chains=200, generator=gen, chunk=100)
    assert res.log_weights.shape == (200,)
    assert abs(res.log_z - exact) < max(3 * res.log_z_stderr, 1e-3)
    assert abs(res.log_z - exact) < 0.1
    # a data-like base and the sigmoid schedule are also unbiased
    base_b = torch.randn(12, generator=gen)
    res2 = rbm_ais_log_z(
        W, b, c, base_b, n_temps=0, n_chains=200, generator=gen, betas=sigmoid_betas(1000)
    )
    assert abs(res2.log_z - exact) < max(3 * res2.log_z_stderr, 1e-3)


def test_rbm_ais_few_temperatures_has_large_error_bar(gen):
    # with only 2 temperatures AIS is plain importance sampling: noisy, and the
    # reported standard error says so
    W, b, c = small_rbm(gen)
    res = rbm_ais_log_z(W, b, c, torch.zeros(12), n_temps=2, n_chains=200, generator=gen)
    assert res.log_z_stderr > 0.1


def _binary_states(n):
    return ((torch.arange(2**n)[:, None] >> torch.arange(n)) & 1).float()


def test_gibbs_sweep_transition_leaves_intermediate_invariant(gen):
    # exact draws from f_beta, one sweep, chi-square of the state histogram vs f_beta
    V, beta, n = 4, 0.7, 100_000
    W, b, c = small_rbm(gen, V=V, H=3)
    base_b = torch.randn(V, generator=gen)

    def base_log_prob(x):
        return x @ base_b - F.softplus(base_b).sum()

    def target_log_prob(x):
        return rbm_log_prob(x, W, b, c)

    S = _binary_states(V)
    p = torch.softmax((1 - beta) * base_log_prob(S) + beta * target_log_prob(S), 0).double()
    x = S[torch.multinomial(p, n, replacement=True, generator=gen)]
    y = gibbs_sweep_transition(base_log_prob, target_log_prob)(x, beta, gen)
    counts = torch.bincount((y * 2 ** torch.arange(V)).sum(1).long(), minlength=2**V).double()
    chi2 = ((counts - n * p) ** 2 / (n * p)).sum().item()
    assert chi2 < scipy.stats.chi2.ppf(0.999, df=2**V - 1)
    # and it does move: most chains change state over a sweep
    assert (y != x).any(1).double().mean() > 0.3


def test_generic_ais_with_gibbs_matches_exact_and_rbm_version(gen):
    V = 8
    W, b, c = small_rbm(gen, V=V, H=5)
    exact = rbm_exact_log_z(W, b, c)
    base_b = torch.zeros(V)

    def base_log_prob(x):
        return x @ base_b - F.softplus(base_b).sum()

    def target_log_prob(x):
        return rbm_log_prob(x, W, b, c)

    def base_sample(n, g):
        return torch.bernoulli(torch.sigmoid(base_b).expand(n, V), generator=g)

    # (the marginal geometric path with Gibbs sweeps needs more temperatures than the
    # intermediate-RBM path for the same error; at 30 temperatures it is biased low)
    res = ais_log_z(
        base_sample,
        base_log_prob,
        target_log_prob,
        gibbs_sweep_transition(base_log_prob, target_log_prob),
        linear_betas(500),
        n_chains=200,
        generator=gen,
    )
    assert abs(res.log_z - exact) < max(3 * res.log_z_stderr, 1e-3)
    assert abs(res.log_z - exact) < 0.1
    rbm = rbm_ais_log_z(W, b, c, base_b, n_temps=2000, n_chains=200, generator=gen)
    se = math.hypot(res.log_z_stderr, rbm.log_z_stderr)
    assert abs(res.log_z - rbm.log_z) < max(3 * se, 1e-3)


def test_generic_ais_base_log_z_offset_and_exact_when_target_is_base(gen):
    # target = 5 + base log density: every weight is exactly 5, std error 0
    d = 4

    def base_log_prob(x):
        return torch.full((x.shape[0],), -d * math.log(2.0))

    res = ais_log_z(
        lambda n, g: torch.bernoulli(torch.full((n, d), 0.5), generator=g),
        base_log_prob,
        lambda x: base_log_prob(x) + 5.0,
        lambda x, beta, g: x,
        linear_betas(10),
        n_chains=5,
        generator=gen,
        base_log_z=1.5,
    )
    assert res.log_z == pytest.approx(6.5, abs=1e-9)
    assert res.log_z_stderr == pytest.approx(0.0, abs=1e-9)


def test_schedules_and_validation():
    lb = linear_betas(5)
    torch.testing.assert_close(lb, torch.tensor([0, 0.25, 0.5, 0.75, 1], dtype=torch.float64))
    sb = sigmoid_betas(101)
    assert sb[0].item() == 0.0 and sb[-1].item() == pytest.approx(1.0)
    assert (sb[1:] >= sb[:-1]).all()
    assert sb[1] < lb[1] and sb[50].item() == pytest.approx(0.5)
    g = torch.Generator().manual_seed(0)
    W, b, c = torch.zeros(2, 3), torch.zeros(3), torch.zeros(2)
    with pytest.raises(ValueError, match="start at 0"):
        rbm_ais_log_z(W, b, c, b, 0, 4, g, betas=torch.tensor([0.1, 1.0]))
    with pytest.raises(ValueError, match="non-decreasing"):
        rbm_ais_log_z(W, b, c, b, 0, 4, g, betas=torch.tensor([0.0, 0.6, 0.5, 1.0]))
    with pytest.raises(ValueError, match="W \\[H, V\\]"):
        rbm_exact_log_z(W, c, c)
    with pytest.raises(ValueError, match="limited"):
        rbm_exact_log_z(torch.zeros(30, 30), torch.zeros(30), torch.zeros(30))


def test_weight_ess_known_answers():
    assert weight_ess(torch.full((400,), 1234.5, dtype=torch.float64)) == pytest.approx(400)
    one_heavy = torch.tensor([0.0, 0.0, 0.0, 800.0], dtype=torch.float64)  # exp(800) overflows
    assert weight_ess(one_heavy) == pytest.approx(1.0)
    two_of_four = torch.tensor([-math.inf, 5.0, 5.0, -math.inf], dtype=torch.float64)
    assert weight_ess(two_of_four) == pytest.approx(2.0)
    w = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)  # (1 + 2 + 3)^2 / (1 + 4 + 9)
    assert weight_ess(w.log()) == pytest.approx(36 / 14)
    with pytest.raises(ValueError):
        weight_ess(torch.zeros(0))


def test_group_spread_is_the_range_of_the_groups_log_mean_weights():
    # groups of 2 chains with mean weights 1, e and e^3 -> log Z estimates 0, 1, 3 -> spread 3
    w = torch.tensor(
        [0.5, 1.5, math.e * 0.2, math.e * 1.8, math.e**3, math.e**3], dtype=torch.float64
    )
    assert group_spread(torch.log(w), 3) == pytest.approx(3.0, abs=1e-12)
    assert group_spread(torch.zeros(8, dtype=torch.float64), 4) == 0.0
    with pytest.raises(ValueError):
        group_spread(torch.zeros(3, dtype=torch.float64), 1)


def test_reference_code_rbm_ais_overestimates_log_z_by_the_kl_to_the_base(gen):
    """The ACS reference code moves its chains with the full RBM at every temperature: its
    estimate tends to log Z + KL(p || p0), not log Z; valid AIS on the same RBM does not."""
    W, b, c = small_rbm(gen, V=12, H=8, w_scale=1.5)
    base_b = torch.randn(12, generator=gen) * 0.5
    exact = rbm_exact_log_z(W, b, c)
    v = _binary_states(12).double()
    log_p = rbm_log_prob(v, W.double(), b.double(), c.double()) - exact  # normalised
    log_p0 = v @ base_b.double() - F.softplus(base_b.double()).sum()
    kl = float((log_p.exp() * (log_p - log_p0)).sum())
    assert kl > 2.0  # the test has power: the bias is far above the estimators' noise
    kw = dict(n_temps=2000, n_chains=100, generator=gen)
    ref = rbm_full_model_transition_log_z(W, b, c, base_b, **kw)
    valid = rbm_ais_log_z(W, b, c, base_b, **kw)
    assert abs(valid.log_z - exact) < 0.1
    assert ref.log_z - exact == pytest.approx(kl, rel=0.05)
