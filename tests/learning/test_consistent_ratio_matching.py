"""Consistent ratio matching objectives (Hyvarinen's, Lyu's with its cross term) vs the paper's
Eq. (3), and the unbiasedness of the importance-weighted (basic) estimators, by exact
expectations on enumerable targets with a NON-pairwise (MLP) energy."""

import copy
import itertools
import math
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate

from ebmlab.errors import ConfigError
from ebmlab.learning.ratio_matching import (
    flip_all,
    full_loss,
    gradient_proposal,
    neighbour_terms,
    sampled_loss,
)
from ebmlab.learning.ratio_matching_exact import (
    expected_surrogate,
    inclusion_probabilities,
    stationary_point,
)
from ebmlab.learning.ratio_matching_learner import RatioMatchingLearner
from ebmlab.learning.ratio_matching_objectives import proposal_logits, term
from ebmlab.learning.ratio_matching_sampling import draw_indices, importance_weights
from ebmlab.models.base import EnergyModel
from ebmlab.models.enumeration import binary_states
from ebmlab.models.mlp_energy import MLPEnergy
from ebmlab.utils.config import validate_node

CONF = Path(__file__).resolve().parents[2] / "conf"
D = 5
CONSISTENT = ("hyvarinen", "lyu")


def _mlp(seed: int, scale: float) -> MLPEnergy:
    torch.manual_seed(seed)
    m = MLPEnergy(dim=D, hidden_dim=8, num_layers=2, learn_beta=True).double()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(scale)
    return m


def _states() -> torch.Tensor:
    return binary_states(0, 1 << D, D).double()


def _p(model) -> torch.Tensor:
    with torch.no_grad():
        return torch.softmax(model.log_prob(_states()), 0)


def _expected_loss(model, p_data, objective) -> torch.Tensor:
    return (p_data * full_loss(model, _states(), objective, "none", 0)).sum()


def _grad_norm(model, p_data, objective) -> float:
    g = torch.autograd.grad(_expected_loss(model, p_data, objective), list(model.parameters()))
    return float(torch.sqrt(sum((x**2).sum() for x in g)))


def _tempered(model, factor: float):
    """The same network with its energy multiplied by ``factor`` (output layer scaled)."""
    m = copy.deepcopy(model)
    with torch.no_grad():
        m.out.weight.mul_(factor)
        m.out.bias.mul_(factor)
    return m


def _log_ratios(model) -> torch.Tensor:
    x = _states()
    with torch.no_grad():
        nb = model.log_prob(flip_all(x).reshape(-1, D)).reshape(-1, D)
        return nb - model.log_prob(x)[:, None]


# ---- (a) consistency: the minimiser of the expected loss -------------------------------------
@pytest.mark.parametrize("objective", CONSISTENT)
def test_consistent_objectives_are_stationary_at_the_data_model(objective):
    truth = _mlp(0, 4.0)
    p_data = _p(truth)
    assert _grad_norm(truth, p_data, objective) < 1e-12
    # power: the temperature-4 model (Eq. 3's minimiser) is not stationary for these
    assert _grad_norm(_tempered(truth, 0.25), p_data, objective) > 1e-2


def test_eq3_minimiser_is_the_temperature_4_model():
    """E_p sum_i exp(2 (E(x) - E(x_-i))) is convex in the free energy and stationary at
    E = E_data / 4 (q ∝ p^(1/4)), not at the data model."""
    truth = _mlp(0, 4.0)
    p_data = _p(truth)
    assert _grad_norm(_tempered(truth, 0.25), p_data, "eq3") < 1e-12
    assert _grad_norm(truth, p_data, "eq3") > 1e-2
    assert _grad_norm(_tempered(truth, 0.3), p_data, "eq3") > 1e-3


def _perturbed(truth, seed: int):
    model = copy.deepcopy(truth)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return model


def _fit(model, p_data, objective: str):
    opt = torch.optim.LBFGS(
        model.parameters(),
        lr=1.0,
        max_iter=400,
        tolerance_grad=1e-13,
        tolerance_change=1e-16,
        history_size=50,
        line_search_fn="strong_wolfe",
    )

    def closure():
        opt.zero_grad()
        loss = _expected_loss(model, p_data, objective)
        loss.backward()
        return loss

    opt.step(closure)
    return model


