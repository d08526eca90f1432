"""Locally balanced sampler LB-1 (Zanella 2020; DLP's "LB-1" baseline).

Exact informed proposal on the 1-neighbourhood N(x) of the current state:

    q(y|x) = g(p(y)/p(x)) / Z(x),  Z(x) = sum_{z in N(x)} g(p(z)/p(x)),  y in N(x)

with a locally balanced weight g (``balance="sqrt"``: g(t) = sqrt(t), Zanella's
default; ``"barker"``: g(t) = t / (1 + t)), followed by the MH test with the
reverse normaliser Z(y). Every neighbour's log_prob is evaluated (no gradient
approximation), as ONE batched call of [chains * |N|, d].

Neighbourhoods: binary - the d single flips. Ordinal ({0..S-1}^d):
``neighbourhood="hamming"`` - every single-coordinate change (d (S-1) states,
the 1-Hamming ball, default); ``"pm1"`` - x_i +- 1 (2d states, out-of-range
ones get weight 0). The AB paper's "LB" baseline is the gradient-based DLP form,
not this sampler.

The neighbours' log_probs of the current state are cached in
``state.extra["lb_nbr"]`` (keyed by ``extra["lb_x"]``, recomputed when stale), so
a step costs |N| batched evaluations (those of the proposal's neighbourhood),
plus |N| + 1 once at ``init``.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from ebmlab.errors import check
from ebmlab.samplers.base import ChainState, Sampler, StepInfo, log_prob_only, mh_accept
from ebmlab.samplers.proposals import sample_categorical
from ebmlab.samplers.spaces import BINARY, ORDINAL, state_space

NEIGHBOURHOODS = ("hamming", "pm1")
BALANCES = ("sqrt", "barker")


def batched_log_prob(model, X: Tensor, chunk_size: int | None) -> Tensor:
    """log_prob of the rows of X [B, ...] in calls of at most ``chunk_size`` rows (None: one)."""
    if chunk_size is None or X.shape[0] <= chunk_size:
        return log_prob_only(model, X)
    return torch.cat([log_prob_only(model, c) for c in X.split(chunk_size)])


def check_chunk_size(chunk_size) -> None:
    check(
        chunk_size is None
        or (isinstance(chunk_size, int) and not isinstance(chunk_size, bool) and chunk_size >= 1),
        "chunk_size",
        f"must be null or an integer >= 1 (got {chunk_size!r})",
    )


class LocallyBalanced(Sampler):
    """LB-1: exact locally balanced proposal over all 1-neighbours, MH corrected.

    chunk_size: at most this many neighbour states per log_prob call (null: all in one
    batched call); bounds memory for large neighbourhoods (ordinal d (S-1)).
    """

    needs_grad = False
    exact = True
    state_spaces = (BINARY, ORDINAL)

    def __init__(self, neighbourhood: str, balance: str, chunk_size: int | None):
        check(
            neighbourhood in NEIGHBOURHOODS,
            "neighbourhood",
            f"must be one of {list(NEIGHBOURHOODS)} (got {neighbourhood!r})",
        )
        check(balance in BALANCES, "balance", f"must be one of {list(BALANCES)} (got {balance!r})")
        self.neighbourhood = neighbourhood
        check_chunk_size(chunk_size)
        self.balance = balance
        self.chunk_size = chunk_size
        self._init_cost = (1, 0)

    # ------------------------------------------------------------ neighbourhood structure
    def _moves(self, kind: str, S: int, D: int, device) -> tuple[Tensor, Tensor, Tensor]:
        """(coord [M], offset [M], reverse index [M]) of the M moves x -> x + offset e_coord.

        Binary/hamming offsets are taken modulo S; pm1 offsets are +-1 (may leave the domain).
        ``reverse[m]`` is the move that undoes move m from the new state.
        """
        if kind == "binary" or self.neighbourhood == "hamming":
            K = S - 1
            coord = torch.arange(D, device=device).repeat_interleave(K)
            k = torch.arange(1, S, device=device).repeat(D)  # new = (x + k) mod S
            rev = coord * K + (S - k) - 1
            return coord, k, rev
        coord = torch.arange(D, device=device).repeat_interleave(2)
        step = torch.tensor([1, -1], device=device).repeat(D)
        rev = torch.arange(2 * D, device=device) ^ 1  # (i, +1) <-> (i, -1)
        return coord, step, rev

    def _neighbours(self, x: Tensor, kind: str, S: int) -> tuple[Tensor, Tensor]:
        """All neighbours [chains, M, D] of x [chains, D] and their validity mask [chains, M]."""
        n, D = x.shape
        coord, off, _ = self._moves(kind, S, D, x.device)
        M = coord.numel()
        cur = x[:, coord]  # [n, M]
        if kind == "binary" or self.neighbourhood == "hamming":
            new = torch.remainder(cur + off.to(x.dtype), S)
            valid = torch.ones(n, M, dtype=torch.bool, device=x.device)
        else:
            new = cur + off.to(x.dtype)
            valid = (new >= 0) & (new <= S - 1)
            new = torch.where(valid, new, cur)  # evaluate an in-domain placeholder
        Y = x[:, None, :].repeat(1, M, 1)
        Y[:, torch.arange(M, device=x.device), coord] = new
        return Y, valid

    def _nbr_log_probs(self, model, x: Tensor, shape, kind: str, S: int):
        Y, valid = self._neighbours(x, kind, S)
        n, M, D = Y.shape
        lp = batched_log_prob(model, Y.reshape(n * M, *shape[1:]), self.chunk_size)
        lp = lp.reshape(n, M)
        return Y, lp, valid

    def _log_q(self, lp_x: Tensor, nbr: Tensor, valid: Tensor) -> Tensor:
        """log q(.|x) [chains, M] from log p(x) and the neighbours' log p."""
        wide = torch.promote_types(nbr.dtype, torch.float32)
        delta = nbr.to(wide) - lp_x.to(wide)[:, None]
        logw = delta / 2 if self.balance == "sqrt" else F.logsigmoid(delta)
        logw = torch.where(valid, logw, torch.full_like(logw, -torch.inf))
        return torch.log_softmax(logw, dim=-1)

    def n_neighbours(self, model) -> int:
        kind, S = state_space(model, self)
        D = int(model.dim)
        return (
            D if kind == "binary" else (D * (S - 1) if self.neighbourhood == "hamming" else 2 * D)
        )

    # ------------------------------------------------------------ interface
    def init(self, model, x: Tensor) -> ChainState:
        kind, S = state_space(model, self)
        x = x.detach()
        shape = x.shape
        lp = log_prob_only(model, x)
        _, nbr, _ = self._nbr_log_probs(model, x.reshape(shape[0], -1), shape, kind, S)
        self._init_cost = (1 + nbr.shape[1], 0)
        return ChainState(x=x, log_prob=lp, extra={"lb_nbr": nbr, "lb_x": x.reshape(shape[0], -1)})

    def init_cost(self) -> tuple[int, int]:
        """(1 + |N|, 0) for the last ``init`` call."""
        return self._init_cost

    def log_proposal(self, model, x: Tensor, grad: Tensor | None, y: Tensor) -> Tensor:
        """log q(y|x) [batch] (for exact kernel tests; ``grad`` is unused)."""
        kind, S = state_space(model, self)
        xf, yf = x.reshape(x.shape[0], -1), y.reshape(y.shape[0], -1)
        Y, nbr, valid = self._nbr_log_probs(model, xf, x.shape, kind, S)
        logq = self._log_q(log_prob_only(model, x), nbr, valid)
        hit = (Y == yf[:, None, :]).all(-1) & valid
        out = torch.where(hit, logq, torch.full_like(logq, -torch.inf))
        return torch.logsumexp(out, dim=-1)

    def step(self, model, state: ChainState, generator: torch.Generator):
        kind, S = state_space(model, self)
        shape = state.x.shape
        n = shape[0]
        x = state.x.reshape(n, -1)
        rows = torch.arange(n, device=x.device)
        n_lp = 0
        Yx, valid_x = self._neighbours(x, kind, S)
        extra = state.extra or {}
        nbr_x, key = extra.get("lb_nbr"), extra.get("lb_x")
        stale = nbr_x is None or key is None or nbr_x.shape != valid_x.shape
        if stale or not torch.equal(key, x):  # e.g. a state last moved by another sampler
            nbr_x = batched_log_prob(model, Yx.reshape(-1, *shape[1:]), self.chunk_size)
            nbr_x = nbr_x.reshape(valid_x.shape)
            n_lp += valid_x.shape[1]
        logq_x = self._log_q(state.log_prob, nbr_x, valid_x)
        m = sample_categorical(logq_x, generator)
        y = Yx[rows, m]
        lp_y = nbr_x[rows, m]
        rev = self._moves(kind, S, x.shape[1], x.device)[2]
        Yy, nbr_y, valid_y = self._nbr_log_probs(model, y, shape, kind, S)
        n_lp += nbr_y.shape[1]
        logq_y = self._log_q(lp_y, nbr_y, valid_y)
        wide = logq_x.dtype
        log_ratio = lp_y.to(wide) - state.log_prob.to(wide) + logq_y[rows, rev[m]] - logq_x[rows, m]
        accepted, accept_prob = mh_accept(log_ratio, generator)
        a = accepted[:, None]
        x_new = torch.where(a, y, x)
        new = ChainState(
            x=x_new.reshape(shape),
            log_prob=torch.where(accepted, lp_y, state.log_prob),
            extra={**extra, "lb_nbr": torch.where(a, nbr_y, nbr_x), "lb_x": x_new},
        )
        jump = (y - x).abs().sum(-1) * accepted.to(x.dtype)
        info = StepInfo(
            accept_prob=accept_prob, accepted=accepted, jump=jump, n_log_prob=n_lp, n_grad=0
        )
        return new, info
