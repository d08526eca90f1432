"""Ratio matching objectives for binary EBMs (RMwGGIS paper, Liu et al. ICLR 2023).

Energy E(x) = -log_prob(x); x in {0,1}^d; x_{-i} is x with bit i flipped.

* RM (Lyu's form, Eq. 3):  J(x) = sum_i exp(2 (E(x) - E(x_{-i}))).
* RMwGGIS: s neighbours drawn from the gradient-guided proposal (Eq. 10)
  n(i) ∝ exp(2 [(2x - 1) ⊙ ∇_x E(x)]_i)  -- the first-order estimate of 2 (E(x) - E(x_{-i})),
  then either the importance-weighted estimate (basic, Eq. 6)
  J ≈ (1/s) sum_t exp(2 (E(x) - E(x_{-i_t}))) / n(i_t)
  or the unweighted sum (advanced, Eq. 11)  J ≈ sum_t exp(2 (E(x) - E(x_{-i_t}))).
  The proposal and the importance weights carry no gradient.
* RMwRAND: the same estimators with the uniform proposal n(i) = 1/d.

Every sample is paired with its OWN flipped neighbours (the reference code mixes samples
through a reshape; see tests/test_ratio_matching.py::test_sampled_terms_pair_each_sample).
All neighbours of a batch are evaluated in one batched forward pass. The learner that trains
with these objectives is :class:`ebmlab.learning.ratio_matching_learner.RatioMatchingLearner`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ebmlab.errors import ConfigError, check

OBJECTIVES = ("rm", "rmwggis", "rmwrand")
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
    onehot = F.one_hot(idx, x.shape[-1]).to(x.dtype)
    return x[:, None, :] + onehot * (1.0 - 2.0 * x[:, None, :])


def ratio_matching_loss(model, x: Tensor, reduction: str = "mean", chunk_size: int = 0) -> Tensor:
    """Full ratio matching, Eq. (3): mean_x sum_i exp(2 (E(x) - E(x_{-i}))).

    The n*d neighbours are evaluated as one [n*d, d] batch (``chunk_size`` > 0 splits that
    forward into pieces, which bounds memory only when no gradient is being recorded).
    """
    n, d = x.shape
    e_x = _energy(model, x)
    e_nb = _energy_chunked(model, flip_all(x).reshape(n * d, d), chunk_size).reshape(n, d)
    per_sample = torch.exp(2.0 * (e_x[:, None] - e_nb)).sum(-1)
    return _reduce(per_sample, reduction)


def ratio_matching_terms(model, x: Tensor, idx: Tensor, e_x: Tensor | None = None) -> Tensor:
    """exp(2 (E(x_b) - E(flip_{idx[b,t]}(x_b)))) as [n, s], each row paired with its own x_b."""
    n, d = x.shape
    s = idx.shape[1]
    if e_x is None:
        e_x = _energy(model, x)
    e_nb = _energy(model, flip_at(x, idx).reshape(n * s, d)).reshape(n, s)
    return torch.exp(2.0 * (e_x[:, None] - e_nb))


def gradient_proposal(model, x: Tensor) -> tuple[Tensor, Tensor]:
    """Return (E(x) with its parameter graph, proposal log-probabilities [n, d], detached).

    log n(i) = log_softmax(2 (2x - 1) ⊙ ∇_x E(x))_i  (Eq. 8-10). One forward + one backward.
    """
    with torch.enable_grad():
        xg = x.detach().requires_grad_(True)
        e_x = _energy(model, xg)
        (g,) = torch.autograd.grad(e_x.sum(), xg, retain_graph=True)
    logits = 2.0 * (2.0 * x.detach() - 1.0) * g.detach()
    return e_x, torch.log_softmax(logits.double(), dim=-1)


def _validate(variant: str, s: int, d: int, replacement: bool) -> None:
    if variant not in VARIANTS:
        raise ConfigError("variant", f"must be one of {', '.join(VARIANTS)} (got {variant!r})")
    check(s >= 1, "s", f"must be an integer >= 1 (got {s})")
    check(
        replacement or s <= d,
        "s",
        f"must be <= the data dimension {d} when drawing without replacement (got {s})",
    )


def _sampled_estimate(
    model,
    x: Tensor,
    e_x: Tensor,
    log_q: Tensor,
    s: int,
    variant: str,
    replacement: bool,
    generator: torch.Generator | None,
) -> Tensor:
    """Per-sample estimate [n] of the RM sum from s indices drawn from q = exp(log_q)."""
    idx = torch.multinomial(log_q.exp(), s, replacement=replacement, generator=generator)
    terms = ratio_matching_terms(model, x.detach(), idx, e_x=e_x)
    if variant == "advanced":
        return terms.sum(-1)
    # basic, Eq. (6): d * (1/s) sum_t (1/d) / n(i_t) * term_t, weights held constant.
    # Unbiased with replacement; the reference draws without replacement, where this
    # weighting is only approximately unbiased.
    w = torch.exp(-log_q.gather(1, idx)).div(s).to(terms.dtype)
    return (w.detach() * terms).sum(-1)


def rmwggis_loss(
    model,
    x: Tensor,
    s: int = 10,
    variant: str = "advanced",
    replacement: bool = False,
    generator: torch.Generator | None = None,
    reduction: str = "mean",
) -> Tensor:
    """RMwGGIS (Alg. 1): gradient-guided proposal (Eq. 10), basic (Eq. 6) or advanced (Eq. 11)."""
    _validate(variant, s, x.shape[1], replacement)
    e_x, log_q = gradient_proposal(model, x)
    per_sample = _sampled_estimate(model, x, e_x, log_q, s, variant, replacement, generator)
    return _reduce(per_sample, reduction)


def rmwrand_loss(
    model,
    x: Tensor,
    s: int = 10,
    generator: torch.Generator | None = None,
    variant: str = "advanced",
    replacement: bool = True,
    reduction: str = "mean",
) -> Tensor:
    """RMwRAND ablation (Sec. 5.1): uniform proposal; ``advanced`` sums the s terms (as the
    reference does), ``basic`` is the unbiased (d/s) * sum."""
    n, d = x.shape
    _validate(variant, s, d, replacement)
    log_q = torch.full((n, d), -math.log(d), dtype=torch.float64, device=x.device)
    e_x = _energy(model, x)
    per_sample = _sampled_estimate(model, x, e_x, log_q, s, variant, replacement, generator)
    return _reduce(per_sample, reduction)
