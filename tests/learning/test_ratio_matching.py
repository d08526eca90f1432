import itertools
import math
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from torch import nn

from ebmlab.errors import ConfigError, DivergenceError
from ebmlab.learning.ratio_matching import (
    flip_all,
    flip_at,
    full_loss,
    gradient_proposal,
    ratio_matching_loss,
    ratio_matching_terms,
    rmwggis_loss,
    rmwrand_loss,
)
from ebmlab.learning.ratio_matching_learner import RatioMatchingLearner
from ebmlab.models.base import EnergyModel
from ebmlab.models.enumeration import binary_states
from ebmlab.models.ising import DenseIsing, LatticeIsing
from ebmlab.models.mlp_energy import MLPEnergy

CONF = Path(__file__).resolve().parents[2] / "conf"


def _model(d: int, seed: int = 0, hidden: int = 16) -> MLPEnergy:
    torch.manual_seed(seed)
    m = MLPEnergy(dim=d, hidden_dim=hidden, num_layers=2, learn_beta=True).double()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(3.0)  # spread energies so that every term differs
    return m


def _bits(n: int, d: int, gen) -> torch.Tensor:
    return torch.randint(0, 2, (n, d), generator=gen).double()


class Linear(EnergyModel):
    """E(x) = w.x + c: the first-order neighbour energies are exact."""

    def __init__(self, w):
        super().__init__()
        self.w = nn.Parameter(w)

    def log_prob(self, x):
        return -(x @ self.w)


def _brute_rm(model, x):
    out = []
    for b in range(x.shape[0]):
        e = -float(model.log_prob(x[b : b + 1]).detach())
        tot = 0.0
        for i in range(x.shape[1]):
            y = x[b].clone()
            y[i] = 1 - y[i]
            tot += math.exp(2 * (e + float(model.log_prob(y[None]).detach())))
        out.append(tot)
    return torch.tensor(out, dtype=torch.float64)


def test_flip_all():
    x = torch.tensor([[1.0, 0.0, 1.0]])
    assert flip_all(x)[0].tolist() == [[0, 0, 1], [1, 1, 1], [1, 0, 0]]


def test_flip_at_flips_exactly_the_drawn_bit_of_its_own_row():
    x = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    out = flip_at(x, torch.tensor([[0, 2], [1, 1]]))
    assert out.dtype == x.dtype and out.shape == (2, 2, 3)
    assert out.tolist() == [[[0, 0, 1], [1, 0, 0]], [[0, 1, 1], [0, 1, 1]]]
    assert x.tolist() == [[1, 0, 1], [0, 0, 1]]  # the input is not modified


def test_rm_matches_double_loop(gen):
    model, x = _model(7), _bits(5, 7, gen)
    per = ratio_matching_loss(model, x, reduction="none")
    assert torch.allclose(per, _brute_rm(model, x), rtol=1e-10)
    assert torch.allclose(ratio_matching_loss(model, x), per.mean())
    assert torch.allclose(ratio_matching_loss(model, x, chunk_size=4), per.mean())


@pytest.mark.parametrize("objective", ["eq3", "hyvarinen"])
def test_chunked_full_loss_has_the_unchunked_gradient(gen, objective):
    # chunk_size only changes how many flipped neighbours go through the network at once (a
    # large speed-up for the R-GCN graph energy on CPU): same loss, same parameter gradient
    model, x = _model(7), _bits(6, 7, gen)
    grads = []
    for chunk in (0, 14):  # 14 // 7 = 2 rows per chunk: three chunks
        model.zero_grad()
        full_loss(model, x, objective, "mean", chunk, "generic").backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert grads[0].abs().max() > 0
    assert torch.allclose(grads[0], grads[1], rtol=1e-10, atol=1e-12)