@pytest.mark.parametrize("objective,factor", [("hyvarinen", 1.0), ("lyu", 1.0), ("eq3", 0.25)])
def test_fit_from_a_perturbed_start_recovers_the_log_ratios(objective, factor):
    """Minimising the exact expected loss over the MLP's parameters from a perturbed start
    recovers the data's log-ratios log p(x_-i) / p(x) (consistent objectives) or a quarter of
    them (Eq. 3: the data at temperature 4)."""
    truth = _mlp(0, 4.0)
    want = factor * _log_ratios(truth)
    model = _perturbed(truth, seed=1)
    assert float((_log_ratios(model) - want).abs().max()) > 0.3  # the start is far off
    _fit(model, _p(truth), objective)
    err = float((_log_ratios(model) - want).abs().max())
    assert err < 1e-3, (objective, err)


# ---- (b) the basic (importance-weighted) estimator is unbiased -------------------------------
def _draws(q: torch.Tensor, s: int, replacement: bool):
    """Every ordered draw of s indices with its probability under q [n, d]:
    (idx [m, s], prob [n, m]); without replacement the draws are successive."""
    d = q.shape[1]
    seqs = (
        itertools.product(range(d), repeat=s)
        if replacement
        else itertools.permutations(range(d), s)
    )
    idx = torch.tensor(list(seqs))
    qs = q[:, idx]  # [n, m, s]
    if replacement:
        return idx, qs.prod(-1)
    onehot = torch.nn.functional.one_hot(idx, d).double()  # [m, s, d]
    not_yet = 1.0 - (torch.cumsum(onehot, 1) - onehot)  # indices not drawn before step k
    rest = torch.einsum("nd,msd->nms", q, not_yet)  # 1 - P_k, summed without cancellation
    return idx, (qs / rest).prod(-1)


def _exact_expectation(model, x, objective, proposal, s, replacement, weights="library"):
    """E over the draws of the basic estimate, per row of x [n] (with its parameter graph)."""
    n = x.shape[0]
    log_q = gradient_proposal(model, x, objective, proposal)[1]
    idx, prob = _draws(log_q.exp(), s, replacement)
    m = idx.shape[0]
    rows = torch.arange(n).repeat_interleave(m)
    idx_all = idx.repeat(n, 1)
    terms = neighbour_terms(model, x[rows], idx_all, objective)
    if weights == "library":
        w = importance_weights(log_q[rows], idx_all, replacement)
    else:  # the reference code's 1 / (s n(i)), whatever the draw
        w = torch.exp(-log_q[rows].gather(1, idx_all)) / s
    est = (w * terms).sum(-1).reshape(n, m)
    return (prob.detach() * est).sum(-1)


def _param_grad(value: torch.Tensor, model) -> torch.Tensor:
    g = torch.autograd.grad(value, list(model.parameters()))
    return torch.cat([x.reshape(-1) for x in g])


@pytest.mark.parametrize("objective", ["eq3", "hyvarinen", "lyu"])
@pytest.mark.parametrize("proposal", ["value", "slope"])
@pytest.mark.parametrize("s,replacement", [(2, True), (3, True), (2, False), (4, False)])
def test_basic_estimator_is_unbiased_in_value_and_gradient(objective, proposal, s, replacement):
    model = _mlp(3, 4.0)
    x = _states()[::3]  # 11 rows, every one a different state
    full = full_loss(model, x, objective, "none", 0)
    exact = _exact_expectation(model, x, objective, proposal, s, replacement)
    assert torch.allclose(exact, full, rtol=1e-10, atol=1e-12)
    g_exact, g_full = _param_grad(exact.sum(), model), _param_grad(full.sum(), model)
    assert torch.allclose(g_exact, g_full, rtol=1e-9, atol=1e-12 * float(g_full.abs().max()))


@pytest.mark.parametrize("objective", ["eq3", "hyvarinen"])
def test_reference_weights_without_replacement_are_biased(objective):
    """1 / (s n(i)) (the reference code's weights) with distinct indices: E != J."""
    model, x = _mlp(3, 4.0), _states()[::3]
    full = full_loss(model, x, objective, "none", 0).detach()
    ref = _exact_expectation(model, x, objective, "value", 3, False, weights="reference")
    assert float(((ref.detach() - full) / full).abs().max()) > 0.05


