"""Exactness of Gibbs, GWG, DMALA (binary + ordinal); DULA bias vs step size; negative control.

Two kinds of check (see tests/exactness.py): noise-free stationary distributions of the
exact transition kernels built from ``log_proposal``, and Monte Carlo runs of the real
``step`` code compared with the enumerated target against an iid noise floor.
"""

from __future__ import annotations

import pytest
import torch

from ebmlab.samplers.base import mh_accept
from ebmlab.samplers.dlp import DMALA, DULA
from ebmlab.samplers.gibbs import RandomScanGibbs, SweepGibbs
from ebmlab.samplers.gwg import GWG, GWGDistinct
from tests.exactness import (
    assert_exact,
    empirical_probs,
    exact_probs,
    frustrated_ising,
    kernel_marginal_tv,
    kernel_stationary,
    kernel_tv,
    ordinal_target,
    proposal_matrix,
    random_init,
    rows_sum_to_one,
    run_chains,
    sample_tv,
    strong_rbm,
    transition_matrix,
    tv_distance,
    tv_noise_floor,
)
from tests.helpers import from_conf

# d=8 Ising (256 states) keeps kernels and histograms cheap; d=10 is checked once below
TARGETS = {
    "ising": lambda: frustrated_ising(d=8),
    "ising10": frustrated_ising,
    "rbm": strong_rbm,
    "ordinal": ordinal_target,
    "ordinal3": lambda: ordinal_target(d=3),
}


@pytest.fixture(scope="module")
def ising():
    return frustrated_ising(d=8)


@pytest.fixture(scope="module")
def rbm():
    return strong_rbm()


# ---------------------------------------------------------------- exact kernels (no noise)


@pytest.mark.parametrize(
    "target,sampler",
    [
        ("rbm", DMALA(0.4, None)),
        ("rbm", DMALA(1.5, None)),
        ("rbm", GWG(1)),
        ("ordinal3", DMALA(0.4, None)),
        ("ising", DMALA(0.4, None)),
        ("ising", GWG(1)),
    ],
    ids=["rbm-dmala", "rbm-dmala-big", "rbm-gwg1", "ord-dmala", "ising-dmala", "ising-gwg1"],
)
def test_mh_kernel_is_exact(target, sampler):
    model = TARGETS[target]()
    assert rows_sum_to_one(proposal_matrix(sampler, model))
    assert kernel_tv(sampler, model) < 1e-8


def test_preconditioned_dmala_kernel_is_exact(rbm):
    g = torch.linspace(0.5, 2.0, rbm.dim).tolist()
    s = DMALA(0.3, precond=g)
    Q = proposal_matrix(s, rbm)
    assert rows_sum_to_one(Q)
    assert kernel_tv(s, rbm) < 1e-8
    # the preconditioner really changes the proposal
    assert (Q - proposal_matrix(DMALA(0.3, None), rbm)).abs().max() > 1e-3
    ordinal = ordinal_target(d=3)
    assert kernel_tv(DMALA(0.3, precond=[0.5, 1.0, 2.0]), ordinal) < 1e-8


@pytest.mark.parametrize("target", ["ising", "ordinal3"])
def test_dula_bias_decreases_with_step_size(target):
    """DLP Thm 5.1: for log-quadratic targets DULA's bias -> 0 as alpha -> 0 (noise-free TV)."""
    model = TARGETS[target]()
    tvs = [kernel_tv(DULA(a, None), model) for a in (0.5, 0.25, 0.1)]
    assert tvs[0] > 1.5 * tvs[1] > 1.5 * 1.5 * tvs[2]
    assert tvs[2] < 0.01
    assert tvs[0] > 0.05  # unadjusted is biased at a large step


def test_dula_bias_on_non_quadratic_target_stays(rbm):
    """On the RBM (not log-quadratic) DULA's bias shrinks with alpha but does not vanish."""
    tvs = [kernel_tv(DULA(a, None), rbm) for a in (0.5, 0.25, 0.1)]
    assert tvs[0] > tvs[1] > tvs[2] > 0.01


# ---------------------------------------------------------------- Monte Carlo on step()


# (target, sampler, chains, steps): the default tier is sized for a 2-core CPU; the slow
# tier repeats it with 2x the chains (tighter floor) and more steps.
FAST = [
    ("ising", RandomScanGibbs(), 10000, 120),
    ("ising", GWG(1), 10000, 50),
    ("rbm", GWG(3), 10000, 50),
    ("rbm", GWGDistinct(3, 0.0), 10000, 80),
    ("rbm", GWGDistinct(2, 0.1), 10000, 80),
    ("ising", GWGDistinct(4, 0.1), 10000, 150),
    ("rbm", DMALA(0.4, None), 10000, 50),
    ("rbm", SweepGibbs(), 5000, 6),
    ("ordinal3", RandomScanGibbs(), 5000, 60),
    ("ordinal3", DMALA(0.4, None), 5000, 40),
]
FAST_IDS = ["ising-gibbs", "ising-gwg1", "rbm-gwg3", "rbm-gwg3-distinct", "rbm-gwg2-distinct",
            "ising-gwg4-distinct", "rbm-dmala", "rbm-sweep", "ord-gibbs", "ord-dmala"]  # fmt: skip
