"""GRBM samplers: exact invariance of the Metropolis-adjusted samplers on a tiny 2-D GRBM
whose marginal is a known Gaussian mixture, the closed-form K-step Gibbs-Langevin proposal
(Eq. 11) against Monte Carlo, adjust_step semantics, and the batch-scaling convention."""

import math

import pytest
import torch
from scipy import stats

from ebmlab.errors import ConfigError
from ebmlab.models.grbm import GRBM
from ebmlab.samplers.grbm import (
    GRBMGibbs,
    GRBMGibbsLangevin,
    GRBMLangevin,
    cosine_schedule,
    kstep_proposal,
)
from tests.helpers import from_conf


def langevin(**kw) -> GRBMLangevin:
    """conf/sampler/grbm_langevin.yaml with ``kw``."""
    return from_conf("sampler/grbm_langevin", **kw)


def gibbs_langevin(**kw) -> GRBMGibbsLangevin:
    """conf/sampler/grbm_gibbs_langevin.yaml with ``kw``."""
    return from_conf("sampler/grbm_gibbs_langevin", **kw)


pytestmark = pytest.mark.usefixtures("one_thread")


N_CHAINS = 10000
N_STEPS = 8


def four_mode_grbm() -> GRBM:
    """2-D GRBM whose marginal is (almost) four equal, well separated Gaussians: one at mu
    and one per hidden unit at mu + W_j (pairs are suppressed by negative W_j . W_k)."""
    m = from_conf("model/grbm", n_visible=2, n_hidden=3).double()
    var = torch.tensor([0.5, 0.8], dtype=torch.float64)
    ang = torch.tensor([0.3, 0.3 + 2 * math.pi / 3, 0.3 + 4 * math.pi / 3], dtype=torch.float64)
    W = 3.0 * torch.stack([ang.cos(), ang.sin()])  # [2, 3]
    with torch.no_grad():
        m.W.copy_(W)
        m.mu.copy_(torch.tensor([0.5, -0.5]))
        m.log_var.copy_(var.log())
        # b_j cancels component j's weight term 1/2 ((mu + W_j)^2 - mu^2) / var
        mu = m.mu[:, None]
        m.b.copy_(-0.5 * (((mu + W) ** 2 - mu**2) / var[:, None]).sum(0))
    return m.requires_grad_(False)


def exact_samples(m: GRBM, n: int, g: torch.Generator) -> torch.Tensor:
    lw, means = m.mixture()
    comp = torch.multinomial(lw.exp(), n, replacement=True, generator=g)
    return means[comp] + m.var.sqrt() * torch.randn(n, 2, generator=g, dtype=torch.float64)


def bin_probs(m: GRBM, edges: torch.Tensor) -> torch.Tensor:
    """Exact probability of each cell of a 2-D grid (edges include +-inf) under the mixture."""
    lw, means = m.mixture()
    sd = m.var.sqrt()
    cdf = torch.distributions.Normal(0.0, 1.0).cdf
    px = cdf((edges[None, :] - means[:, :1]) / sd[0]).diff(dim=1)  # [C, nbx]
    py = cdf((edges[None, :] - means[:, 1:]) / sd[1]).diff(dim=1)
    return torch.einsum("c,ci,cj->ij", lw.exp(), px, py).reshape(-1)


def chi2_vs_exact(m: GRBM, x: torch.Tensor) -> tuple[float, float]:
    """Pearson statistic of x against the exact mixture on a grid (cells with < 5 expected
    counts pooled), and its 1 - 1e-4 quantile under the null."""
    inner = torch.linspace(-4.5, 4.5, 10, dtype=torch.float64)
    edges = torch.cat([torch.tensor([-math.inf]), inner, torch.tensor([math.inf])])
    p = bin_probs(m, edges)
    ix = torch.bucketize(x[:, 0].contiguous(), inner)
    iy = torch.bucketize(x[:, 1].contiguous(), inner)
    counts = torch.bincount(ix * (len(edges) - 1) + iy, minlength=p.numel()).double()
    n = x.shape[0]
    big = p * n >= 5
    obs = torch.cat([counts[big], counts[~big].sum()[None]])
    exp = torch.cat([p[big], p[~big].sum()[None]]) * n
    keep = exp > 0
    stat = float((((obs - exp) ** 2) / exp)[keep].sum())
    return stat, float(stats.chi2.ppf(1 - 1e-4, int(keep.sum()) - 1))