def test_multinomial_without_replacement_returns_indices_in_draw_order():
    """Des Raj's weights need the draw ORDER: torch.multinomial (exponential races, top-k)
    must give the first index with probability q(i) and the second with q(j) / (1 - q(i))."""
    q = torch.tensor([[0.05, 0.15, 0.3, 0.5]], dtype=torch.float64).expand(40000, 4)
    idx = draw_indices(q.log(), 2, False, torch.Generator().manual_seed(0))
    n = idx.shape[0]
    first = torch.bincount(idx[:, 0], minlength=4).double() / n
    assert torch.allclose(first, q[0], atol=4 * math.sqrt(0.25 / n))
    after3 = idx[idx[:, 0] == 3, 1]
    second = torch.bincount(after3, minlength=4).double() / after3.numel()
    want = torch.tensor([0.1, 0.3, 0.6, 0.0], dtype=torch.float64)
    assert torch.allclose(second, want, atol=4 * math.sqrt(0.25 / after3.numel()))


@pytest.mark.parametrize("replacement", [True, False])
def test_sampled_loss_is_the_weighted_sum_of_its_draw(replacement):
    """sampled_loss = sum_k w_k t(delta_{i_k}) with the indices its generator draws."""
    model, x = _mlp(2, 4.0), _states()[::2]
    got = sampled_loss(
        model,
        x,
        "lyu",
        "ggis",
        "slope",
        3,
        "basic",
        replacement,
        torch.Generator().manual_seed(4),
        "none",
    )
    log_q = gradient_proposal(model, x, "lyu", "slope")[1]
    idx = draw_indices(log_q, 3, replacement, torch.Generator().manual_seed(4))
    w = importance_weights(log_q, idx, replacement)
    assert torch.allclose(got, (w * neighbour_terms(model, x, idx, "lyu")).sum(-1))


def test_proposal_logits_are_the_log_terms_and_slopes():
    delta = torch.linspace(-4.0, 4.0, 81, dtype=torch.float64)
    delta = delta[(delta - math.log(2.0) / 3.0).abs() > 1e-3]  # lyu's zero crossing
    for objective in ("eq3", "hyvarinen", "lyu"):
        d = delta.clone().requires_grad_(True)
        t = term(objective, d)
        (slope,) = torch.autograd.grad(t.sum(), d)
        for proposal, want in (("value", t.detach().abs()), ("slope", slope.abs())):
            got = torch.log_softmax(proposal_logits(objective, proposal, delta), 0)
            assert torch.allclose(got, torch.log_softmax(want.log(), 0), atol=1e-10), (
                objective,
                proposal,
            )
    big = torch.tensor([300.0, -300.0], dtype=torch.float64)  # no overflow to nan
    assert torch.isfinite(proposal_logits("lyu", "value", big)).all()


# ---- exact expectations over the draws (ebmlab.learning.ratio_matching_exact) ---------------
def test_inclusion_probabilities_match_enumeration():
    q = torch.softmax(torch.randn(3, 5, generator=torch.Generator().manual_seed(0)), -1).double()
    for s in (1, 2, 4, 5):
        pi = inclusion_probabilities(q, s)
        idx, prob = _draws(q, s, False)
        want = torch.zeros_like(q)
        for k in range(s):
            want += prob @ torch.nn.functional.one_hot(idx[:, k], 5).double()
        assert torch.allclose(pi, want, atol=1e-12)
        assert torch.allclose(pi.sum(-1), torch.full((3,), float(s), dtype=torch.float64))


class _ThreeSpins(EnergyModel):
    """log p(x) = sum_{i<j} J_ij s_i s_j * 2 + b.s (s = 2x - 1), the Ising convention."""

    def __init__(self, theta):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.as_tensor(theta, dtype=torch.float64))

    def log_prob(self, x):
        s = 2.0 * x - 1.0
        j12, j13, j23, *b = self.theta
        pair = j12 * s[:, 0] * s[:, 1] + j13 * s[:, 0] * s[:, 2] + j23 * s[:, 1] * s[:, 2]
        return 2.0 * pair + s @ torch.stack(b)