SLOW = [
    ("ising", RandomScanGibbs(), 20000, 150),
    ("ising", GWG(1), 20000, 60),
    ("ising", GWG(3), 20000, 60),
    ("ising", DMALA(0.4, None), 20000, 60),
    ("ising10", DMALA(0.4, None), 20000, 100),
    ("rbm", RandomScanGibbs(), 20000, 150),
    ("rbm", GWG(1), 20000, 60),
    ("rbm", GWG(3), 20000, 60),
    ("rbm", DMALA(0.4, None), 20000, 60),
    ("rbm", DMALA(0.2, None), 20000, 120),
    ("rbm", SweepGibbs(), 10000, 8),
    ("ordinal", RandomScanGibbs(), 10000, 80),
    ("ordinal", DMALA(0.4, None), 10000, 50),
]
SLOW_IDS = [
    "ising-gibbs",
    "ising-gwg1",
    "ising-gwg3",
    "ising-dmala",
    "ising10-dmala",
    "rbm-gibbs",
    "rbm-gwg1",
    "rbm-gwg3",
    "rbm-dmala",
    "rbm-dmala-small-step",
    "rbm-sweep",
    "ord-gibbs",
    "ord-dmala",
]


def _check_matches_target(target, sampler, n_chains, n_steps):
    model = TARGETS[target]()
    if isinstance(sampler, DMALA) or (isinstance(sampler, GWG) and sampler.n_flips == 1):
        # the run is long enough: the exact residual bias from the uniform start is
        # a small fraction of the noise floor
        floor = tv_noise_floor(exact_probs(model), n_chains)
        assert kernel_marginal_tv(sampler, model, n_steps) < 0.25 * floor
    # factor 1: TV below the 99.9% quantile of an iid sample of the same size
    assert_exact(sampler, model, n_chains=n_chains, n_steps=n_steps, seed=1)


@pytest.mark.parametrize("target,sampler,n_chains,n_steps", FAST, ids=FAST_IDS)
def test_sampler_matches_target(target, sampler, n_chains, n_steps):
    _check_matches_target(target, sampler, n_chains, n_steps)


@pytest.mark.slow
@pytest.mark.parametrize("target,sampler,n_chains,n_steps", SLOW, ids=SLOW_IDS)
def test_sampler_matches_target_large(target, sampler, n_chains, n_steps):
    _check_matches_target(target, sampler, n_chains, n_steps)


# GWG with k distinct flips from ONE state (all zeros): an even k alone never changes the
# parity of the number of ones, so such chains stay in half of the space (TV about 0.5); the
# GWG-1 mixture must reach the target. Steps: the exact n-step residual from x = 0 (kernel of
# tests/samplers/test_gwg_distinct.py) is <= 2e-4, far below the floor (about 0.05).
ONE_START = [
    ("rbm", "config", 10000, 200),  # conf/sampler/gwg_distinct.yaml as shipped (k = 6)
    ("ising", (2, 0.1), 10000, 120),
    ("rbm", (3, 0.0), 10000, 120),
]


@pytest.mark.parametrize(
    "target,spec,n_chains,n_steps", ONE_START, ids=["rbm-default", "ising-k2", "rbm-k3"]
)
def test_distinct_flips_reach_the_target_from_one_state(target, spec, n_chains, n_steps):
    model = TARGETS[target]()
    sampler = from_conf("sampler/gwg_distinct") if spec == "config" else GWGDistinct(*spec)
    gen = torch.Generator().manual_seed(3)
    x0 = torch.zeros(n_chains, model.dim)
    x = run_chains(sampler, model, x0, n_steps, gen)
    assert bool((x.sum(1) % 2 == 1).any()), "no chain changed the parity of its start"
    p = exact_probs(model)
    tv, floor = tv_distance(empirical_probs(x, model), p), tv_noise_floor(p, n_chains)
    assert tv <= floor, f"TV {tv:.4f} > iid noise floor {floor:.4f}"


def test_dula_samples_match_its_own_kernel(ising):
    """DULA's step() draws from the same chain as its log_proposal kernel (big alpha: big bias)."""
    s = DULA(0.5, None)
    P = transition_matrix(s, ising)
    pi = kernel_stationary(P)
    n, n_steps = 10000, 30
    # the kernel has mixed after n_steps: its n-step marginal is its stationary law
    assert (
        abs(kernel_marginal_tv(s, ising, n_steps, P) - tv_distance(pi, exact_probs(ising))) < 1e-3
    )
    gen = torch.Generator().manual_seed(2)
    x = run_chains(s, ising, random_init(ising, n, gen), n_steps, gen)
    emp = empirical_probs(x, ising)
    assert tv_distance(emp, pi) <= tv_noise_floor(pi, n)
    # ... and that chain is far from the target: the harness flags it
    assert tv_distance(emp, exact_probs(ising)) > 3 * tv_noise_floor(exact_probs(ising), n)


# ---------------------------------------------------------------- negative control


class NoReverseDMALA(DMALA):
    """Deliberately broken: the MH ratio omits the reverse proposal term log q(x|y)."""

    adjusted = False  # reuse the unadjusted proposal path, then do our own (wrong) MH test

    def step(self, model, state, generator):
        prop, info = super().step(model, state, generator)
        fwd = self.log_proposal(model, state.x, state.grad, prop.x)
        log_ratio = prop.log_prob.float() - state.log_prob.float() - fwd.float()
        accepted, accept_prob = mh_accept(log_ratio, generator)
        return state.select(accepted, prop), info


def test_broken_mh_fails_the_harness(rbm):
    with pytest.raises(AssertionError, match="noise floor"):
        assert_exact(NoReverseDMALA(0.4, None), rbm, n_chains=10000, n_steps=50, seed=1)


def test_harness_flags_unmixed_chains(ising):
    """Too few steps of a slow exact sampler from a uniform start is not the target."""
    tv, floor = sample_tv(RandomScanGibbs(), ising, 20000, 5, seed=0)
    assert tv > 2 * floor
