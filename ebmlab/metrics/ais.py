"""Annealed importance sampling (Neal 2001) estimates of log Z.

Generic AIS (:func:`ais_log_z`) anneals geometrically from a normalised base
density to an unnormalised target, f_b(x) = (1 - b) log p0(x) + b log p~(x),
with one user-supplied transition per temperature that leaves the
INTERMEDIATE density f_b invariant (DLP/ACS deep-EBM evaluation, PROTOCOLS.md
"Deep EBMs"). The RBM-specific version (:func:`rbm_ais_log_z`) follows
Salakhutdinov & Murray (2008): intermediate RBMs with scaled parameters and
block-Gibbs transitions of the intermediate RBM (ACS Table 1, done correctly).
:func:`rbm_full_model_transition_log_z` is the ACS reference code's estimator, which moves
the chains with the FULL RBM at every temperature: not valid AIS, kept only to explain the
paper's numbers (it overestimates log Z by about KL(p || p0), so test LLs come out low).

For one chain x_0 ~ p0, x_k ~ T_k(x_{k-1}, .) the log weight is
log w = sum_{k=1..K} [f_{b_k}(x_{k-1}) - f_{b_{k-1}}(x_{k-1})], and
log Z = log Z_0 + logsumexp(log w) - log n. Log weights are accumulated in float64.

Log-probability convention: ``log_prob(x)`` is unnormalised, batched over
chains (leading dim) and returns [chains].
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Generator, Tensor

from ebmlab.core.chain import ChainRunner
from ebmlab.core.state import ChainState, StepInfo
from ebmlab.metrics.ais_blocks import RBMAISStep, run_temperatures, schedule_state

LogProb = Callable[[Tensor], Tensor]


@dataclass
class AISResult:
    """log_z: estimate of log Z; log_z_stderr: delta-method standard error of
    log(mean w) over chains; log_weights: float64 [n_chains]."""

    log_z: float
    log_z_stderr: float
    log_weights: Tensor


def _summarise(log_w: Tensor, log_z0: float) -> AISResult:
    """log Z = log Z0 + log mean w; SE(log mean w) ~= std(w) / (sqrt(n) mean w), in log space."""
    n = log_w.numel()
    log_mean = torch.logsumexp(log_w, 0) - math.log(n)
    if n > 1:
        r = torch.exp(log_w - log_mean)  # w_i / mean(w): O(1) numbers, no overflow
        se = float(torch.sqrt(r.var(unbiased=True) / n))
    else:
        se = float("nan")
    return AISResult(log_z=float(log_mean) + log_z0, log_z_stderr=se, log_weights=log_w)


def group_spread(log_weights: Tensor, n_groups: int) -> float:
    """Max - min of the log Z estimates of ``n_groups`` disjoint groups of chains: the spread
    across independent AIS runs of n_chains / n_groups chains each (a conservative stand-in for
    the spread of full-size runs, which is smaller by about sqrt(n_groups))."""
    if n_groups < 2 or log_weights.numel() < n_groups:
        raise ValueError(f"need >= 2 groups of >= 1 chain (got {n_groups} groups)")
    ests = [torch.logsumexp(g, 0) - math.log(g.numel()) for g in log_weights.chunk(n_groups)]
    return float(max(ests) - min(ests))


def weight_ess(log_weights: Tensor) -> float:
    """Effective sample size of the importance weights, (sum w)^2 / sum w^2, from log w: how
    many chains carry the log Z estimate (n for equal weights, 1 when one dominates). A low
    value with a wide ``group_spread`` means rare chains decide log Z (the intermediate
    distributions do not mix), which more chains or temperatures cure only slowly."""
    if log_weights.numel() < 1:
        raise ValueError("need at least one weight")
    lw = log_weights.to(torch.float64)
    return float(torch.exp(2 * torch.logsumexp(lw, 0) - torch.logsumexp(2 * lw, 0)))


def _check_betas(betas: Tensor) -> list[float]:
    b = betas.detach().to(torch.float64).cpu()
    if b.dim() != 1 or b.numel() < 2:
        raise ValueError(
            f"betas must be a 1-D schedule with >= 2 entries (got shape {tuple(b.shape)})"
        )
    if float(b[0]) != 0.0 or float(b[-1]) != 1.0:
        raise ValueError(f"betas must start at 0 and end at 1 (got {float(b[0])}, {float(b[-1])})")
    if bool((b[1:] < b[:-1]).any()):
        raise ValueError("betas must be non-decreasing")
    return b.tolist()


def linear_betas(n: int) -> Tensor:
    """``n`` equally spaced inverse temperatures from 0 to 1 inclusive (float64)."""
    if n < 2:
        raise ValueError(f"need >= 2 temperatures (got {n})")
    return torch.linspace(0.0, 1.0, n, dtype=torch.float64)


def sigmoid_betas(n: int, delta: float = 4.0) -> Tensor:
    """Sigmoid schedule (Grosse et al. 2015): sigmoid(delta (2t - 1)), t in [0, 1], rescaled
    to start at 0 and end at 1; denser near both ends than :func:`linear_betas`."""
    if n < 2:
        raise ValueError(f"need >= 2 temperatures (got {n})")
    s = torch.sigmoid(delta * (2.0 * linear_betas(n) - 1.0))
    return (s - s[0]) / (s[-1] - s[0])


def _progress(it, progress: bool, desc: str):
    if not progress:
        return it
    from tqdm import tqdm

    return tqdm(it, desc=desc, mininterval=5.0)


def ais_log_z(
    base_sample: Callable[[int, Generator], Tensor],
    base_log_prob: LogProb,
    target_log_prob: LogProb,
    transition: Callable[[Tensor, float, Generator], Tensor],
    betas: Tensor,
    n_chains: int,
    generator: Generator,
    progress: bool = False,
    base_log_z: float = 0.0,
) -> AISResult:
    """Generic AIS estimate of the target's log normaliser (Neal 2001, Eq. 6-9).

    base_sample(n, gen) draws n exact samples of the base; base_log_prob is its
    log density, normalised up to ``base_log_z`` (0 for a normalised base).
    ``transition(x, beta, gen)`` must leave f_beta = (1-beta) base + beta target
    invariant. One transition per intermediate temperature (none at beta = 1,
    where it could not change the weights).
    """
    bs = _check_betas(betas)
    if n_chains < 1:
        raise ValueError(f"n_chains must be >= 1 (got {n_chains})")
    with torch.no_grad():
        x = base_sample(n_chains, generator)
        log_w = torch.zeros(n_chains, dtype=torch.float64, device=x.device)
        for k in _progress(range(1, len(bs)), progress, "AIS"):
            db = bs[k] - bs[k - 1]
            if db != 0.0:
                diff = target_log_prob(x).to(torch.float64) - base_log_prob(x).to(torch.float64)
                log_w += db * diff
            if k < len(bs) - 1:
                x = transition(x, bs[k], generator)
    return _summarise(log_w, base_log_z)


def intermediate_log_prob(base_log_prob: LogProb, target_log_prob: LogProb, beta: float) -> LogProb:
    """f_beta(x) = (1 - beta) base_log_prob(x) + beta target_log_prob(x)."""

    def f(x: Tensor) -> Tensor:
        return (1.0 - beta) * base_log_prob(x) + beta * target_log_prob(x)

    return f


def gibbs_sweep_transition(
    base_log_prob: LogProb, target_log_prob: LogProb
) -> Callable[[Tensor, float, Generator], Tensor]:
    """AIS transition for binary x [chains, d]: one systematic-scan Gibbs sweep of f_beta.

    Each coordinate is resampled from its exact conditional,
    P(flip) = sigmoid(f_beta(flip_i x) - f_beta(x)); vectorised over chains, one
    batched log-prob pair per coordinate (a reference transition for small d).
    """

    def transition(x: Tensor, beta: float, gen: Generator) -> Tensor:
        f = intermediate_log_prob(base_log_prob, target_log_prob, beta)
        x = x.clone()
        cur = f(x)
        for i in range(x.shape[1]):
            y = x.clone()
            y[:, i] = 1.0 - y[:, i]
            fy = f(y)
            u = torch.rand(x.shape[0], generator=gen, device=x.device, dtype=torch.float64)
            flip = torch.log(u) < F.logsigmoid((fy - cur).to(torch.float64))
            x = torch.where(flip[:, None], y, x)
            cur = torch.where(flip, fy, cur)
        return x

    return transition


# ---------------------------------------------------------------- Bernoulli RBM


def _check_rbm(W: Tensor, b: Tensor, c: Tensor) -> None:
    if W.dim() != 2 or b.shape != (W.shape[1],) or c.shape != (W.shape[0],):
        raise ValueError(
            "expected W [H, V], b [V], c [H]; "
            f"got {tuple(W.shape)}, {tuple(b.shape)}, {tuple(c.shape)}"
        )


def rbm_log_prob(v: Tensor, W: Tensor, b: Tensor, c: Tensor) -> Tensor:
    """Unnormalised marginal log p(v) = sum_j softplus((W v + c)_j) + b.v for v [n, V]."""
    return F.softplus(v @ W.T + c).sum(-1) + v @ b


def rbm_exact_log_z(W: Tensor, b: Tensor, c: Tensor, max_units: int = 22) -> float:
    """Exact log Z of a Bernoulli RBM (W [H, V], visible bias b, hidden bias c).

    Enumerates the smaller layer in float64: over v, log Z = logsumexp_v
    [b.v + sum_j softplus((W v + c)_j)]; over h, logsumexp_h [c.h + sum_i
    softplus((W^T h + b)_i)]. Refuses layers larger than ``max_units``.
    """
    _check_rbm(W, b, c)
    W, b, c = (t.detach().to(torch.float64) for t in (W, b, c))
    if W.shape[1] <= W.shape[0]:
        n_enum, A, bias_enum, bias_other = W.shape[1], W, b, c
    else:
        n_enum, A, bias_enum, bias_other = W.shape[0], W.T, c, b
    if n_enum > max_units:
        raise ValueError(f"smaller layer has {n_enum} units; enumeration limited to {max_units}")
    # A: [other, enum]; enumerated state s contributes bias_enum.s + sum softplus(A s + bias_other)
    bits = torch.arange(n_enum, device=W.device)
    chunk = 1 << 16
    parts = []
    for start in range(0, 1 << n_enum, chunk):
        idx = torch.arange(start, min(start + chunk, 1 << n_enum), device=W.device)
        s = ((idx[:, None] >> bits) & 1).to(torch.float64)
        parts.append(torch.logsumexp(s @ bias_enum + F.softplus(s @ A.T + bias_other).sum(-1), 0))
    return float(torch.logsumexp(torch.stack(parts), 0))


def rbm_ais_log_z(
    W: Tensor,
    b: Tensor,
    c: Tensor,
    base_b: Tensor,
    n_temps: int,
    n_chains: int,
    generator: Generator,
    chunk: int | None = None,
    betas: Tensor | None = None,
    progress: bool = False,
) -> AISResult:
    """AIS for a Bernoulli RBM with intermediate RBMs (Salakhutdinov & Murray 2008, Sec. 4.1).

    p_beta(v, h) ∝ exp((1 - beta) base_b.v + beta (h^T W v + b.v + c.h)), so the
    base (beta = 0) is independent Bernoulli(sigmoid(base_b)) visibles with
    uniform hiddens: log Z_0 = sum softplus(base_b) + H log 2. Marginal:
    f_beta(v) = (1-beta) base_b.v + beta b.v + sum_j softplus(beta (W v + c)_j).
    Transition at beta: h ~ p_beta(h|v) then v ~ p_beta(v|h) (block Gibbs of the
    intermediate RBM). ``betas`` overrides the linear schedule of ``n_temps``
    temperatures; ``chunk`` runs the chains in groups of that size (memory).
    """
    _check_rbm(W, b, c)
    if base_b.shape != b.shape:
        raise ValueError(f"base_b must have shape {tuple(b.shape)} (got {tuple(base_b.shape)})")
    bs = _check_betas(linear_betas(n_temps) if betas is None else betas)
    if n_chains < 1:
        raise ValueError(f"n_chains must be >= 1 (got {n_chains})")
    H = W.shape[0]
    log_z0 = float(F.softplus(base_b.detach().to(torch.float64)).sum()) + H * math.log(2.0)
    chunk = n_chains if chunk is None else max(1, chunk)
    logws = [
        _rbm_ais_chains(W, b, c, base_b, bs, min(chunk, n_chains - s), generator, progress)
        for s in range(0, n_chains, chunk)
    ]
    return _summarise(torch.cat(logws), log_z0)


class IntermediateRBMGibbs:
    """Block Gibbs of the intermediate RBM p_beta(v, h) ∝ exp((1 - beta) base_b.v + beta
    (h^T W v + b.v + c.h)) (Salakhutdinov & Murray 2008, Sec. 4.1): h ~ p_beta(h|v), then
    v ~ p_beta(v|h). A kernel for the chain runner; ``beta`` is set per temperature and the
    hidden pre-activations W v + c of the state come in ``state.extra["a"]`` (AIS computes
    them for the weights anyway). beta = 1 is block Gibbs of the RBM itself."""

    state_spaces, exact = ("binary",), True

    def __init__(self, W: Tensor, b: Tensor, c: Tensor, base_b: Tensor):
        self.W, self.b, self.c, self.base_b = W, b, c, base_b
        self.beta = 1.0

    def init(self, model, v: Tensor) -> ChainState:
        return ChainState(x=v, log_prob=None, extra={"a": v @ self.W.T + self.c})

    def step(self, model, state: ChainState, gen: Generator) -> tuple[ChainState, StepInfo]:
        beta, v = self.beta, state.x
        h = torch.bernoulli(torch.sigmoid(beta * state.extra["a"]), generator=gen)
        logits_v = (1.0 - beta) * self.base_b + beta * (h @ self.W + self.b)
        new = torch.bernoulli(torch.sigmoid(logits_v), generator=gen)
        ones = torch.ones(v.shape[0], device=v.device)
        jump = (new != v).sum(-1)
        return ChainState(x=new, log_prob=None), StepInfo(ones, ones.bool(), jump, 0, 0)

    def state_dict(self) -> dict:
        return {"beta": self.beta}

    def load_state_dict(self, d: dict) -> None:
        self.beta = float(d["beta"])


def _rbm_ais_chains(
    W: Tensor,
    b: Tensor,
    c: Tensor,
    base_b: Tensor,
    bs: list[float],
    n: int,
    gen: Generator,
    progress: bool,
) -> Tensor:
    """Log weights of ``n`` chains: temperatures 1 .. K-2 (increment, then the transition at
    that temperature) as chain-runner blocks with the schedule on the device
    (:mod:`ebmlab.metrics.ais_blocks`), then the last increment."""
    with torch.no_grad():
        W, b, c, base_b = (t.detach() for t in (W, b, c, base_b))
        probs = torch.sigmoid(base_b).expand(n, -1)
        v = torch.bernoulli(probs, generator=gen)
        kernel = RBMAISStep(W, b, c, base_b)
        chains = ChainRunner(None, kernel, schedule_state(v, bs), gen)
        bar = _bar(len(bs) - 1, progress, "RBM AIS")
        run_temperatures(chains, len(bs) - 2, bar)
        log_w, _, _ = kernel.weigh(chains.state)  # the last temperature: no transition
        if bar is not None:
            bar.update(1)
            bar.close()
    return log_w


def _bar(total: int, progress: bool, desc: str):
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, mininterval=5.0)


def rbm_full_model_transition_log_z(
    W: Tensor,
    b: Tensor,
    c: Tensor,
    base_b: Tensor,
    n_temps: int,
    n_chains: int,
    generator: Generator,
    progress: bool = False,
) -> AISResult:
    """The ACS reference code's RBM "AIS" (its ``ais.evaluate(..., is_rbm=True)``): NOT valid.

    Weights follow the geometric path f_beta(v) = beta log p~(v) + (1 - beta) log p0(v) from
    the normalised base p0 = Bernoulli(sigmoid(base_b)) (log Z_0 = 0), but every transition is
    a block-Gibbs step of the full RBM (beta = 1) instead of the intermediate one. The chains
    therefore sample p itself, log w tends to E_p[log p~ - log p0] = log Z + KL(p || p0), and
    the estimate exceeds log Z by up to that KL. Used only to compare with the paper's values.
    """
    _check_rbm(W, b, c)
    bs = _check_betas(linear_betas(n_temps))
    with torch.no_grad():
        W, b, c, base_b = (t.detach() for t in (W, b, c, base_b))
        log_z0_base = F.softplus(base_b.to(torch.float64)).sum()
        v = torch.bernoulli(torch.sigmoid(base_b).expand(n_chains, -1), generator=generator)
        log_w = torch.zeros(n_chains, dtype=torch.float64, device=W.device)
        gibbs = IntermediateRBMGibbs(W, b, c, base_b)  # beta = 1: the full RBM's block Gibbs
        chains = ChainRunner(None, gibbs, ChainState(x=v, log_prob=None), generator)
        for k in _progress(range(1, len(bs)), progress, "RBM AIS (reference code)"):
            v = chains.state.x
            a = v @ W.T + c
            log_p = (v @ b).double() + F.softplus(a.double()).sum(-1)
            log_p0 = (v @ base_b).double() - log_z0_base
            log_w += (bs[k] - bs[k - 1]) * (log_p - log_p0)
            chains.state = ChainState(x=v, log_prob=None, extra={"a": a})
            chains.step()
    return _summarise(log_w, 0.0)