@pytest.mark.parametrize(
    "objective,estimator,variant,s,replacement,ratio",
    [
        ("eq3", "full", "basic", 1, True, 0.25),
        ("hyvarinen", "full", "basic", 1, True, 1.0),
        ("lyu", "full", "basic", 1, True, 1.0),
        ("hyvarinen", "ggis", "basic", 2, False, 1.0),  # unbiased: same fixed point as full
        ("eq3", "ggis", "advanced", 2, True, None),  # shrinks more than Eq. 3, unevenly
    ],
)
def test_exact_fit_on_three_spins(objective, estimator, variant, s, replacement, ratio):
    true = torch.tensor([0.4, -0.3, 0.2, 0.3, -0.2, 0.1], dtype=torch.float64)
    model = _ThreeSpins(true)
    x = binary_states(0, 8, 3).double()
    with torch.no_grad():
        p_data = torch.softmax(model.log_prob(x), 0)
    start = 0.9 * true * (ratio or 0.25)
    fit, residual = stationary_point(
        model,
        start,
        1e-12,
        states=x,
        p_data=p_data,
        objective=objective,
        estimator=estimator,
        proposal="value",
        variant=variant,
        s=s,
        replacement=replacement,
    )
    assert residual < 1e-5
    r = fit / true
    if ratio is not None:
        assert torch.allclose(r, torch.full_like(r, ratio), atol=1e-6), r
    else:
        assert float(r.max()) < 0.24 and float(r.max() - r.min()) > 0.01, r


@pytest.mark.parametrize("objective", ["hyvarinen", "lyu"])
def test_advanced_estimator_is_not_consistent(objective):
    """The expected gradient of basic vanishes at the data model; that of advanced (Eq. 11,
    the unweighted sum) does not: its coefficients s n(i) / pi_i are not constant."""
    true = torch.tensor([0.4, -0.3, 0.2, 0.3, -0.2, 0.1], dtype=torch.float64)
    model = _ThreeSpins(true)
    x = binary_states(0, 8, 3).double()
    with torch.no_grad():
        p_data = torch.softmax(model.log_prob(x), 0)
    norms = {}
    for variant, replacement in (("basic", False), ("advanced", True), ("advanced", False)):
        sur = expected_surrogate(
            model, x, p_data, objective, "ggis", "value", variant, 2, replacement
        )
        norms[variant, replacement] = float(torch.autograd.grad(sur, model.theta)[0].abs().max())
    assert norms["basic", False] < 1e-12
    assert norms["advanced", True] > 1e-3 and norms["advanced", False] > 1e-3, norms


def test_expected_surrogate_of_full_is_the_expected_loss():
    model = _mlp(0, 4.0)
    x, p_data = _states(), _p(_mlp(1, 4.0))
    for objective in ("eq3", "hyvarinen", "lyu"):
        sur = expected_surrogate(model, x, p_data, objective, "full", "value", "basic", 1, True)
        assert torch.allclose(sur, _expected_loss(model, p_data, objective), rtol=1e-12)


# ---- (c) configuration ----------------------------------------------------------------------
@pytest.fixture
def _hydra():
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        yield
    GlobalHydra.instance().clear()


@pytest.mark.parametrize("learner", ["rm", "rmwggis", "rmwggis_basic", "rmwrand"])
@pytest.mark.parametrize("objective", ["eq3", "hyvarinen", "lyu"])
def test_objective_is_a_command_line_choice(learner, objective, _hydra):
    overrides = [
        "experiment=rmwggis/table3_ising_learning",
        f"learner={learner}",
        f"learner.objective={objective}",
        "learner.proposal=slope",
    ]
    cfg = compose("config", overrides=overrides)
    validate_node(cfg.learner, "learner")
    lr = instantiate(cfg.learner)
    assert isinstance(lr, RatioMatchingLearner)
    assert lr.objective == objective and lr.proposal == "slope"
    want = {"rm": "full", "rmwggis": "ggis", "rmwggis_basic": "ggis", "rmwrand": "uniform"}
    assert lr.estimator == want[learner]