def test_sampled_terms_pair_each_sample(gen):
    # distinct samples and distinct indices per sample: a term computed from another
    # sample's energy or neighbour (the reference's reshape-order bug) cannot match
    n, d, s = 6, 8, 3
    model, x = _model(d), _bits(n, d, gen)
    x[:, 0] = torch.arange(n) % 2
    idx = torch.stack([torch.randperm(d, generator=gen)[:s] for _ in range(n)])
    terms = ratio_matching_terms(model, x, idx).detach()
    for b, t in itertools.product(range(n), range(s)):
        y = x[b].clone()
        y[idx[b, t]] = 1 - y[idx[b, t]]
        with torch.no_grad():
            want = math.exp(2 * float(model.log_prob(y[None]) - model.log_prob(x[b : b + 1])))
        assert float(terms[b, t]) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("fn", ["ggis", "rand"])
def test_advanced_with_all_indices_is_full_rm(fn, gen):
    d = 9
    model, x = _model(d, seed=1), _bits(8, d, gen)
    if fn == "ggis":
        est = rmwggis_loss(model, x, s=d, variant="advanced", generator=gen, reduction="none")
    else:
        est = rmwrand_loss(model, x, s=d, generator=gen, replacement=False, reduction="none")
    assert torch.allclose(est, ratio_matching_loss(model, x, reduction="none"), rtol=1e-10)


def test_gradient_proposal_sign_and_form(gen):
    # for a linear energy E(x) - E(x_-i) = (2x_i - 1) w_i exactly, so the gradient-guided
    # proposal equals the optimal one (Fact 1): n*(i) ∝ exp(2 (E(x) - E(x_-i)))
    d = 10
    w = torch.randn(d, generator=gen, dtype=torch.float64)
    model, x = Linear(w), _bits(4, d, gen)
    e_x, log_q = gradient_proposal(model, x)
    e_nb = -model.log_prob(flip_all(x).reshape(-1, d)).reshape(4, d)
    want = torch.log_softmax(2 * (e_x[:, None] - e_nb), dim=-1)
    assert torch.allclose(log_q, want.detach(), atol=1e-12)
    assert not log_q.requires_grad and e_x.requires_grad


def _grouped_estimates(fn, model, x, reps, gen):
    xr = x.repeat_interleave(reps, dim=0)
    est = fn(model, xr, gen).reshape(x.shape[0], reps)
    return est.mean(1), est.std(1) / math.sqrt(reps)


@pytest.mark.parametrize("fn", ["ggis", "rand"])
@pytest.mark.parametrize("replacement", [True, False])
def test_basic_estimator_unbiased(fn, replacement, gen):
    """With replacement: weights 1 / (s n(i)) (Eq. 6); without: Des Raj's ordered weights."""
    d, s, reps = 10, 3, 4000
    model, x = _model(d, seed=2), _bits(4, d, gen)
    full = ratio_matching_loss(model, x, reduction="none").detach()
    if fn == "ggis":

        def est_fn(m, xr, g):
            return rmwggis_loss(m, xr, s, "basic", replacement, g, reduction="none").detach()
    else:

        def est_fn(m, xr, g):
            return rmwrand_loss(m, xr, s, g, "basic", replacement, reduction="none").detach()

    mean, se = _grouped_estimates(est_fn, model, x, reps, gen)
    z = (mean - full) / se
    assert torch.all(z.abs() < 4.5), (mean, full, se)
    # sanity: the advanced (unweighted) objective is NOT an unbiased estimate of RM
    adv = rmwggis_loss(model, x.repeat_interleave(200, 0), s, "advanced", True, gen, "none")
    assert not torch.allclose(adv.detach().reshape(4, 200).mean(1), full, rtol=0.05)


