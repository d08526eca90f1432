"""Neighbour draws and importance weights for the sampled ratio matching estimators.

The basic estimator (RMwGGIS Eq. 6) of J(x) = sum_i t_i from s indices drawn from n(i) is
sum_k w_k t_{i_k} with weights that carry no gradient; it is unbiased for J and, the weights
being constants, its parameter gradient is unbiased for ∇J.

* With replacement: w_k = 1 / (s n(i_k)) (Eq. 6).
* Without replacement (``torch.multinomial`` draws successively, each index with probability
  n(i) / (1 - mass already drawn), and returns the indices in the order drawn): Des Raj's
  (1956) ordered estimator, the mean over k of
  z_k = sum_{j<k} t_{i_j} + (1 - P_k) t_{i_k} / n(i_k),  P_k = sum_{j<k} n(i_j),
  i.e. w_k = ((1 - P_k) / n(i_k) + s - k) / s for k = 1..s. Each z_k is unbiased (given the
  first k - 1 draws, t_{i_k} (1 - P_k) / n(i_k) is unbiased for the terms not yet drawn).
  The weights 1 / (s n(i)) of Eq. (6) are biased here (the reference code's choice).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def draw_indices(
    log_q: Tensor, s: int, replacement: bool, generator: torch.Generator | None
) -> Tensor:
    """s indices per row from n = exp(log_q) [n, d] -> [n, s], in the order drawn."""
    return torch.multinomial(log_q.exp(), s, replacement=replacement, generator=generator)


def importance_weights(log_q: Tensor, idx: Tensor, replacement: bool) -> Tensor:
    """Basic-estimator weights [n, s] (detached) for the indices ``idx`` drawn from exp(log_q)."""
    s = idx.shape[1]
    log_n = log_q.detach().gather(1, idx)
    if replacement:
        return torch.exp(-log_n).div(s)
    # log(1 - P_k) as a sum over the indices not drawn before step k (no cancellation)
    drawn = F.one_hot(idx, log_q.shape[1]).to(torch.bool)  # [n, s, d]
    before = (torch.cumsum(drawn, dim=1) - drawn.long()).to(torch.bool)
    log_rest = torch.logsumexp(log_q.detach()[:, None, :].masked_fill(before, -math.inf), -1)
    later = torch.arange(s - 1, -1, -1, dtype=log_n.dtype, device=log_n.device)  # s - k
    return (torch.exp(log_rest - log_n) + later) / s