@pytest.mark.parametrize(
    "key,value", [("objective", "consistent"), ("estimator", "rmwggis"), ("proposal", "exact")]
)
def test_unknown_objective_estimator_or_proposal_fails_before_compute(key, value, _hydra):
    cfg = compose("config", overrides=["experiment=rmwggis/table3_ising_learning"])
    cfg.learner[key] = value
    with pytest.raises(ConfigError) as e:
        validate_node(cfg.learner, "learner")
    assert e.value.key == f"learner.{key}"


def test_consistent_learner_trains_an_mlp(gen):
    """One learner built from the config with a consistent objective runs and lowers its
    exact expected loss on an enumerable MLP target."""
    truth = _mlp(0, 4.0)
    p_data = _p(truth)
    data = _states()[torch.multinomial(p_data, 2000, True, generator=gen)]
    model = _perturbed(truth, seed=2)
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=["learner=rmwggis_basic", "learner.objective=hyvarinen"])
    GlobalHydra.instance().clear()
    lr = instantiate(cfg.learner, s=2, lr=1e-2, batch_size=200, weight_decay=0.0)
    lr.setup(model, data, gen)

    def loss(m) -> float:
        return float(_expected_loss(m, p_data, "hyvarinen").detach())

    before = loss(model)
    for _ in range(100):
        lr.step(model, gen)
    assert loss(model) < before - 0.5 * (before - loss(truth)), (before, loss(model), loss(truth))


def _lattice_samples(n: int, gen):
    from ebmlab.models.ising import LatticeIsing

    truth = LatticeIsing(n_side=3, sigma=0.3, bias=0.0)
    states = binary_states(0, 512, 9)
    with torch.no_grad():
        p = torch.softmax(truth.log_prob(states).double(), 0)
    return truth, states[torch.multinomial(p, n, replacement=True, generator=gen)]


@pytest.mark.parametrize("learner", ["rmwggis_basic", "rm"])
def test_hyvarinen_learns_couplings_beyond_sigma_over_4_on_small_ising(learner, gen):
    """3x3 periodic lattice, sigma 0.3, 4,000 exact samples, 600 Adam steps: Hyvarinen's
    objective moves the edge couplings well past Eq. (3)'s limit sigma / 4 = 0.075 (its
    exact-expectation fit is sigma; the full-batch minimiser on these samples has edge mean
    0.31)."""
    from ebmlab.models.ising import DenseIsing

    truth, data = _lattice_samples(4000, gen)
    torch.manual_seed(0)
    model = DenseIsing(dim=9, init_scale=0.01, learn_bias=True)
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=[f"learner={learner}", "learner.objective=hyvarinen"])
    GlobalHydra.instance().clear()
    lr = instantiate(cfg.learner, s=4, lr=0.02, batch_size=200, weight_decay=0.0, grad_clip=0.0)
    lr.setup(model, data, gen)
    for _ in range(600):
        lr.step(model, gen)
    j = model.J.detach()
    edge = truth.J > 0
    off = ~edge & ~torch.eye(9, dtype=torch.bool)
    assert 0.2 < float(j[edge].mean()) < 0.4, j[edge]
    assert float(j[off].abs().mean()) < 0.5 * float(j[edge].mean()), j[off]


def test_lyu_sample_objective_is_unbounded_below_when_a_neighbour_is_unseen():
    """Lyu's form is consistent in expectation under a strictly positive p_data, but on data
    where a neighbour never occurs (one bit, every sample x = 1) its sample loss
    r^2 - 2 / r (r = q(0) / q(1)) has no minimum: it falls without bound as the model
    pushes the unseen state away. Hyvarinen's stays in [0, d]."""

    class Field(EnergyModel):
        def __init__(self, b):
            super().__init__()
            self.b = torch.nn.Parameter(torch.tensor([b], dtype=torch.float64))

        def log_prob(self, x):
            return (2.0 * x - 1.0) @ self.b

    x = torch.ones(10, 1, dtype=torch.float64)
    with torch.no_grad():
        lyu = [float(full_loss(Field(b), x, "lyu", "mean", 0)) for b in (1.0, 5.0, 10.0)]
        hyv = [float(full_loss(Field(b), x, "hyvarinen", "mean", 0)) for b in (1.0, 5.0, 10.0)]
    assert lyu[0] > lyu[1] > lyu[2] and lyu[2] < -1e8
    assert all(0.0 <= v <= 1.0 for v in hyv)