def test_gradient_stopped_through_importance_weights():
    d, s = 8, 3
    model, x = _model(d, seed=3), _bits(5, d, torch.Generator().manual_seed(1))
    loss = rmwggis_loss(model, x, s, "basic", True, torch.Generator().manual_seed(7))
    got = torch.autograd.grad(loss, list(model.parameters()))

    # same draw rebuilt by hand, weights as constants vs weights carrying a gradient
    xg = x.clone().requires_grad_(True)
    e_x = -model.log_prob(xg)
    (g,) = torch.autograd.grad(e_x.sum(), xg, create_graph=True)
    log_q = torch.log_softmax(2 * (2 * x - 1) * g, -1)
    idx = torch.multinomial(
        log_q.detach().double().exp(), s, True, generator=torch.Generator().manual_seed(7)
    )
    terms = ratio_matching_terms(model, x, idx)
    w = torch.exp(-log_q.gather(1, idx)) / s
    const = torch.autograd.grad(
        (w.detach() * terms).sum(-1).mean(), list(model.parameters()), retain_graph=True
    )
    through = torch.autograd.grad((w * terms).sum(-1).mean(), list(model.parameters()))
    assert all(torch.allclose(a, b, rtol=1e-8, atol=1e-12) for a, b in zip(got, const))
    assert not all(torch.allclose(a, b, rtol=1e-3) for a, b in zip(got, through))


def test_without_replacement_indices_distinct():
    d, s = 12, 6
    model, x = _model(d), _bits(50, d, torch.Generator().manual_seed(0))
    _, log_q = gradient_proposal(model, x)
    g = torch.Generator().manual_seed(5)
    idx = torch.multinomial(log_q.exp(), s, replacement=False, generator=g)
    assert all(len(set(r)) == s for r in idx.tolist())
    with pytest.raises(ConfigError) as e:
        rmwggis_loss(model, x, s=d + 1, replacement=False, generator=g)
    assert e.value.key == "s"


def _toy_data(n, gen):
    # two noisy modes in {0,1}^8
    modes = torch.tensor([[1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 1, 1, 0, 1]], dtype=torch.float32)
    x = modes[torch.randint(0, 2, (n,), generator=gen)]
    noise = (torch.rand(x.shape, generator=gen) < 0.05).float()
    return (x + noise) % 2


def _exact_nll(model, x):
    states = torch.tensor(list(itertools.product([0.0, 1.0], repeat=8)))
    with torch.no_grad():
        log_z = torch.logsumexp(model.log_prob(states), 0)
        return float(log_z - model.log_prob(x).mean())


def _learner_kwargs(name: str, **overrides) -> dict:
    """conf/learner/<name>.yaml as constructor arguments (``overrides`` merged in)."""
    cfg = OmegaConf.to_container(OmegaConf.load(CONF / "learner" / f"{name}.yaml"))
    cfg.pop("_target_")
    return {**cfg, **overrides}


def _learner(name: str, **overrides) -> RatioMatchingLearner:
    return RatioMatchingLearner(**_learner_kwargs(name, **overrides))


@pytest.mark.parametrize("variant", ["advanced", pytest.param("basic", marks=pytest.mark.slow)])
def test_rmwggis_training_reduces_rm_objective(variant):
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    model = MLPEnergy(dim=8, hidden_dim=32, num_layers=2, learn_beta=True)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)  # a rough initial energy, so the RM objective starts high
    learner = _learner("rmwggis", variant=variant, s=3, lr=3e-3)
    learner.setup(model, _toy_data(32, gen), gen)
    test = _toy_data(500, torch.Generator().manual_seed(99))
    with torch.no_grad():
        before = float(ratio_matching_loss(model, test))
    nll_before = _exact_nll(model, test)
    for _ in range(150):
        out = learner.update(model, _toy_data(32, gen), gen)  # a fresh batch each time
        assert math.isfinite(out["loss"]) and out["grad_norm"] >= 0
    with torch.no_grad():
        after = float(ratio_matching_loss(model, test))
    assert learner.iteration == 150
    assert after < 0.3 * before, (before, after)
    # exact NLL by enumeration (data entropy is about 2.3 nats, uniform 5.5, init 6.7)
    assert _exact_nll(model, test) < nll_before - 1.5


