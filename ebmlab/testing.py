"""Exactness harness for discrete samplers: test that a sampler's chain has the target as its
stationary distribution (``from ebmlab.testing import assert_exact, frustrated_ising``).

Two complementary checks on tiny targets whose normaliser can be enumerated:

1. Monte Carlo (tests the sampler's actual ``step`` code): run many independent
   chains from a uniform random start, keep the final states (iid draws from
   the chain's n-step marginal) and compare their histogram with the exact
   target by total variation. The threshold is the TV an *iid* multinomial
   sample of the same size would exceed only with probability
   ``1 - quantile`` (simulated, :func:`tv_noise_floor`); a sampler with a
   bias clearly above that floor fails. See :func:`assert_exact`.

2. Exact kernel (tests the proposal/acceptance formulas with no noise): a
   sampler exposing ``log_proposal(model, x, grad, y) -> Tensor[batch]`` (log q(y|x)
   given grad log_prob at x) gets its full transition matrix built on the
   enumerated space (MH acceptance added when ``sampler.exact``), and the
   stationary distribution of that matrix is compared with the target. See
   :func:`kernel_stationary` and :func:`kernel_tv`. This is also how the
   asymptotic bias of an unadjusted sampler (DULA) is measured exactly.

Typical use::

    from ebmlab.testing import frustrated_ising, assert_exact
    tv, floor = assert_exact(MySampler(...), frustrated_ising(), n_chains=20000,
                             n_steps=200, seed=0)

Targets: :func:`frustrated_ising` (binary, d=10), :func:`strong_rbm` (binary,
visible marginal, d=8), :func:`ordinal_target` ({0..4}^4). All are
:class:`ebmlab.models.base.EnergyModel` subclasses in float64 so
enumeration is accurate; samplers run on them like on any model.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from ebmlab.models.base import EnergyModel
from ebmlab.samplers.base import value_and_grad

MAX_ENUM = 1 << 16  # refuse to enumerate more states than this

# ---------------------------------------------------------------------------
# tiny targets


class DenseIsing(EnergyModel):
    """log p(x) = 1/2 s^T J s + h.s, s = 2x - 1, J symmetric with zero diagonal."""

    state_kind = "binary"

    def __init__(self, J: Tensor, h: Tensor):
        super().__init__()
        self.dim = int(h.numel())
        self.register_buffer("J", J)
        self.register_buffer("h", h)

    def log_prob(self, x: Tensor) -> Tensor:
        s = 2 * x.to(self.J.dtype) - 1
        return 0.5 * ((s @ self.J) * s).sum(-1) + s @ self.h


class MarginalRBM(EnergyModel):
    """Binary RBM with hidden units summed out: log p(v) = sum softplus(W v + c) + b.v."""

    state_kind = "binary"

    def __init__(self, W: Tensor, b: Tensor, c: Tensor):
        super().__init__()
        self.dim = int(b.numel())
        self.register_buffer("W", W)  # [hidden, visible]
        self.register_buffer("b", b)
        self.register_buffer("c", c)

    def log_prob(self, x: Tensor) -> Tensor:
        v = x.to(self.W.dtype)
        return F.softplus(v @ self.W.T + self.c).sum(-1) + v @ self.b


class QuadraticOrdinal(EnergyModel):
    """Ordinal target on {0..S-1}^d: log p(x) = -1/2 u^T A u + b.u, u = x - (S-1)/2."""

    state_kind = "ordinal"

    def __init__(self, A: Tensor, b: Tensor, n_states: int):
        super().__init__()
        self.dim = int(b.numel())
        self.n_states = int(n_states)
        self.register_buffer("A", A)
        self.register_buffer("b", b)

    def log_prob(self, x: Tensor) -> Tensor:
        u = x.to(self.A.dtype) - (self.n_states - 1) / 2
        return -0.5 * ((u @ self.A) * u).sum(-1) + u @ self.b


def frustrated_ising(
    d: int = 10, seed: int = 0, coupling: float = 0.35, field: float = 0.3
) -> DenseIsing:
    """Dense Ising with random +-coupling couplings (frustrated) and N(0, field^2) fields."""
    g = torch.Generator().manual_seed(seed)
    signs = torch.randint(0, 2, (d, d), generator=g).double() * 2 - 1
    J = torch.triu(signs * coupling, diagonal=1)
    J = J + J.T
    h = torch.randn(d, generator=g, dtype=torch.float64) * field
    return DenseIsing(J, h)


def strong_rbm(
    n_visible: int = 8, n_hidden: int = 6, seed: int = 0, weight_scale: float = 1.5
) -> MarginalRBM:
    """Visible marginal of an RBM with large N(0, weight_scale^2) weights (multimodal)."""
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(n_hidden, n_visible, generator=g, dtype=torch.float64) * weight_scale
    b = torch.randn(n_visible, generator=g, dtype=torch.float64) * 0.5
    # centre the hidden pre-activations so the hidden units are not saturated
    c = -0.5 * W.sum(1) + torch.randn(n_hidden, generator=g, dtype=torch.float64) * 0.5
    return MarginalRBM(W, b, c)


def ordinal_target(d: int = 4, n_states: int = 5, seed: int = 0) -> QuadraticOrdinal:
    """Correlated quadratic + linear log density on {0..n_states-1}^d."""
    g = torch.Generator().manual_seed(seed)
    M = torch.randn(d, d, generator=g, dtype=torch.float64)
    A = 0.25 * (M @ M.T) / d + 0.15 * torch.eye(d, dtype=torch.float64)
    b = torch.randn(d, generator=g, dtype=torch.float64) * 0.4
    return QuadraticOrdinal(A, b, n_states)


# ---------------------------------------------------------------------------
# enumeration and distances


def _n_values(model) -> int:
    kind = model.state_kind
    if kind == "binary":
        return 2
    if kind == "ordinal":
        return int(model.n_states)
    raise ValueError(f"enumeration supports binary and ordinal models, not {kind!r}")


def enumerate_states(model) -> Tensor:
    """All states as a float tensor [S**d, d], ordered by :func:`state_index` (first coordinate
    most significant)."""
    S, d = _n_values(model), int(model.dim)
    n = S**d
    if n > MAX_ENUM:
        raise ValueError(f"{n} states is too many to enumerate (limit {MAX_ENUM})")
    idx = torch.arange(n)
    powers = S ** torch.arange(d - 1, -1, -1)
    digits = (idx[:, None] // powers[None, :]) % S
    return digits.to(torch.get_default_dtype())


def state_index(x: Tensor, model) -> Tensor:
    """Integer index [n] of each state row of x [n, d] (inverse of :func:`enumerate_states`)."""
    S, d = _n_values(model), int(model.dim)
    xi = x.reshape(x.shape[0], -1).round().long().cpu()
    if xi.shape[1] != d or xi.min() < 0 or xi.max() >= S:
        raise ValueError("states outside the model's domain")
    powers = S ** torch.arange(d - 1, -1, -1)
    return (xi * powers).sum(-1)


def exact_probs(model) -> Tensor:
    """Exact target probabilities [S**d] (float64) by enumeration."""
    with torch.no_grad():
        lp = model.log_prob(enumerate_states(model).to(model.device)).double().cpu()
    return torch.softmax(lp, 0)


def empirical_probs(x: Tensor, model) -> Tensor:
    """Histogram [S**d] (float64) of the state rows of x [n, d]."""
    n_total = _n_values(model) ** int(model.dim)
    counts = torch.bincount(state_index(x, model), minlength=n_total)
    return counts.double() / counts.sum()


def tv_distance(p: Tensor, q: Tensor) -> float:
    """Total variation 1/2 sum |p - q|."""
    return 0.5 * float((p.double().cpu() - q.double().cpu()).abs().sum())


def tv_noise_floor(
    probs: Tensor, n_samples: int, quantile: float = 0.999, n_sim: int = 2000, seed: int = 12345
) -> float:
    """The ``quantile`` of TV(empirical, probs) for n_samples iid draws from probs (simulated).

    An exact sampler whose draws are iid exceeds this with probability 1 - quantile.
    """
    p = probs.double().cpu().numpy()
    p = p / p.sum()
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n_samples, p, size=n_sim)
    tvs = 0.5 * np.abs(counts / n_samples - p[None, :]).sum(1)
    return float(np.quantile(tvs, quantile))


# ---------------------------------------------------------------------------
# running chains


def random_init(model, n_chains: int, gen: torch.Generator) -> Tensor:
    """Uniformly random states [n_chains, d] (float, default dtype) on the model's device."""
    S = _n_values(model)
    x = torch.randint(0, S, (n_chains, int(model.dim)), generator=gen)
    return x.to(device=model.device, dtype=torch.get_default_dtype())


