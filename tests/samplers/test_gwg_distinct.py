"""GWG with distinct flips: the ordered draw without replacement, its probability, and the
GWG-1 mixture that makes an even number of flips ergodic (exact transition kernels)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from ebmlab.errors import ConfigError
from ebmlab.samplers.base import value_and_grad
from ebmlab.samplers.gwg import GWGDistinct
from tests.exactness import (
    enumerate_states,
    exact_probs,
    frustrated_ising,
    kernel_stationary,
    state_index,
    strong_rbm,
    tv_distance,
)
from tests.test_run import run_stderr


def test_ordered_sequence_probabilities_sum_to_one():
    logq = torch.log_softmax(torch.tensor([[0.3, -1.2, 2.0, 0.1, -0.4]]), -1)
    seqs = torch.tensor(list(itertools.permutations(range(5), 3)))  # every ordered triple
    lq = GWGDistinct._sequence_log_q(logq.expand(len(seqs), -1), seqs)
    assert math.isclose(float(lq.double().exp().sum()), 1.0, rel_tol=1e-6)
    # a used prefix of length 1 is the first draw alone: log q(i_1)
    used = torch.zeros(len(seqs), 3, dtype=torch.bool)
    used[:, 0] = True
    lq1 = GWGDistinct._sequence_log_q(logq.expand(len(seqs), -1), seqs, used)
    assert torch.allclose(lq1.double(), logq[0, seqs[:, 0]].double())


def test_draws_are_distinct_follow_the_sequential_law_and_mix_single_flips():
    logq = torch.log_softmax(torch.tensor([1.5, 0.0, -1.0, 0.5]), -1).expand(200000, -1)
    s = GWGDistinct(2, 0.25)
    idx, used = s._draw(logq, torch.Generator().manual_seed(1))
    assert idx.shape == (200000, 2) and bool((idx[:, 0] != idx[:, 1]).all())
    q = logq[0].exp()
    for a, b in [(0, 3), (3, 0), (1, 2)]:
        expect = float(q[a] * q[b] / (1 - q[a]))
        got = float(((idx[:, 0] == a) & (idx[:, 1] == b)).double().mean())
        assert abs(got - expect) < 4 * math.sqrt(expect / 200000), (a, b, got, expect)
    assert bool(used[:, 0].all())
    single = float((~used[:, 1]).double().mean())
    assert abs(single - 0.25) < 4 * math.sqrt(0.25 * 0.75 / 200000)
    # odd k without the mixture: every position used
    assert GWGDistinct(3, 0.0)._draw(logq, torch.Generator().manual_seed(1))[1] is None


def test_more_distinct_flips_than_coordinates_is_a_config_error():
    with pytest.raises(ConfigError, match="n_flips"):
        GWGDistinct(6, 0.1)._draw(torch.zeros(2, 4), torch.Generator().manual_seed(0))
    with pytest.raises(ConfigError, match="n_flips"):  # all of them: x <-> complement only
        GWGDistinct(5, 0.0)._draw(torch.zeros(2, 5), torch.Generator().manual_seed(0))


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.0, True, "x"])
def test_even_flips_need_the_single_flip_mixture(bad):
    with pytest.raises(ConfigError, match="single_flip_prob") as e:
        GWGDistinct(2, bad)
    if bad == 0.0:
        assert "parity" in str(e.value) and "reducible" in str(e.value)


def test_even_flips_without_mixture_fail_before_compute(tmp_path, capsys, monkeypatch):
    argv = ["experiment=dlp/fig3_ising_sampling", "sampler=gwg_distinct"]
    code, err = run_stderr([*argv, "sampler.single_flip_prob=0"], tmp_path, capsys, monkeypatch)
    assert code == 2, err
    assert "sampler.single_flip_prob" in err and "parity" in err and "Traceback" not in err
    assert not (tmp_path / "run" / "checkpoints").exists()


# ----------------------------------------------------------- exact kernel of step()'s moves


def step_kernel(model, k: int, single_flip_prob: float) -> torch.Tensor:
    """The exact transition matrix [S, S] of GWGDistinct's step on the enumerated space:
    with probability p the GWG-1 move, else the ordered k-distinct-flip move, each accepted
    with the sequence MH ratio (GWGDistinct._sequence_log_q, as ``step`` uses it)."""
    X = enumerate_states(model).double()  # float64 throughout: no rounding on the diagonal
    n, d = X.shape
    lp, g = value_and_grad(model, X)
    lp = lp.double()
    logq = GWGDistinct._index_log_probs(X, g).double()
    P = torch.zeros(n, n, dtype=torch.float64)
    moves = [(1, single_flip_prob), (k, 1.0 - single_flip_prob)]
    for m, weight in moves:
        if weight == 0:
            continue
        seqs = torch.tensor(list(itertools.permutations(range(d), m)))  # [L, m]
        L = len(seqs)
        xs = torch.arange(n).repeat_interleave(L)
        idx = seqs.repeat(n, 1)
        mask = torch.zeros(n * L, d, dtype=X.dtype).scatter_(1, idx, 1.0)
        ys = state_index(X[xs] + mask * (1 - 2 * X[xs]), model)
        fwd = GWGDistinct._sequence_log_q(logq[xs], idx).double()
        rev = GWGDistinct._sequence_log_q(logq[ys], idx).double()
        accept = torch.exp(lp[ys] - lp[xs] + rev - fwd).clamp(max=1.0)
        P.index_put_((xs, ys), weight * fwd.exp() * accept, accumulate=True)
    P.fill_diagonal_(0.0)
    return P + torch.diag(1.0 - P.sum(1))


def parity(model) -> torch.Tensor:
    return enumerate_states(model).sum(1).long() % 2


def second_eigenvalue_modulus(P: torch.Tensor) -> float:
    ev = torch.linalg.eigvals(P).abs().sort(descending=True).values
    return float(ev[1])


TARGETS = {"ising": lambda: frustrated_ising(d=8), "rbm": strong_rbm}


@pytest.mark.parametrize("target", ["ising", "rbm"])
def test_even_flips_alone_never_change_parity(target):
    """The defect this sampler had: 2 distinct flips per step keep the parity class of the
    start (the kernel is block-diagonal by parity; eigenvalue 1 twice), so a chain never
    reaches half of the space although the target stays invariant."""
    model = TARGETS[target]()
    P = step_kernel(model, 2, 0.0)
    par = parity(model)
    assert float(P[par[:, None] != par[None, :]].abs().max()) == 0.0
    assert second_eigenvalue_modulus(P) > 1 - 1e-9  # reducible
    pi = exact_probs(model)
    assert float((pi @ P - pi).abs().max()) < 1e-12  # but pi is invariant


@pytest.mark.parametrize("target", ["ising", "rbm"])
@pytest.mark.parametrize("k,p", [(2, 0.1), (4, 0.1), (3, 0.0), (3, 0.2)])
def test_distinct_flip_kernel_is_exact_and_ergodic(target, k, p):
    model = TARGETS[target]()
    P = step_kernel(model, k, p)
    assert bool((P >= -1e-15).all()) and torch.allclose(P.sum(1), torch.ones(len(P)).double())
    assert tv_distance(kernel_stationary(P), exact_probs(model)) < 1e-8
    assert second_eigenvalue_modulus(P) < 1 - 1e-3  # one closed class: pi is THE limit
    par = parity(model)
    assert float(P[par[:, None] != par[None, :]].sum()) > 0  # parity does change
