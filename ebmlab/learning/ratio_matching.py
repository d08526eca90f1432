"""Ratio matching objectives for binary EBMs (RMwGGIS paper, Liu et al. ICLR 2023).

Energy E(x) = -log_prob(x); x in {0,1}^d; x_{-i} is x with bit i flipped;
delta_i = E(x) - E(x_{-i}). An objective J(x) = sum_i t(delta_i) (``objective``: ``eq3``, the
paper's Eq. 3 t = exp(2 delta); the consistent ``hyvarinen`` and ``lyu``; see
:mod:`ebmlab.learning.ratio_matching_objectives`) is computed by an estimator:

* ``full`` (RM): all d neighbours.
* ``ggis`` (RMwGGIS, Alg. 1): s neighbours drawn from the gradient-guided proposal
  n(i) ∝ w(delta_hat_i), delta_hat = (2x - 1) ⊙ ∇_x E(x) (Eq. 7-10; for ``eq3``
  n(i) ∝ exp(2 delta_hat_i), Eq. 10), then either the importance-weighted estimate (basic,
  Eq. 6; weights in :mod:`ebmlab.learning.ratio_matching_sampling`) or the unweighted sum
  (advanced, Eq. 11, sum_t t(delta_{i_t})). The proposal and the weights carry no gradient.
* ``uniform`` (RMwRAND, Sec. 5.1): the same with n(i) = 1/d.

Every sample is paired with its OWN flipped neighbours (the reference code mixes samples
through a reshape; see tests/learning/test_ratio_matching.py::test_sampled_terms_pair_each_sample).
All neighbours of a batch are evaluated in one batched forward pass. The learner that trains
with these objectives is :class:`ebmlab.learning.ratio_matching_learner.RatioMatchingLearner`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ebmlab.errors import ConfigError, check
from ebmlab.learning.ratio_matching_objectives import proposal_logits, term
from ebmlab.learning.ratio_matching_sampling import draw_indices, importance_weights

ESTIMATORS = ("full", "ggis", "uniform")
VARIANTS = ("basic", "advanced")


def _energy(model, x: Tensor) -> Tensor:
    return -model.log_prob(x)


def _energy_chunked(model, x: Tensor, chunk_size: int) -> Tensor:
    if chunk_size <= 0 or x.shape[0] <= chunk_size:
        return _energy(model, x)
    return torch.cat([_energy(model, c) for c in x.split(chunk_size)])


def _reduce(per_sample: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return per_sample.mean()
    if reduction == "sum":
        return per_sample.sum()
    if reduction == "none":
        return per_sample
    raise ConfigError("reduction", f"must be one of mean, sum, none (got {reduction!r})")


def flip_all(x: Tensor) -> Tensor:
    """All single-bit flips: [n, d] -> [n, d, d] with out[b, i] = x_b with bit i flipped."""
    d = x.shape[-1]
    out = x[:, None, :].repeat(1, d, 1)
    out.diagonal(dim1=1, dim2=2).copy_(1.0 - x)  # one [n, d, d] allocation, no temporaries
    return out


def flip_at(x: Tensor, idx: Tensor) -> Tensor:
    """x [n, d], idx [n, s] -> [n, s, d] with out[b, t] = flip_{idx[b, t]}(x_b)."""
    out = x[:, None, :].repeat(1, idx.shape[1], 1)  # one [n, s, d] allocation, no one-hot
    return out.scatter_(2, idx[..., None], (1.0 - x.gather(1, idx))[..., None])


def full_loss(model, x: Tensor, objective: str, reduction: str, chunk_size: int) -> Tensor:
    """sum_i t(E(x) - E(x_{-i})) over all d neighbours, reduced over the rows of ``x``.

    The n*d neighbours are evaluated as one [n*d, d] batch (``chunk_size`` > 0 splits that
    forward into pieces, which bounds memory only when no gradient is being recorded).
    """
    n, d = x.shape
    e_x = _energy(model, x)
    e_nb = _energy_chunked(model, flip_all(x).reshape(n * d, d), chunk_size).reshape(n, d)
    return _reduce(term(objective, e_x[:, None] - e_nb).sum(-1), reduction)


def ratio_matching_loss(model, x: Tensor, reduction: str = "mean", chunk_size: int = 0) -> Tensor:
    """Full ratio matching, Eq. (3): mean_x sum_i exp(2 (E(x) - E(x_{-i})))."""
    return full_loss(model, x, "eq3", reduction, chunk_size)


def neighbour_terms(
    model, x: Tensor, idx: Tensor, objective: str, e_x: Tensor | None = None
) -> Tensor:
    """t(E(x_b) - E(flip_{idx[b,t]}(x_b))) as [n, s], each row paired with its own x_b."""
    n, d = x.shape
    s = idx.shape[1]
    if e_x is None:
        e_x = _energy(model, x)
    e_nb = _energy(model, flip_at(x, idx).reshape(n * s, d)).reshape(n, s)
    return term(objective, e_x[:, None] - e_nb)


def ratio_matching_terms(model, x: Tensor, idx: Tensor, e_x: Tensor | None = None) -> Tensor:
    """exp(2 (E(x_b) - E(flip_{idx[b,t]}(x_b)))) as [n, s] (the Eq. 3 terms)."""
    return neighbour_terms(model, x, idx, "eq3", e_x)


def first_order_deltas(model, x: Tensor) -> tuple[Tensor, Tensor]:
    """(E(x) with its parameter graph, delta_hat = (2x - 1) ⊙ ∇_x E(x) detached) (Eq. 7-9).

    One forward + one backward."""
    with torch.enable_grad():
        xg = x.detach().requires_grad_(True)
        e_x = _energy(model, xg)
        (g,) = torch.autograd.grad(e_x.sum(), xg, retain_graph=True)
    return e_x, (2.0 * x.detach() - 1.0) * g.detach()


def gradient_proposal(
    model, x: Tensor, objective: str = "eq3", proposal: str = "value"
) -> tuple[Tensor, Tensor]:
    """Return (E(x) with its parameter graph, proposal log-probabilities [n, d], detached).

    log n(i) = log_softmax(proposal_logits(delta_hat))_i; for ``eq3``
    log_softmax(2 (2x - 1) ⊙ ∇_x E(x))_i (Eq. 10)."""
    e_x, delta_hat = first_order_deltas(model, x)
    logits = proposal_logits(objective, proposal, delta_hat.double())
    return e_x, torch.log_softmax(logits, dim=-1)


def _validate(variant: str, s: int, d: int, replacement: bool) -> None:
    if variant not in VARIANTS:
        raise ConfigError("variant", f"must be one of {', '.join(VARIANTS)} (got {variant!r})")
    check(s >= 1, "s", f"must be an integer >= 1 (got {s})")
    check(
        replacement or s <= d,
        "s",
        f"must be <= the data dimension {d} when drawing without replacement (got {s})",
    )


def sampled_estimate(
    model,
    x: Tensor,
    e_x: Tensor,
    log_q: Tensor,
    objective: str,
    s: int,
    variant: str,
    replacement: bool,
    generator: torch.Generator | None,
) -> Tensor:
    """Per-sample estimate [n] of sum_i t(delta_i) from s indices drawn from exp(log_q)."""
    idx = draw_indices(log_q, s, replacement, generator)
    terms = neighbour_terms(model, x.detach(), idx, objective, e_x=e_x)
    if variant == "advanced":
        return terms.sum(-1)
    w = importance_weights(log_q, idx, replacement).to(terms.dtype)
    return (w * terms).sum(-1)


def sampled_loss(
    model,
    x: Tensor,
    objective: str,
    estimator: str,
    proposal: str,
    s: int,
    variant: str,
    replacement: bool,
    generator: torch.Generator | None,
    reduction: str,
) -> Tensor:
    """``ggis`` (gradient-guided proposal) or ``uniform`` (n(i) = 1/d) estimate of the
    ``objective``, basic (Eq. 6) or advanced (Eq. 11)."""
    n, d = x.shape
    _validate(variant, s, d, replacement)
    if estimator == "ggis":
        e_x, log_q = gradient_proposal(model, x, objective, proposal)
    elif estimator == "uniform":
        log_q = torch.full((n, d), -math.log(d), dtype=torch.float64, device=x.device)
        e_x = _energy(model, x)
    else:
        raise ConfigError("estimator", f"sampled estimators are ggis, uniform (got {estimator!r})")
    per_sample = sampled_estimate(
        model, x, e_x, log_q, objective, s, variant, replacement, generator
    )
    return _reduce(per_sample, reduction)


def rmwggis_loss(
    model,
    x: Tensor,
    s: int = 10,
    variant: str = "advanced",
    replacement: bool = False,
    generator: torch.Generator | None = None,
    reduction: str = "mean",
) -> Tensor:
    """RMwGGIS (Alg. 1) on Eq. (3): proposal Eq. (10), basic (Eq. 6) or advanced (Eq. 11)."""
    return sampled_loss(
        model, x, "eq3", "ggis", "value", s, variant, replacement, generator, reduction
    )


def rmwrand_loss(
    model,
    x: Tensor,
    s: int = 10,
    generator: torch.Generator | None = None,
    variant: str = "advanced",
    replacement: bool = True,
    reduction: str = "mean",
) -> Tensor:
    """RMwRAND ablation (Sec. 5.1) on Eq. (3): uniform proposal; ``advanced`` sums the s terms
    (as the reference does), ``basic`` is importance weighted (unbiased)."""
    return sampled_loss(
        model, x, "eq3", "uniform", "value", s, variant, replacement, generator, reduction
    )