def run_chains(
    sampler,
    model,
    x0: Tensor,
    n_steps: int,
    gen: torch.Generator,
    thin: int | None = None,
    stats: dict | None = None,
) -> Tensor:
    """Run ``n_steps`` steps of all chains from x0.

    Returns the final states [chains, d] when ``thin`` is None, else every
    ``thin``-th state concatenated over time, [(n_steps // thin) * chains, d]
    (correlated along time; the noise floor then under-states the noise).
    If ``stats`` is a dict it receives mean accept rate and mean jump over
    all steps and the total n_log_prob / n_grad (including ``init``).
    """
    state = sampler.init(model, x0)
    n_lp, n_g = sampler.init_cost()
    accs, jumps = [], []  # per-step means, kept on the device (no host sync inside the loop)
    kept = []
    for t in range(1, n_steps + 1):
        state, info = sampler.step(model, state, gen)
        n_lp += info.n_log_prob
        n_g += info.n_grad
        if stats is not None:
            accs.append(info.accept_prob.float().mean())
            jumps.append(info.jump.float().mean())
        if thin is not None and t % thin == 0:
            kept.append(state.x.reshape(state.x.shape[0], -1))
    if stats is not None:
        acc = float(torch.stack(accs).double().sum()) if accs else 0.0
        jump = float(torch.stack(jumps).double().sum()) if jumps else 0.0
        stats.update(
            accept_rate=acc / max(n_steps, 1),
            jump=jump / max(n_steps, 1),
            n_log_prob=n_lp,
            n_grad=n_g,
            final_state=state,
        )
    if thin is not None:
        return torch.cat(kept, 0)
    return state.x.reshape(state.x.shape[0], -1)