def test_step_draws_its_batch_with_replacement_then_updates():
    data = _toy_data(64, torch.Generator().manual_seed(3))
    runs = []
    for by_hand in (False, True):
        torch.manual_seed(0)
        model = MLPEnergy(dim=8, hidden_dim=16, num_layers=1, learn_beta=True)
        learner, g = _learner("rmwggis", s=3, batch_size=16), torch.Generator().manual_seed(5)
        learner.setup(model, data, g)
        for _ in range(3):
            if by_hand:
                idx = torch.randint(0, 64, (16,), generator=g)
                out = learner.update(model, data[idx], g)
            else:
                out = learner.step(model, g)
        runs.append((out["loss"], [p.detach().clone() for p in model.parameters()]))
    assert torch.equal(runs[0][0], runs[1][0])
    assert all(torch.equal(a, b) for a, b in zip(runs[0][1], runs[1][1]))


def test_learner_gradient_clipping():
    gen = torch.Generator().manual_seed(0)
    model = MLPEnergy(dim=8, hidden_dim=16, num_layers=1, learn_beta=True)
    learner = _learner("rm", grad_clip=1e-3, lr=1e-3)
    learner.setup(model, _toy_data(32, gen), gen)
    out = learner.update(model, _toy_data(32, gen), gen)
    clipped = torch.sqrt(sum((p.grad**2).sum() for p in model.parameters()))
    assert out["grad_norm"] > 1e-3  # the reported norm is the norm before clipping
    assert float(clipped) == pytest.approx(1e-3, rel=1e-4)


def test_learner_divergence_raises():
    gen = torch.Generator().manual_seed(0)
    model = MLPEnergy(dim=8, hidden_dim=16, num_layers=1, learn_beta=True)
    learner = _learner("rmwrand", s=2, batch_size=16)
    learner.setup(model, _toy_data(64, gen), gen)
    learner.step(model, gen)
    with torch.no_grad():
        model.out.bias.fill_(float("nan"))
    with pytest.raises(DivergenceError) as e:
        learner.step(model, gen)
    assert e.value.step == 2 and "loss" in str(e.value)


@pytest.mark.parametrize(
    "kw,key",
    [
        ({"objective": "nce"}, "objective"),
        ({"objective": "rm"}, "objective"),
        ({"estimator": "rmwggis"}, "estimator"),
        ({"proposal": "exact"}, "proposal"),
        ({"variant": "fancy"}, "variant"),
        ({"s": 0}, "s"),
        ({"lr": 0.0}, "lr"),
        ({"grad_clip": -1.0}, "grad_clip"),
        ({"weight_decay": -1.0}, "weight_decay"),
        ({"batch_size": 0}, "batch_size"),
        ({"l1": -1.0}, "l1"),
    ],
)
def test_learner_config_errors(kw, key):
    with pytest.raises(ConfigError) as e:
        _learner("rmwggis", **kw)
    assert e.value.key == key


def test_s_larger_than_dim_without_replacement_fails_at_setup(gen):
    learner = _learner("rmwggis", s=10, replacement=False)
    with pytest.raises(ConfigError) as e:
        learner.setup(DenseIsing(dim=4, init_scale=0.01, learn_bias=True), torch.zeros(3, 4), gen)
    assert e.value.key == "learner.s"
    _learner("rmwrand", s=10, replacement=True).check_data_dim(4)  # with replacement: fine


@pytest.mark.parametrize(
    "name,estimator,lr",
    [("rm", "full", 5e-4), ("rmwggis", "ggis", 5e-4), ("rmwrand", "uniform", 1e-4)],
)
def test_learner_configs_instantiate(name, estimator, lr):
    cfg = OmegaConf.load(CONF / "learner" / f"{name}.yaml")
    learner = instantiate(cfg)
    assert isinstance(learner, RatioMatchingLearner) and not learner.needs_sampler
    assert learner.objective == "eq3" and learner.estimator == estimator and learner.lr == lr
    assert learner.proposal == "value"
    assert learner.s == 10 and learner.weight_decay == 1e-4 and learner.grad_clip == 1.0
    assert learner.batch_size == 128 and learner.l1 == 0.0


