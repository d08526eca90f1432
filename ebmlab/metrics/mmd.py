"""Maximum mean discrepancy between sets of binary vectors.

Two estimators, as used by the reproduced papers (see PROTOCOLS.md):

* :func:`mmd2_exp_hamming` -- kernel ``exp(-Hamming(x, y) / d)``, biased
  V-statistic of MMD^2 (no square root). RBM sampling benchmark of DLP (Fig. 4),
  ACS (Fig. 4, 6) and GWG.
* :func:`mmd2_linear_hamming_unbiased` -- kernel ``d - Hamming(x, y)``, unbiased
  U-statistic (diagonal terms dropped). Synthetic density modelling of RMwGGIS
  (Table 1).

Inputs are float (or bool/int) tensors with values in {0, 1}, shape [n, d].
Sums are accumulated in float64 so that small MMD values (log MMD ~ -7) do not
drown in the rounding of the O(1) kernel means.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

# Rows of ``x`` per block when a kernel matrix is reduced blockwise: keeps the
# [block, m] intermediate at a few tens of MB for m up to ~10^4.
_BLOCK_ROWS = 1024


def _as_binary_pair(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    if x.dim() != 2 or y.dim() != 2:
        raise ValueError(
            f"expected 2-D tensors [n, d], got shapes {tuple(x.shape)}, {tuple(y.shape)}"
        )
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"dimension mismatch: x has d={x.shape[1]}, y has d={y.shape[1]}")
    return x.to(torch.float64), y.to(device=x.device, dtype=torch.float64)


def hamming_distance(x: Tensor, y: Tensor, block_rows: int = _BLOCK_ROWS) -> Tensor:
    """Pairwise Hamming distances ``H[i, j] = #{k : x[i, k] != y[j, k]}`` for {0,1} inputs.

    Uses ``H = |x| + |y| - 2 x y^T`` (exact for binary entries), computed in
    blocks of ``block_rows`` rows of ``x``. Returns float64 [n, m].
    """
    x, y = _as_binary_pair(x, y)
    ny = y.sum(1)
    out = torch.empty(x.shape[0], y.shape[0], dtype=torch.float64, device=x.device)
    for s in range(0, x.shape[0], block_rows):
        xb = x[s : s + block_rows]
        out[s : s + block_rows] = xb.sum(1, keepdim=True) + ny - 2.0 * (xb @ y.T)
    return out


def _exp_hamming_sum(x: Tensor, y: Tensor, d: int, block_rows: int) -> Tensor:
    """sum_{i,j} exp(-H(x_i, y_j) / d), reduced blockwise (no full n x m matrix kept)."""
    ny = y.sum(1)
    total = torch.zeros((), dtype=torch.float64, device=x.device)
    for s in range(0, x.shape[0], block_rows):
        xb = x[s : s + block_rows]
        h = xb.sum(1, keepdim=True) + ny - 2.0 * (xb @ y.T)
        total = total + torch.exp(-h / d).sum()
    return total


def mmd2_exp_hamming(x: Tensor, y: Tensor, block_rows: int = _BLOCK_ROWS) -> Tensor:
    """Biased (V-statistic) MMD^2 with kernel ``exp(-Hamming/d)``; 0-d float64 tensor.

    MMD^2_b = mean_{i,i'} k(x_i, x_i') + mean_{j,j'} k(y_j, y_j') - 2 mean_{i,j} k(x_i, y_j),
    diagonal terms included (so identical sets give exactly 0). Non-negative
    because the kernel is positive definite. Take ``.log()`` for the papers'
    log-MMD plots (natural log in DLP/ACS, log10 in GWG).
    """
    x, y = _as_binary_pair(x, y)
    n, m, d = x.shape[0], y.shape[0], x.shape[1]
    if n == 0 or m == 0:
        raise ValueError("MMD needs at least one sample in each set")
    kxx = _exp_hamming_sum(x, x, d, block_rows) / (n * n)
    kyy = _exp_hamming_sum(y, y, d, block_rows) / (m * m)
    kxy = _exp_hamming_sum(x, y, d, block_rows) / (n * m)
    return (kxx + kyy - 2.0 * kxy).clamp_min(0.0)


def log_mmd2_exp_hamming(x: Tensor, y: Tensor) -> float:
    """Natural log of :func:`mmd2_exp_hamming` (DLP Fig. 4, ACS Fig. 4), floored at 1e-300."""
    return math.log(max(float(mmd2_exp_hamming(x, y)), 1e-300))


def mmd2_linear_hamming_unbiased(x: Tensor, y: Tensor) -> Tensor:
    """Unbiased (U-statistic) MMD^2 with kernel ``k(x, y) = d - Hamming(x, y)``; 0-d float64.

    MMD^2_u = sum_{i!=i'} k(x_i,x_i')/(n(n-1)) + sum_{j!=j'} k(y_j,y_j')/(m(m-1))
              - 2 sum_{i,j} k(x_i,y_j)/(n m).
    For binary vectors d - Hamming(x, y) = <phi(x), phi(y)> with phi(x) = [x, 1 - x],
    so every kernel sum is a squared norm of a feature sum (O((n + m) d), exact);
    k(x, x) = d for the dropped diagonal. Can be slightly negative (unbiased).
    """
    x, y = _as_binary_pair(x, y)
    n, m, d = x.shape[0], y.shape[0], x.shape[1]
    if n < 2 or m < 2:
        raise ValueError(f"unbiased MMD needs >= 2 samples per set (got {n} and {m})")
    sx = torch.cat([x.sum(0), n - x.sum(0)])  # sum_i phi(x_i)
    sy = torch.cat([y.sum(0), m - y.sum(0)])
    kxx = (sx @ sx - n * d) / (n * (n - 1))
    kyy = (sy @ sy - m * d) / (m * (m - 1))
    kxy = (sx @ sy) / (n * m)
    return kxx + kyy - 2.0 * kxy


def _trace_sq(s: Tensor, n: int) -> Tensor:
    """tr(Sigma^2) from a sample covariance of n rows, corrected for the bias of tr(S^2)
    (Bai & Saranadasa 1996)."""
    return (n - 1) ** 2 / ((n - 2) * (n + 1)) * ((s * s).sum() - torch.trace(s) ** 2 / (n - 1))


def mmd2_linear_hamming_unbiased_se(x: Tensor, y: Tensor) -> float:
    """Standard error of :func:`mmd2_linear_hamming_unbiased` for independent samples.

    That statistic is the U-statistic of ||mu_x - mu_y||^2 in the features phi(x) = [x, 1 - x],
    whose variance is (Chen & Qin 2010, Sec. 2)
        2 tr(S_x^2) / (n(n-1)) + 2 tr(S_y^2) / (m(m-1)) + 4 tr(S_x S_y) / (n m)
        + 4 delta^T S_x delta / n + 4 delta^T S_y delta / m,
    with S the feature covariances and delta = mu_x - mu_y; this plugs in the sample moments
    (delta^T S delta corrected for the noise of the sample delta).
    """
    x, y = _as_binary_pair(x, y)
    n, m = x.shape[0], y.shape[0]
    if n < 3 or m < 3:
        raise ValueError(f"the MMD standard error needs >= 3 samples per set (got {n} and {m})")
    fx = torch.cat([x, 1.0 - x], 1).double()
    fy = torch.cat([y, 1.0 - y], 1).double()
    sx, sy = torch.cov(fx.T), torch.cov(fy.T)
    txx, tyy, txy = _trace_sq(sx, n), _trace_sq(sy, m), (sx * sy).sum()  # tr(S S')
    delta = fx.mean(0) - fy.mean(0)
    # E[d^T S d] for the sample delta d exceeds delta^T S delta by tr(S (S_x/n + S_y/m))
    # (clamped at 0: near delta = 0 the SE errs on the large side, by about 10%)
    qx = (delta @ sx @ delta - txx / n - txy / m).clamp_min(0.0)
    qy = (delta @ sy @ delta - txy / n - tyy / m).clamp_min(0.0)
    var = (
        2.0 * txx / (n * (n - 1))
        + 2.0 * tyy / (m * (m - 1))
        + 4.0 * txy / (n * m)
        + 4.0 * qx / n
        + 4.0 * qy / m
    )
    return float(var.clamp_min(0.0).sqrt())


def log_mmd_curve_summary(log_mmd: list[float]) -> dict[str, float]:
    """A log-MMD curve (step 0 first) in three numbers: ``log_mmd`` (the last value),
    ``log_mmd_tail_mean`` (the last 10% of evaluations), ``log_mmd_mean`` (every one after
    step 0)."""
    tail = log_mmd[-max(1, len(log_mmd) // 10) :]
    return {
        "log_mmd": log_mmd[-1],
        "log_mmd_tail_mean": sum(tail) / len(tail),
        "log_mmd_mean": sum(log_mmd[1:]) / max(1, len(log_mmd) - 1),
    }