def sample_tv(
    sampler, model, n_chains: int, n_steps: int, seed: int = 0, quantile: float = 0.999
) -> tuple[float, float]:
    """(TV(final states of n_chains chains, exact target), iid noise floor at ``quantile``)."""
    gen = torch.Generator(device=model.device).manual_seed(seed)
    x0 = random_init(model, n_chains, gen)
    x = run_chains(sampler, model, x0, n_steps, gen)
    p = exact_probs(model)
    return tv_distance(empirical_probs(x, model), p), tv_noise_floor(p, n_chains, quantile)


def assert_exact(
    sampler,
    model,
    n_chains: int = 20000,
    n_steps: int = 200,
    seed: int = 0,
    factor: float = 1.0,
    quantile: float = 0.999,
) -> tuple[float, float]:
    """Assert the sampler's n-step marginal matches the target: TV <= factor * floor.

    ``n_steps`` must be long enough for the chains to forget the uniform start
    (the residual bias decays geometrically; choose it with margin). With
    factor 1 an exact, mixed sampler fails with probability about 1 - quantile;
    tests use fixed seeds, so the outcome is deterministic. Returns (tv, floor).
    """
    tv, floor = sample_tv(sampler, model, n_chains, n_steps, seed, quantile)
    assert tv <= factor * floor, (
        f"{type(sampler).__name__}: TV {tv:.4f} > {factor} x iid noise floor {floor:.4f} "
        f"({n_chains} chains, {n_steps} steps)"
    )
    return tv, floor


def bias_tv(
    sampler, model, n_chains: int = 20000, n_steps: int = 200, seed: int = 0
) -> tuple[float, float]:
    """Monte Carlo estimate of an (unadjusted) sampler's bias: (TV to target, noise floor).

    The TV includes sampling noise of the order of the floor; for a noise-free
    asymptotic bias use :func:`kernel_tv` when the sampler has ``log_proposal``.
    """
    return sample_tv(sampler, model, n_chains, n_steps, seed)


