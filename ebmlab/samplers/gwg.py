"""Gibbs-with-Gradients (GWG; Grathwohl et al. 2021) for binary {0,1}^d models.

d~(x) = grad f(x) * (1 - 2x) estimates f(flip_i(x)) - f(x); the index proposal is
q(i|x) = softmax(d~(x) / 2). GWG-k draws k indices i_1..i_k iid from q(.|x) (with
replacement) and flips their union. The index sequence is an auxiliary variable
that maps x -> y and y -> x (flipping a set is its own inverse), so the MH ratio

    log a = f(y) - f(x) + sum_j log q(i_j|y) - sum_j log q(i_j|x)

leaves the target invariant. One forward + one backward per step: the proposal's
log_prob and gradient become the next state's cache on acceptance, and so do its index
log-probabilities log q(.|y) (kept in ``state.aux``).

GWG-1 on a model with single-flip updates (``flip_cache`` / ``flip_update`` / ``flip_tag``,
e.g. the RBM and the Ising models) evaluates y from a per-chain cache of x (the RBM's
hidden pre-activations, the Ising field s J) instead of a full forward: the same numbers
up to rounding, at a fraction of the cost.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ebmlab.errors import check
from ebmlab.samplers.base import (
    ChainState,
    Sampler,
    StepInfo,
    flip_state,
    has_flip_updates,
    mh_accept,
    value_and_grad,
    with_flip_cache,
)
from ebmlab.samplers.spaces import BINARY, state_space


def _wide(t: Tensor) -> Tensor:
    dt = torch.promote_types(t.dtype, torch.float32)
    return t if t.dtype == dt else t.to(dt)


class GWG(Sampler):
    """Gibbs-with-Gradients, ``n_flips`` = k indices per step (GWG-k). Binary state only."""

    needs_grad = True
    exact = True
    state_spaces = (BINARY,)

    def __init__(self, n_flips: int):
        check(
            isinstance(n_flips, int) and not isinstance(n_flips, bool) and n_flips >= 1,
            "n_flips",
            f"must be an integer >= 1 (got {n_flips!r})",
        )
        self.n_flips = n_flips

    @staticmethod
    def _index_log_probs(x: Tensor, grad: Tensor) -> Tensor:
        """log q(i|x) [chains, D] = log_softmax(d~(x) / 2)."""
        x, grad = _wide(x.reshape(x.shape[0], -1)), _wide(grad.reshape(grad.shape[0], -1))
        # (1 - 2x) / 2 = +-1/2 exactly: the same numbers as grad * (1 - 2x) / 2
        return torch.log_softmax(grad * torch.sub(0.5, x), dim=-1)

    def _draw(self, logq: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor | None]:
        """The index sequence [chains, k]: k iid draws (all used: None)."""
        return _draw_indices(logq, self.n_flips, generator), None

    @staticmethod
    def _sequence_log_q(logq: Tensor, idx: Tensor, used: Tensor | None = None) -> Tensor:
        """log-probability [chains] of the index sequence ``idx`` under ``logq``."""
        return logq.gather(1, idx).sum(1)

    def log_proposal(self, model, x: Tensor, grad: Tensor, y: Tensor) -> Tensor:
        """log q(y|x) [batch] of the GWG-1 move (for exact kernel tests); n_flips=1 only."""
        if self.n_flips != 1:
            raise NotImplementedError("the marginal of a union of k draws is not computed")
        logq = self._index_log_probs(x, grad)
        diff = (x != y).reshape(x.shape[0], -1)
        one = diff.sum(-1) == 1
        lq = (logq * diff).sum(-1)
        return torch.where(one, lq, torch.full_like(lq, -torch.inf))

    def init(self, model, x: Tensor) -> ChainState:
        if self.n_flips == 1 and has_flip_updates(model):
            return flip_state(model, x.detach(), with_grad=True)
        return super().init(model, x)

    def step(self, model, state: ChainState, generator: torch.Generator):
        state_space(model, self)
        extra = 0
        flips = self.n_flips == 1 and has_flip_updates(model)
        if flips:  # also fills a missing gradient
            state, extra = with_flip_cache(model, state, with_grad=True)
        elif state.grad is None:  # state built by a gradient-free sampler: fill the cache
            lp, g = value_and_grad(model, state.x)
            state, extra = state.replace(log_prob=lp, grad=g), 1
        shape, n = state.x.shape, state.x.shape[0]
        x = state.x.reshape(n, -1)
        cached = state.aux.get("gwg")
        if cached is not None and cached[0] == _TAG:
            (logq_x,) = cached[1]
        else:
            logq_x = self._index_log_probs(state.x, state.grad)  # [chains, D]
            state = state.replace(aux={**state.aux, "gwg": (_TAG, (logq_x,))})
        idx, used = self._draw(logq_x, generator)
        if self.n_flips == 1:
            y = x.clone().scatter_(1, idx, 1 - x.gather(1, idx))
            jump = torch.ones(n, device=x.device, dtype=x.dtype)
        else:
            flip = 1.0 if used is None else used.to(x.dtype)  # distinct indices when not None
            mask = torch.zeros_like(x).scatter_(1, idx, flip)
            y = x + mask * (1 - 2 * x)
            jump = mask.sum(-1)
        aux = {}
        if flips:
            tag, (cache_x,) = state.aux["flip"]
            lp_y, g_y, cache_y = model.flip_update(y, idx[:, 0], cache_x, True)
            g_y = g_y.reshape(shape)
            aux["flip"] = (tag, (cache_y,))
        else:
            lp_y, g_y = value_and_grad(model, y.reshape(shape))
        logq_y = self._index_log_probs(y, g_y)
        aux["gwg"] = (_TAG, (logq_y,))
        prop = ChainState(x=y.reshape(shape), log_prob=lp_y, grad=g_y, aux=aux)
        fwd, rev = self._sequence_log_q(logq_x, idx, used), self._sequence_log_q(logq_y, idx, used)
        log_ratio = _wide(lp_y) - _wide(state.log_prob) + rev - fwd
        accepted, accept_prob = mh_accept(log_ratio, generator)
        new = state.merge(accepted, prop)
        info = StepInfo(
            accept_prob=accept_prob,
            accepted=accepted,
            jump=jump * accepted.to(jump.dtype),
            n_log_prob=1 + extra,
            n_grad=1 + extra,
            proposed_jump=jump,
        )
        return new, info


class GWGDistinct(GWG):
    """GWG-k flipping exactly k DISTINCT coordinates, mixed with GWG-1 so that an even k is
    ergodic. Ebmlab's check of whether the DLP paper's GWG-6 (Sec. 7.1) flips 6 distinct
    coordinates.

    The k-flip move: i_1..i_k drawn from q(.|x) one after another without replacement
    (Gumbel-top-k gives that ordered draw). The ordered sequence s is the auxiliary variable
    ((x, s) -> (x xor s, s) is an involution), so

        log Q_k(s|x) = sum_t log q(i_t|x) - log(1 - sum_{u<t} q(i_u|x)),
        log a = f(y) - f(x) + log Q_k(s|y) - log Q_k(s|x),

    the same sequence scored under q(.|y) for the reverse move. Flipping an even number of
    distinct coordinates changes the number of ones by an even amount, so for even k this
    move alone never leaves the parity class of its start: it keeps the target invariant but
    is reducible. Hence each step, independently per chain and of the state, is a GWG-1 move
    (the first index only, Q_1(i|x) = q(i|x)) with probability ``single_flip_prob``, else the
    k-flip move. Each move is a reversible MH kernel, and the move type is drawn independently
    of the state, so its probability cancels from the MH ratio and the mixture
    p P_1 + (1 - p) P_k is reversible with respect to the target (mixtures of kernels:
    Tierney 1994, Ann. Statist. 22, "hybrid strategies"); P_1 reaches every state of a target with
    full support, so p > 0 makes it irreducible. ``single_flip_prob`` must be > 0 for even
    k (rejected as a config error otherwise); an odd k < dimension is ergodic on its own.
    """

    def __init__(self, n_flips: int, single_flip_prob: float):
        super().__init__(n_flips)
        check(
            isinstance(single_flip_prob, (int, float))
            and not isinstance(single_flip_prob, bool)
            and 0 <= single_flip_prob < 1,
            "single_flip_prob",
            f"must be a number in [0, 1) (got {single_flip_prob!r})",
        )
        check(
            n_flips % 2 == 1 or single_flip_prob > 0,
            "single_flip_prob",
            f"must be > 0 for an even n_flips (got {single_flip_prob!r} with n_flips={n_flips}): "
            "flipping an even number of distinct coordinates never changes the parity of the "
            "number of ones, so that chain is reducible; e.g. single_flip_prob=0.1, or an odd "
            "n_flips",
        )
        self.single_flip_prob = float(single_flip_prob)

    def _draw(self, logq: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor | None]:
        if self.n_flips == 1:
            return _draw_indices(logq, 1, generator), None
        d = logq.shape[-1]
        check(
            self.n_flips <= d,
            "n_flips",
            f"must be <= the dimension {d} for distinct flips (got {self.n_flips})",
        )
        check(
            self.n_flips < d or self.single_flip_prob > 0,
            "n_flips",
            f"must be < the dimension {d} when single_flip_prob is 0 (flipping all "
            "coordinates only swaps a state with its complement)",
        )
        u = torch.rand(logq.shape, generator=generator, device=logq.device, dtype=torch.float64)
        tiny = torch.finfo(torch.float64).tiny
        gumbel = -torch.log(-torch.log(u.clamp_min(tiny)))
        idx = (logq.double() + gumbel).topk(self.n_flips, dim=-1).indices
        if self.single_flip_prob == 0:
            return idx, None
        coin = torch.rand(logq.shape[0], generator=generator, device=logq.device)
        single = coin < self.single_flip_prob  # this chain makes a GWG-1 move this step
        used = torch.ones_like(idx, dtype=torch.bool)
        used[:, 1:] = ~single[:, None]
        return idx, used

    @staticmethod
    def _sequence_log_q(logq: Tensor, idx: Tensor, used: Tensor | None = None) -> Tensor:
        """log Q(s|x) [chains] of the ordered distinct draw ``idx``; ``used`` [chains, k]
        (a prefix of each row) limits the sequence to its used positions."""
        lp = logq.double().gather(1, idx)
        p = lp.exp()
        drawn_before = torch.cumsum(p, 1) - p
        terms = lp - torch.log1p(-drawn_before)
        if used is not None:
            terms = torch.where(used, terms, torch.zeros_like(terms))
        return terms.sum(1).to(torch.promote_types(logq.dtype, torch.float32))


_TAG = ("gwg",)  # log q(.|x) depends on (x, grad) only


def _draw_indices(logq: Tensor, k: int, generator: torch.Generator) -> Tensor:
    """k iid draws [chains, k] from the categorical exp(logq) [chains, D] (inverse CDF).

    Much cheaper than torch.multinomial or Gumbel-max on CPU (k uniforms per chain);
    the CDF is accumulated in float64 so its rounding is far below sampling noise.
    """
    cdf = torch.cumsum(logq.double().exp(), dim=-1)
    u = torch.rand(logq.shape[0], k, generator=generator, device=logq.device, dtype=cdf.dtype)
    idx = torch.searchsorted(cdf, u * cdf[:, -1:], right=True)
    return idx.clamp_(max=logq.shape[-1] - 1)