def moments_ok(m: GRBM, x: torch.Tensor) -> bool:
    lw, means = m.mixture()
    w = lw.exp()[:, None]
    mean = (w * means).sum(0)
    var = (w * means**2).sum(0) + m.var - mean**2
    n = x.shape[0]
    xc = x - mean
    se_mean = (var / n).sqrt()
    se_var = (((xc**4).mean(0) - var**2) / n).sqrt()
    return bool(
        ((x.mean(0) - mean).abs() < 5 * se_mean).all()
        and ((xc.pow(2).mean(0) - var).abs() < 5 * se_var).all()
    )


def run(sampler, m, x0, g, n_steps=N_STEPS):
    state = sampler.init(m, x0)
    acc = []
    for _ in range(n_steps):
        state, info = sampler.step(m, state, g)
        acc.append(float(info.accept_prob.mean()))
    return state, sum(acc) / len(acc)


def test_tiny_model_is_multimodal():
    m = four_mode_grbm()
    lw, _ = m.mixture()
    top4 = lw.exp().sort(descending=True).values[:4]
    assert top4.sum() > 0.99 and top4.min() > 0.2


@pytest.mark.parametrize(
    "sampler",
    [
        GRBMGibbs(),
        langevin(step_size=0.6, anneal="none"),
        langevin(step_size=1.0, anneal="cosine", anneal_steps=5),
        gibbs_langevin(step_size=0.8, n_inner=5),
        gibbs_langevin(step_size=0.5, n_inner=3, anneal="none"),
    ],
    ids=["gibbs", "mala", "mala-cosine", "gibbs-langevin", "gibbs-langevin-flat"],
)
def test_adjusted_samplers_leave_grbm_invariant(sampler):
    m = four_mode_grbm()
    g = torch.Generator().manual_seed(11)
    x0 = exact_samples(m, N_CHAINS, g)
    state, acc = run(sampler, m, x0, g)
    if not isinstance(sampler, GRBMGibbs):
        assert 0.3 < acc < 0.97  # the Metropolis test is doing real work
    assert moments_ok(m, state.x)
    stat, crit = chi2_vs_exact(m, state.x)
    assert stat < crit, (stat, crit)
    # the cached marginal log-density follows the accepted states
    torch.testing.assert_close(state.log_prob, m.log_prob(state.x).detach())
    if sampler.joint:
        # (v, h) is a joint sample: h | v ~ p(h|v), checked on the mean of h
        h = state.extra["h"]
        p = m.prob_h_given_v(state.x).detach()
        assert ((h.mean(0) - p.mean(0)).abs() < 5 * (0.25 / N_CHAINS) ** 0.5).all()


@pytest.mark.parametrize(
    "sampler",
    [
        langevin(step_size=0.6, anneal="none", adjust_step=10**6),
        gibbs_langevin(step_size=0.8, n_inner=5, adjust_step=10**6),
    ],
    ids=["ula", "gibbs-langevin-unadjusted"],
)
def test_unadjusted_samplers_are_biased(sampler):
    """Power check: the same test rejects the unadjusted versions (so it can fail)."""
    m = four_mode_grbm()
    g = torch.Generator().manual_seed(11)
    x0 = exact_samples(m, N_CHAINS, g)
    state, acc = run(sampler, m, x0, g)
    assert acc == 1.0 and not sampler.exact
    stat, crit = chi2_vs_exact(m, state.x)
    assert stat > 1.5 * crit


@pytest.mark.parametrize("temperature,anneal", [(1.0, "cosine"), (3.0, "none")])
def test_kstep_proposal_closed_form_matches_monte_carlo(temperature, anneal):
    m = four_mode_grbm()
    g = torch.Generator().manual_seed(5)
    s = gibbs_langevin(step_size=0.7, n_inner=6, anneal=anneal)
    alphas = s.inner_alphas(m)
    n = 20000
    v0 = torch.tensor([[1.5, -2.0]], dtype=torch.float64).expand(n, 2)
    h = torch.tensor([[1.0, 0.0, 1.0]], dtype=torch.float64).expand(n, 3)
    vk = s.langevin_inner(m, v0, h, alphas, temperature, g)
    mean, var = kstep_proposal(m, v0[:1], h[:1], alphas, temperature)
    assert ((vk.mean(0) - mean[0]).abs() < 5 * (var / n).sqrt()).all()
    assert ((vk.var(0) / var - 1).abs() < 5 * math.sqrt(2 / n)).all()
    for d in range(2):  # the whole 1-D law, not just two moments
        z = ((vk[:, d] - mean[0, d]) / var[d].sqrt()).numpy()
        assert stats.kstest(z, "norm").pvalue > 1e-4
    # one step with constant step size: the usual Langevin Gaussian
    mean1, var1 = kstep_proposal(m, v0[:1], h[:1], [0.3], temperature)
    m_h = m.mean_v_given_h(h[:1])
    torch.testing.assert_close(mean1, v0[:1] - 0.3 * (v0[:1] - m_h) / (temperature * m.var))
    torch.testing.assert_close(var1, torch.full((2,), 0.6, dtype=torch.float64))


