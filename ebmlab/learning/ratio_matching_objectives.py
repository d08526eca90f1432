"""Per-neighbour terms of the ratio matching objectives and their GGIS proposals.

Every objective is J(x) = sum_i t(delta_i) with delta_i = E(x) - E(x_{-i})
= log p(x_{-i}) / p(x) (x_{-i}: bit i flipped); see docs/ratio_matching.md, "Consistent
ratio matching".

* ``eq3``: t = exp(2 delta), the RMwGGIS paper's Eq. (3). Its minimiser is q ∝ p_data^(1/4).
* ``hyvarinen``: t = sigmoid(delta)^2 = g(p(x) / p(x_{-i}))^2 with g(u) = 1 / (1 + u)
  (Hyvarinen 2007; the paper's Eq. 2). Consistent (minimised at q = p_data).
* ``lyu``: t = exp(2 delta) - 2 exp(-delta), Lyu's (2009) discrete score matching with its
  cross term: E_p sum_i (q(x_{-i})/q(x) - p(x_{-i})/p(x))^2 up to a constant. Consistent for
  a strictly positive p_data.

Gradient-guided importance sampling draws neighbour i from n(i) ∝ w(delta_hat_i) where
delta_hat = (2x - 1) ⊙ ∇_x E(x) is the first-order estimate of delta (Eq. 7-9):
``value`` w = |t| minimises the variance of the estimate of J (Fact 1 generalised; for
``eq3`` this is Eq. 10), ``slope`` w = |dt/d delta| minimises the second moment of the
gradient estimate when the per-neighbour parameter gradients ∇_theta delta_i have equal norms.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

OBJECTIVES = ("eq3", "hyvarinen", "lyu")
PROPOSALS = ("value", "slope")
_LOG2 = math.log(2.0)


def term(objective: str, delta: Tensor) -> Tensor:
    """t(delta) of ``objective`` (elementwise)."""
    if objective == "eq3":
        return torch.exp(2.0 * delta)
    if objective == "hyvarinen":
        return torch.sigmoid(delta).square()
    if objective == "lyu":
        return torch.exp(2.0 * delta) - 2.0 * torch.exp(-delta)
    raise ValueError(f"unknown ratio matching objective {objective!r}")


def _log_abs_lyu(delta: Tensor) -> Tensor:
    """log |exp(2 delta) - 2 exp(-delta)| = -delta + log |exp(3 delta) - 2|, overflow-free;
    -inf at the zero crossing delta = log(2) / 3."""
    a = 3.0 * delta
    above = a + torch.log1p(-2.0 * torch.exp(-a.clamp(min=_LOG2)))
    below = _LOG2 + torch.log1p(-0.5 * torch.exp(a.clamp(max=_LOG2)))
    return -delta + torch.where(a > _LOG2, above, below)


def proposal_logits(objective: str, proposal: str, delta_hat: Tensor) -> Tensor:
    """Unnormalised log n(i): log |t(delta_hat)| (``value``) or log |t'(delta_hat)| (``slope``),
    constant factors dropped."""
    if objective == "eq3":  # t' = 2 t: both proposals are Eq. (10)
        return 2.0 * delta_hat
    if objective == "hyvarinen":
        logits = 2.0 * F.logsigmoid(delta_hat)  # t = sigmoid^2
        if proposal == "slope":  # t' = 2 sigmoid(delta)^2 sigmoid(-delta)
            logits = logits + F.logsigmoid(-delta_hat)
        return logits
    if objective == "lyu":
        if proposal == "slope":  # t' = 2 exp(2 delta) + 2 exp(-delta) > 0
            return torch.logaddexp(2.0 * delta_hat, -delta_hat)
        return _log_abs_lyu(delta_hat)
    raise ValueError(f"unknown ratio matching objective {objective!r}")
