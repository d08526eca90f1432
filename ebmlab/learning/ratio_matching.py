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
from ebmlab.models.base import EnergyModel, flip_all, flip_at

__all__ = ["flip_all", "flip_at"]  # re-exported: the neighbours ratio matching evaluates

ESTIMATORS = ("full", "ggis", "uniform")
VARIANTS = ("basic", "advanced")
NEIGHBOURS = ("model", "generic")


def _energy(model, x: Tensor) -> Tensor:
    return -model.log_prob(x)


def flip_deltas(model, x: Tensor, idx: Tensor | None, neighbours: str) -> Tensor:
    """delta = E(x) - E(x_{-i}) of the flipped neighbours: ``model`` uses the model's own
    exact form (the Ising closed form, the MLP's first-layer linearity), ``generic`` evaluates
    every flipped vector as a batch (the papers' cost model; same values)."""
    if neighbours == "generic":
        return EnergyModel.flip_deltas(model, x, idx)
    if neighbours != "model":
        raise ConfigError("neighbours", f"must be one of model, generic (got {neighbours!r})")
    return model.flip_deltas(x, idx)


def _reduce(per_sample: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return per_sample.mean()
    if reduction == "sum":
        return per_sample.sum()
    if reduction == "none":
        return per_sample
    raise ConfigError("reduction", f"must be one of mean, sum, none (got {reduction!r})")


def full_loss(
    model, x: Tensor, objective: str, reduction: str, chunk_size: int, neighbours: str = "model"
) -> Tensor:
    """sum_i t(E(x) - E(x_{-i})) over all d neighbours, reduced over the rows of ``x``.

    The deltas come from :func:`flip_deltas` (``neighbours``); ``chunk_size`` > 0
    evaluates at most about that many neighbours at a time, which bounds memory only when no
    gradient is being recorded.
    """
    n, d = x.shape
    rows = max(1, chunk_size // d) if chunk_size > 0 else n
    per_sample = [term(objective, flip_deltas(model, c, None, neighbours)) for c in x.split(rows)]
    return _reduce(torch.cat(per_sample).sum(-1), reduction)


def ratio_matching_loss(model, x: Tensor, reduction: str = "mean", chunk_size: int = 0) -> Tensor:
    """Full ratio matching, Eq. (3): mean_x sum_i exp(2 (E(x) - E(x_{-i})))."""
    return full_loss(model, x, "eq3", reduction, chunk_size)


def neighbour_terms(
    model, x: Tensor, idx: Tensor, objective: str, neighbours: str = "model"
) -> Tensor:
    """t(E(x_b) - E(flip_{idx[b,t]}(x_b))) as [n, s], each row paired with its own x_b."""
    return term(objective, flip_deltas(model, x, idx, neighbours))


def ratio_matching_terms(model, x: Tensor, idx: Tensor) -> Tensor:
    """exp(2 (E(x_b) - E(flip_{idx[b,t]}(x_b)))) as [n, s] (the Eq. 3 terms)."""
    return neighbour_terms(model, x, idx, "eq3")


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
    log_q: Tensor,
    objective: str,
    s: int,
    variant: str,
    replacement: bool,
    generator: torch.Generator | None,
    neighbours: str = "model",
) -> Tensor:
    """Per-sample estimate [n] of sum_i t(delta_i) from s indices drawn from exp(log_q)."""
    idx = draw_indices(log_q, s, replacement, generator)
    terms = neighbour_terms(model, x.detach(), idx, objective, neighbours)
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
    neighbours: str = "model",
) -> Tensor:
    """``ggis`` (gradient-guided proposal) or ``uniform`` (n(i) = 1/d) estimate of the
    ``objective``, basic (Eq. 6) or advanced (Eq. 11)."""
    n, d = x.shape
    _validate(variant, s, d, replacement)
    if estimator == "ggis":
        log_q = gradient_proposal(model, x, objective, proposal)[1]
    elif estimator == "uniform":
        log_q = torch.full((n, d), -math.log(d), dtype=torch.float64, device=x.device)
    else:
        raise ConfigError("estimator", f"sampled estimators are ggis, uniform (got {estimator!r})")
    per_sample = sampled_estimate(
        model, x, log_q, objective, s, variant, replacement, generator, neighbours
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