def test_cosine_schedule_counts_from_zero():
    sch = cosine_schedule(2.0, 4)
    assert sch[0] == 2.0 and min(sch) > 0
    torch.testing.assert_close(
        torch.tensor(sch), torch.tensor([2.0, 1 + 0.5**0.5, 1.0, 1 - 0.5**0.5])
    )


def test_adjust_step_semantics_and_step_counter():
    m = four_mode_grbm()
    g = torch.Generator().manual_seed(0)
    x0 = exact_samples(m, 2000, g)
    s = gibbs_langevin(step_size=3.0, n_inner=2, adjust_step=3)
    assert not s.exact
    state = s.init(m, x0)
    probs = []
    for _ in range(5):
        state, info = s.step(m, state, g)
        probs.append(float(info.accept_prob.mean()))
    assert state.extra["t"] == 5
    assert probs[:3] == [1.0, 1.0, 1.0] and max(probs[3:]) < 0.9
    # a per-run override (used by the learner's MH warm-up) switches the test off
    state = s.init(m, x0, adjust_step=10)
    for _ in range(5):
        state, info = s.step(m, state, g)
        assert float(info.accept_prob.mean()) == 1.0


def test_gibbs_caches_hidden_logits_without_changing_the_chain():
    """GRBMGibbs reuses the new v's hidden logits for the next p(h|v): the chain equals the
    plain h ~ p(h|v), v ~ p(v|h) recursion draw for draw, and the cached log-prob is -F(v)."""
    m = four_mode_grbm()
    x0 = torch.randn(30, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    s = GRBMGibbs()
    state, v = s.init(m, x0), x0
    for _ in range(4):
        state, _ = s.step(m, state, g1)
        v = m.sample_v_given_h(m.sample_h_given_v(v, g2), g2)
        torch.testing.assert_close(state.x, v, rtol=0, atol=0)
        torch.testing.assert_close(state.extra["logits"], m.hidden_logits(v))
        torch.testing.assert_close(state.log_prob, m.log_prob(v))


@pytest.mark.parametrize("adjust_step", [0, 2])
def test_gibbs_langevin_caches_match_the_state(adjust_step):
    """The kept hidden logits, log q(h|v) and E(v, h) are those of the chain's current (v, h),
    whether the last move was accepted, rejected or taken without the test (which keeps only
    the logits: log_prob and the test's terms are left for the first adjusted step to compute,
    and a chain it rejects keeps the -F(v) computed from the kept logits)."""
    m = four_mode_grbm()
    g = torch.Generator().manual_seed(4)
    s = gibbs_langevin(step_size=3.0, n_inner=3, adjust_step=adjust_step)
    state = s.init(m, exact_samples(m, 500, g))
    rejected = 0
    for t in range(1, 6):
        state, info = s.step(m, state, g)
        rejected += int((~info.accepted).sum())
        if t == adjust_step + 1:
            assert (~info.accepted).any()  # the first adjusted step rejects some chains
        v, h = state.x, state.extra["h"]
        torch.testing.assert_close(state.extra["logits"], m.hidden_logits(v))
        kept = {k: state.extra[k] for k in ("energy", "log_qh", "mean_h")}
        if t <= adjust_step:
            assert state.log_prob is None
            assert all(x is None for x in kept.values())
            continue
        torch.testing.assert_close(state.log_prob, m.log_prob(v))
        torch.testing.assert_close(kept["energy"], m.energy_joint(v, h))
        torch.testing.assert_close(kept["log_qh"], m.log_bernoulli(h, m.hidden_logits(v)))
        torch.testing.assert_close(kept["mean_h"], m.mean_v_given_h(h))
    assert rejected > 0  # both branches of the cache update ran


def test_gibbs_langevin_recomputes_its_coefficients_when_the_variances_change():
    """The Eq. 11 coefficients are memoised between steps; after a learning update changes
    the variances in place, the next step uses the new ones (as a fresh sampler does)."""
    m = four_mode_grbm()
    x0 = exact_samples(m, 200, torch.Generator().manual_seed(1))
    warm = gibbs_langevin(step_size=0.5, n_inner=3)
    g = torch.Generator().manual_seed(2)
    state, _ = warm.step(m, warm.init(m, x0), g)  # memoises the coefficients of var
    with torch.no_grad():  # in place, as an optimiser does; the same mean variance, so the
        m.log_var.copy_(m.log_var.flip(0).clone())  # step sizes (alpha_0 x mean) stay the same
    g_state = g.get_state()
    after, _ = warm.step(m, state, g)
    fresh = gibbs_langevin(step_size=0.5, n_inner=3)
    g.set_state(g_state)
    expected, _ = fresh.step(m, state, g)
    torch.testing.assert_close(after.x, expected.x, rtol=0, atol=0)


def test_same_seed_same_chain():
    m = four_mode_grbm()
    x0 = torch.zeros(50, 2, dtype=torch.float64)
    outs = []
    for _ in range(2):
        g = torch.Generator().manual_seed(7)
        state, _ = run(gibbs_langevin(step_size=0.5, n_inner=3), m, x0, g, n_steps=4)
        outs.append(state.x)
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)