# ---- Ising learning (RMwGGIS App. J): L1 on J, projection, recovering the couplings ----------
def _exact_samples(model, n: int, gen) -> torch.Tensor:
    states = binary_states(0, 1 << model.dim, model.dim)
    with torch.no_grad():
        p = torch.softmax(model.log_prob(states).double(), 0)
    return states[torch.multinomial(p, n, replacement=True, generator=gen)]


def _ising_learner(objective: str, **kw) -> RatioMatchingLearner:
    """The App. J setting: no weight decay, no clipping."""
    return _learner(objective, weight_decay=0.0, grad_clip=0.0, **kw)


@pytest.mark.parametrize(
    "objective,variant,replacement",
    [("rm", "advanced", False), ("rmwggis", "advanced", False), ("rmwggis", "basic", True)],
)
def test_learns_small_ising_structure(objective, variant, replacement, gen):
    """3x3 periodic lattice, sigma 0.3, 4,000 exact samples.

    The paper's objective (Eq. 3, Lyu's form E sum_i exp(2 (E(x) - E(x_-i)))) is minimised by
    a model whose conditional log-odds are the data's divided by 4 (one bit with P(1) = a:
    minimise a r^2 + (1 - a) / r^2 over the odds r -> r^4 = (1 - a) / a), so the learned
    couplings come out near sigma / 4 = 0.075, not sigma (Hyvarinen's sigmoid^2 form, Eq. 2,
    recovers sigma); RMwGGIS advanced shrinks more (exact fit, s = 4 without replacement:
    0.203 sigma = 0.061; scripts/ratio_matching_exact_fits.py). Edges must stand out from
    non-edges.
    """
    truth = LatticeIsing(n_side=3, sigma=0.3, bias=0.0)
    data = _exact_samples(truth, 4000, gen)
    torch.manual_seed(0)
    model = DenseIsing(dim=9, init_scale=0.01, learn_bias=True)
    learner = _ising_learner(
        objective, variant=variant, s=4, replacement=replacement, lr=0.005, batch_size=200
    )
    learner.setup(model, data, gen)
    for _ in range(300):
        learner.step(model, gen)
    j = model.J.detach()
    edge = truth.J > 0
    off = ~edge & ~torch.eye(9, dtype=torch.bool)
    assert 0.045 < float(j[edge].mean()) < 0.1, j[edge]
    assert float(j[off].abs().mean()) < 0.03, j[off]


def test_projects_and_applies_l1(gen):
    data = _exact_samples(LatticeIsing(n_side=3, sigma=0.3, bias=0.0), 2000, gen)
    norms = {}
    for l1 in (0.0, 1.0):
        torch.manual_seed(0)
        model = DenseIsing(dim=9, init_scale=0.01, learn_bias=True)
        with torch.no_grad():  # asymmetric, non-zero diagonal: the projection must fix it
            model.J_raw.add_(0.05 * torch.triu(torch.ones(9, 9)))
        learner = _ising_learner("rm", lr=0.01, batch_size=100, l1=l1)
        learner.setup(model, data, gen)
        for _ in range(300):
            info = learner.step(model, gen)
        j = model.J.detach()
        assert torch.equal(j, j.T) and torch.all(j.diagonal() == 0)
        assert info["loss"] >= info["rm_loss"]
        norms[l1] = float(j.abs().sum())
    assert norms[1.0] < 0.75 * norms[0.0], norms


def test_state_round_trip(gen):
    data = (torch.rand(100, 5, generator=gen) < 0.5).float()
    model = DenseIsing(dim=5, init_scale=0.01, learn_bias=True)
    learner = _ising_learner("rmwggis", s=2, batch_size=10)
    learner.setup(model, data, gen)
    learner.step(model, gen)
    other = _ising_learner("rmwggis", s=2, batch_size=10)
    other.setup(model, data, gen)
    other.load_state_dict(learner.state_dict())
    assert other.iteration == 1 and other.optimizer.state_dict()["state"]