# ---------------------------------------------------------------------------
# exact transition kernels


def proposal_matrix(sampler, model, chunk: int = 64) -> Tensor:
    """Proposal matrix Q[x, y] = q(y|x) (float64) on the enumerated space.

    Needs ``sampler.log_proposal(model, x, grad, y) -> Tensor[batch]`` (log q(y|x); x, y
    of shape [batch, d]; grad = grad log_prob at x). Rows should sum to 1.
    """
    X = enumerate_states(model).to(model.device)
    n = X.shape[0]
    _, g = value_and_grad(model, X)
    logq = torch.empty(n, n, dtype=torch.float64)
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        m = e - s
        xs = X[s:e].repeat_interleave(n, 0)
        gs = g[s:e].repeat_interleave(n, 0)
        ys = X.repeat(m, 1)
        logq[s:e] = sampler.log_proposal(model, xs, gs, ys).double().reshape(m, n).cpu()
    return torch.exp(logq)


def transition_matrix(sampler, model, chunk: int = 64) -> Tensor:
    """Full transition matrix P[x, y] (float64) of ``sampler`` on the enumerated space.

    Built from :func:`proposal_matrix`. For ``sampler.exact`` the Metropolis-Hastings
    acceptance min(1, p(y) q(x|y) / (p(x) q(y|x))) is applied and the rejected mass
    put on the diagonal; otherwise P = Q (unadjusted).
    """
    Q = proposal_matrix(sampler, model, chunk)
    if not sampler.exact:
        return Q
    with torch.no_grad():
        lp = model.log_prob(enumerate_states(model).to(model.device)).double().cpu()
    # a(x,y) Q(x,y) = min(Q(x,y), p(y)/p(x) Q(y,x))
    ratio = torch.exp(lp[None, :] - lp[:, None]) * Q.T
    P = torch.minimum(Q, ratio)
    P.fill_diagonal_(0.0)
    return P + torch.diag(1.0 - P.sum(1))


def kernel_stationary(P: Tensor) -> Tensor:
    """Stationary distribution pi (pi P = pi) of a row-stochastic matrix, float64."""
    P = P.double()
    n = P.shape[0]
    # solve pi (P - I) = 0 with sum(pi) = 1 by least squares on the stacked system
    A = torch.cat([(P - torch.eye(n, dtype=P.dtype)).T, torch.ones(1, n, dtype=P.dtype)], 0)
    rhs = torch.zeros(n + 1, dtype=P.dtype)
    rhs[-1] = 1.0
    pi = torch.linalg.lstsq(A, rhs[:, None]).solution[:, 0]
    pi = pi.clamp_min(0.0)
    return pi / pi.sum()


def kernel_tv(sampler, model) -> float:
    """TV between the exact stationary distribution of the sampler's kernel and the target."""
    return tv_distance(kernel_stationary(transition_matrix(sampler, model)), exact_probs(model))


def kernel_marginal_tv(sampler, model, n_steps: int, P: Tensor | None = None) -> float:
    """Exact TV between the n-step marginal from a uniform start and the target.

    This is the residual (non-mixing) bias of :func:`assert_exact`'s final states
    for samplers with ``log_proposal``: use it to pick ``n_steps`` with margin.
    """
    P = transition_matrix(sampler, model) if P is None else P
    mu = torch.full((P.shape[0],), 1.0 / P.shape[0], dtype=torch.float64)
    for _ in range(n_steps):
        mu = mu @ P
    return tv_distance(mu, exact_probs(model))


def rows_sum_to_one(P: Tensor, tol: float = 1e-9) -> bool:
    """Sanity check that log_proposal is a normalised distribution over the space."""
    return bool(torch.allclose(P.sum(1), torch.ones(P.shape[0], dtype=P.dtype), atol=tol))


def expected_tv_iid(probs: Tensor, n_samples: int) -> float:
    """Normal approximation of E[TV] for n iid draws: 1/2 sum sqrt(2 p (1-p) / (pi n))."""
    p = probs.double()
    return float(0.5 * torch.sqrt(2 * p * (1 - p) / (math.pi * n_samples)).sum())