@pytest.mark.parametrize("make", [langevin, gibbs_langevin], ids=["langevin", "gibbs_langevin"])
def test_batch_energy_scale_targets_tempered_density(make):
    """energy_scale=batch (the authors' code): with W = 0 the GRBM is N(mu, var) and the
    adjusted chain targets N(mu, B var) with B the number of chains; 'none' targets var."""
    m = from_conf("model/grbm", n_visible=1, n_hidden=2).double().requires_grad_(False)
    with torch.no_grad():
        m.W.zero_()
        m.mu.fill_(1.0)
        m.log_var.fill_(math.log(0.3))
    b = 50
    for scale, target in [("batch", b * 0.3), ("none", 0.3)]:
        g = torch.Generator().manual_seed(3)
        s = make(step_size=0.5 * target / 0.3, anneal="none", energy_scale=scale)
        x0 = 1.0 + math.sqrt(target) * torch.randn(b, 1, generator=g, dtype=torch.float64)
        state = s.init(m, x0)
        xs = []
        for _ in range(150):
            state, _ = s.step(m, state, g)
            xs.append(state.x)
        x = torch.cat(xs)
        ratio = float(x.var() / target)
        assert 0.75 < ratio < 1.33, (scale, ratio)


def test_config_validation():
    with pytest.raises(ConfigError, match="step_size"):
        langevin(step_size=0.0)
    with pytest.raises(ConfigError, match="anneal"):
        gibbs_langevin(anneal="linear")
    with pytest.raises(ConfigError, match="adjust_step"):
        gibbs_langevin(adjust_step=-1)
    with pytest.raises(ConfigError, match="energy_scale"):
        langevin(energy_scale="mean")
    with pytest.raises(ConfigError, match="n_inner"):
        gibbs_langevin(n_inner=0)


def test_exploding_gibbs_langevin_proposal_is_rejected_not_nan():
    """With alpha_0 x mean variance far above a coordinate's variance, the K explicit inner
    steps are unstable (c = 1 - alpha / var << -1) and a float32 proposal overflows: the
    MH test rejects it with acceptance 0, the chain keeps its finite state."""
    m = four_mode_grbm().float()
    with torch.no_grad():
        m.log_var.copy_(torch.tensor([20.0, 1e-3]).log())
    s = gibbs_langevin(step_size=1.0, n_inner=10, adjust_step=0)
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(64, 2, generator=g)
    state = s.init(m, x0)
    new, info = s.step(m, state, g)
    assert torch.isfinite(info.accept_prob).all()
    assert not info.accepted.any() and (info.accept_prob == 0).all()
    torch.testing.assert_close(new.x, x0, rtol=0, atol=0)


def test_kstep_coefficients_take_per_coordinate_steps():
    """Eq. 11's coefficients for K per-coordinate step vectors equal, coordinate by coordinate,
    those for the scalar steps of that coordinate (and a float list is unchanged)."""
    from ebmlab.samplers.grbm import _kstep_coeffs

    var = torch.tensor([0.5, 2.0, 8.0], dtype=torch.float64)
    scales = torch.tensor([1.0, 3.0, 0.2], dtype=torch.float64)
    alphas = cosine_schedule(0.4, 5)
    per = _kstep_coeffs(var, [a * scales for a in alphas], 2.0)
    for d in range(3):
        one = _kstep_coeffs(var[d : d + 1], [a * float(scales[d]) for a in alphas], 2.0)
        for got, want in zip(per, one):
            torch.testing.assert_close(got[d : d + 1], want)