def test_model_and_dataset_configs_instantiate():
    root = OmegaConf.create(
        {
            "dataset": OmegaConf.load(CONF / "dataset" / "synthetic_2d.yaml"),
            "model": OmegaConf.load(CONF / "model" / "mlp_energy.yaml"),
        }
    )
    ds, model = instantiate(root.dataset), instantiate(root.model)
    assert ds.dim == model.dim == 32 and ds.name == "2spirals"
    x = ds.sample(5, torch.Generator().manual_seed(0))
    assert model.log_prob(x).shape == (5,)
    n_beta = sum(1 for n, _ in model.named_parameters() if "beta" in n)
    assert n_beta == 1 and len(model.hidden) == 3 and model.hidden[0].out_features == 256


def _bench_module():
    import benchmarks.bench_ratio_matching as mod

    return mod


def test_bench_table_takes_medians_over_rounds_per_neighbours_mode():
    def row(method, t, mem, k, nb="generic", dim=64):
        return {
            "dim": dim,
            "method": method,
            "neighbours": nb,
            "round": k,
            "time_s": t,
            "cpu_time_s": 2 * t,
            "mem_bytes": mem * 2**20,
        }

    rows = [row("rm", t, 100, k) for k, t in enumerate((2.0, 9.0, 1.0))]
    rows += [row("rmwggis", t, 4, k) for k, t in enumerate((0.5, 0.5, 0.4))]
    rows += [{"dim": 128, "method": "rm", "neighbours": "model", "error": "timeout after 5 s"}]
    t = _bench_module().table(rows, clock="wall")
    assert "| generic | 64 | 3 | 2.0000 | 0.5000 | 4.0x | 100.0 | 4.0 | 96.0% |" in t
    assert "| model | 128 | 1 | timeout after 5 s | - | - | - | - | - |" in t
    assert "| 4.0000 | 1.0000 | 4.0x |" in _bench_module().table(rows, clock="cpu")


@pytest.mark.slow
def test_bench_runs_end_to_end(tmp_path, capsys):
    import json

    out = tmp_path / "rm"
    _bench_module().main(
        ["--dims", "16", "--rounds", "1", "--repeats", "1", "--device", "cpu", "--out", str(out)]
        + ["--neighbours", "generic,model"]
    )
    rows = json.loads(out.with_suffix(".json").read_text())["rows"]
    assert {(r["method"], r["neighbours"]) for r in rows} == {
        (m, nb) for m in ("rm", "rmwggis") for nb in ("generic", "model")
    }
    assert all(r["cpu_time_s"] > 0 and r["mem_bytes"] >= 0 and r["round"] == 0 for r in rows)
    assert "| generic | 16 | 1 |" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["rm", "rmwggis"])
def test_model_and_generic_neighbours_train_the_same_ising(name):
    """learner.neighbours=model (the Ising closed form) and =generic (flipped vectors as a
    batch) take the same optimiser steps: only the cost differs."""
    params = []
    for neighbours in ("model", "generic"):
        torch.manual_seed(0)
        model = DenseIsing(9, 0.1, True)
        data = torch.randint(0, 2, (40, 9), generator=torch.Generator().manual_seed(1)).float()
        learner = _learner(name, neighbours=neighbours, batch_size=16, l1=0.01, s=4)
        learner.setup(model, data, torch.Generator().manual_seed(2))
        gen = torch.Generator().manual_seed(3)
        for _ in range(5):
            learner.step(model, gen)
        params.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert torch.allclose(params[0], params[1], atol=1e-5)


def test_unknown_neighbours_is_a_config_error():
    with pytest.raises(ConfigError, match="neighbours"):
        _learner("rm", neighbours="fast")
