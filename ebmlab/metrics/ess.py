"""Effective sample size (ESS) of MCMC output; the one estimator used everywhere.

ESS = n / tau with the integrated autocorrelation time
tau = -1 + 2 sum_{k>=0} (rho_{2k} + rho_{2k+1}), truncated by Geyer's (1992)
initial positive sequence (stop at the first non-positive pair sum) and made
monotone (initial monotone sequence), as in Stan / Vehtari et al. (2021).
Autocovariances are computed with the FFT. Like Stan, tau is floored at
1 / log10(n), i.e. ESS <= n log10(n) for antithetic chains.

Constant series (zero variance) have no defined ESS. Default convention:
``constant_value = 1.0``, i.e. a chain that never moves is worth one draw; this
matches the GWG / DLP / ACS reference code, which replaces the NaN ESS of
constant dimensions by 1 before averaging (PROTOCOLS.md "RBM sampling").
Pass ``constant_value=float("nan")`` to mark them instead.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

# Columns (series) processed per FFT batch in ess_per_dim.
_COL_CHUNK = 8192


def _autocov(x: Tensor) -> Tensor:
    """Biased autocovariance (divisor n) along dim 0 of float64 [n, k], by zero-padded FFT."""
    n = x.shape[0]
    xc = x - x.mean(0, keepdim=True)
    nfft = 1 << (2 * n - 1).bit_length()
    f = torch.fft.rfft(xc, n=nfft, dim=0)
    return torch.fft.irfft(f.real**2 + f.imag**2, n=nfft, dim=0)[:n] / n


def _tau_from_rho(rho: Tensor) -> Tensor:
    """Integrated autocorrelation time from autocorrelations rho [n, k] (rho[0] = 1).

    Geyer initial positive + initial monotone sequence, vectorised over columns.
    """
    n = rho.shape[0]
    npairs = n // 2
    pairs = rho[0 : 2 * npairs : 2] + rho[1 : 2 * npairs : 2]  # P_k = rho_2k + rho_2k+1
    keep = torch.cumprod((pairs > 0).to(rho.dtype), dim=0)  # initial positive sequence
    mono = torch.cummin(pairs, dim=0).values  # initial monotone sequence
    tau = -1.0 + 2.0 * (mono * keep).sum(0)
    return tau.clamp_min(1.0 / math.log10(max(n, 10)))


def _check_steps(n: int) -> None:
    if n < 4:
        raise ValueError(f"ESS needs at least 4 steps (got {n})")


def ess_1d(x: Tensor, constant_value: float = 1.0) -> Tensor:
    """Per-chain ESS of scalar series ``x`` [steps, chains] -> float64 [chains].

    Each column is treated as its own chain (no pooling); see module docstring
    for the estimator and for ``constant_value``.
    """
    if x.dim() == 1:
        x = x[:, None]
    if x.dim() != 2:
        raise ValueError(f"expected [steps, chains], got shape {tuple(x.shape)}")
    n = x.shape[0]
    _check_steps(n)
    x = x.to(torch.float64)
    const = x.amax(0) == x.amin(0)
    acov = _autocov(x)
    var0 = torch.where(const, torch.ones_like(acov[0]), acov[0])
    tau = _tau_from_rho(acov / var0)
    ess = n / tau
    return torch.where(const, torch.full_like(ess, constant_value), ess)


def ess_per_dim(
    x: Tensor, burn_in: float = 0.0, constant_value: float = 1.0, chunk: int = _COL_CHUNK
) -> Tensor:
    """Mean over dimensions of the per-dimension ESS of each chain.

    ``x`` [steps, chains, d] -> float64 [chains]. The first ``burn_in`` fraction
    of steps is dropped (ACS uses 0.1). Constant dimensions count as
    ``constant_value`` (default 1, the reference code's convention); with NaN
    they are excluded from the mean (NaN if every dimension is constant).
    """
    if x.dim() != 3:
        raise ValueError(f"expected [steps, chains, d], got shape {tuple(x.shape)}")
    if not 0.0 <= burn_in < 1.0:
        raise ValueError(f"burn_in must be a fraction in [0, 1) (got {burn_in})")
    x = x[int(burn_in * x.shape[0]) :]
    steps, chains, d = x.shape
    flat = x.reshape(steps, chains * d)
    per = torch.cat(
        [
            ess_1d(flat[:, s : s + chunk], constant_value)
            for s in range(0, flat.shape[1], max(1, chunk))
        ]
    ).reshape(chains, d)
    return per.nanmean(1) if math.isnan(constant_value) else per.mean(1)


def trace_ess(trace: Tensor, burn_in: float, seconds: float) -> dict[str, float]:
    """ESS of a trace [steps, chains, d] after its first ``burn_in`` fraction of steps: ``ess``
    (:func:`ess_per_dim` averaged over chains), ``ess_per_step`` (per kept step) and
    ``ess_per_second`` (per second of the kept steps' share of ``seconds``)."""
    n = trace.shape[0]
    kept = n - int(burn_in * n)
    ess = float(ess_per_dim(trace[n - kept :].float()).mean())
    return {"ess": ess, "ess_per_step": ess / kept, "ess_per_second": ess / (seconds * kept / n)}


def hamming_to_reference(xs: Tensor, ref: Tensor) -> Tensor:
    """Hamming distance of every state to a fixed reference state (DISCS summary).

    ``xs`` [steps, chains, d], ``ref`` [d] -> float [steps, chains] counting the
    coordinates where ``xs`` differs from ``ref`` (works for binary and integer
    states). Feed the result to :func:`ess_1d` for the AB ESS tables.
    """
    if xs.shape[-1] != ref.shape[-1]:
        raise ValueError(f"state has d={xs.shape[-1]} but reference has d={ref.shape[-1]}")
    return (xs != ref.to(xs.device)).sum(-1).to(torch.float32)


def multichain_ess(x: Tensor, constant_value: float = 1.0) -> float:
    """Pooled ESS of ``m`` chains ``x`` [steps, chains] (Stan; Vehtari et al. 2021, no ranks).

    rho_t = 1 - (W - mean_j acov_j(t)) / var_plus with W the mean within-chain
    variance and var_plus = (n-1)/n W + B/n (B: n times the variance of the chain
    means), so chains stuck in different regions reduce the ESS. Returns
    m n / tau as a float. A series constant across all chains gives
    ``constant_value``.
    """
    if x.dim() != 2:
        raise ValueError(f"expected [steps, chains], got shape {tuple(x.shape)}")
    n, m = x.shape
    _check_steps(n)
    x = x.to(torch.float64)
    if bool(x.max() == x.min()):
        return float(constant_value)
    acov = _autocov(x)  # [n, m]
    w = acov[0].mean() * n / (n - 1)
    b = n * x.mean(0).var(unbiased=True) if m > 1 else x.new_zeros(())
    var_plus = (n - 1) / n * w + b / n
    rho = 1.0 - (w - acov.mean(1)) / var_plus
    rho[0] = 1.0
    tau = _tau_from_rho(rho[:, None])[0]
    return float(m * n / tau)


def ess_per_queries(ess: float, queries: float, per: float = 10_000.0) -> float:
    """ESS per ``per`` log-likelihood queries (AB's ESS_n, Sec. 5.1): ess * per / queries."""
    if queries <= 0:
        raise ValueError(f"queries must be > 0 (got {queries})")
    return float(ess) * per / float(queries)


def per_chain_ess(summary: Tensor) -> dict:
    """Mean and spread over chains of the per-chain ESS of ``summary`` [steps, chains]:
    ``ess``, ``ess_std``, ``ess_cv`` (std / mean), and ``constant_chains``, the fraction of
    chains whose statistic never changed (each counted as ESS 1, the reference convention).
    A large ``ess_cv`` or any constant chains say the mean is not a mixing rate: e.g. a
    target with nearly all its mass on one state, where a chain that stays scores 1 and one
    with a few isolated excursions scores near the run length."""
    ess = ess_1d(summary)
    mean = float(ess.mean())
    std = float(ess.std()) if ess.numel() > 1 else 0.0
    constant = (summary.amax(0) == summary.amin(0)).float().mean()
    return {
        "ess": mean,
        "ess_std": std,
        "ess_cv": std / max(mean, 1e-12),
        "constant_chains": float(constant),
    }


def ess_rates(summary: Tensor, queries: float, seconds: float) -> dict:
    """AB's ESS table entries (Sec. 5.1) of a summary statistic [steps, chains] that cost
    ``queries`` log-likelihood queries and ``seconds``: :func:`per_chain_ess`, ``ess_n`` (per
    10,000 queries, :func:`ess_per_queries`), ``ess_t`` (per second), ``ess_per_step`` and the
    standard errors of the mean over chains ``ess_se``, ``ess_n_se`` (std / sqrt(chains); none
    for ``ess_t``, whose error is mostly wall-time noise, not the chains')."""
    steps, n_chains = summary.shape
    chains = per_chain_ess(summary)
    ess_mean, ess_std = chains["ess"], chains["ess_std"]
    rel_se = ess_std / math.sqrt(n_chains) / max(ess_mean, 1e-12)  # of the chain mean
    ess_n = ess_per_queries(ess_mean, queries)
    return {
        **chains,
        "ess_se": ess_mean * rel_se,
        "ess_n": ess_n,
        "ess_n_se": ess_n * rel_se,
        "ess_t": ess_mean / max(seconds, 1e-12),
        "ess_per_step": ess_mean / steps,
    }
