"""Single-site Gibbs samplers for binary {0,1}^d and ordinal {0..S-1}^d models.

``RandomScanGibbs`` ("Gibbs-1" in GWG/DLP): one uniformly random coordinate per
chain per step, resampled from its exact conditional. ``SweepGibbs``: a
systematic scan updating every coordinate once per step.

Both only call ``model.log_prob`` (no gradients). The conditional of one site is
computed from the cached log_prob of the current state plus the log_prob of the
alternatives (1 for binary, S-1 for ordinal, evaluated in one batched call). A binary model
with single-flip updates (``flip_cache`` / ``flip_update`` / ``flip_tag``: the RBM, the
Ising models) evaluates the flipped state from a per-chain cache instead (rank-1 update).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ebmlab.samplers.base import (
    ChainState,
    Sampler,
    StepInfo,
    flip_state,
    has_flip_updates,
    log_prob_only,
    with_flip_cache,
)
from ebmlab.samplers.proposals import sample_categorical
from ebmlab.samplers.spaces import BINARY, ORDINAL, StateSpace, state_space


def _site_update(
    model, space: StateSpace, state: ChainState, site: Tensor, generator: torch.Generator
) -> tuple[ChainState, int]:
    """Resample coordinate ``site`` [chains] (flat index) of every chain from its conditional.

    Returns the new state and the number of batched log_prob evaluations.
    """
    kind, S = space
    shape = state.x.shape
    x = state.x.reshape(shape[0], -1)
    n = x.shape[0]
    rows = torch.arange(n, device=x.device)
    cur = x[rows, site]  # [chains]
    lp_cur = state.log_prob
    wide = torch.promote_types(lp_cur.dtype, torch.float32)
    if kind == "binary":
        y = x.clone()
        y[rows, site] = 1.0 - cur
        entry = state.aux.get("flip")
        if entry is not None:  # put there by _flip_ready for the current parameters
            lp_alt, _, cache_y = model.flip_update(y, site, entry[1][0], False)
            aux = {"flip": (entry[0], (cache_y,))}
        else:
            lp_alt, aux = log_prob_only(model, y.reshape(shape)), {}
        # P(flip) = sigmoid(f(y) - f(x)); compare log u with logsigmoid for safety
        delta = (lp_alt.to(wide) - lp_cur.to(wide)).float()
        u = torch.rand(delta.shape, generator=generator, device=delta.device)
        flip = torch.log(u) < torch.nn.functional.logsigmoid(delta)
        prop = ChainState(x=y.reshape(shape), log_prob=lp_alt, extra=state.extra, aux=aux)
        return state.merge(flip, prop), 1
    # ordinal: the S-1 alternatives (cur + k) mod S, k = 1..S-1, as one batched call
    k = torch.arange(1, S, device=x.device, dtype=x.dtype)
    alt_vals = torch.remainder(cur[:, None] + k[None, :], S)  # [chains, S-1]
    y = x[:, None, :].repeat(1, S - 1, 1)  # [chains, S-1, D]
    y[rows[:, None], torch.arange(S - 1, device=x.device)[None, :], site[:, None]] = alt_vals
    lp_alt = log_prob_only(model, y.reshape(n * (S - 1), *shape[1:])).reshape(n, S - 1)
    logits = torch.cat([lp_cur[:, None], lp_alt], 1).to(wide)  # option 0 = stay
    choice = sample_categorical(logits, generator)
    cand = torch.cat([x[:, None, :], y], 1)  # [chains, S, D]
    x_new = cand[rows, choice]
    lp_new = torch.cat([lp_cur[:, None], lp_alt], 1)[rows, choice]
    return ChainState(x=x_new.reshape(shape), log_prob=lp_new, extra=state.extra), S - 1


def _flip_ready(model, space: StateSpace, state: ChainState) -> tuple[ChainState, int]:
    """Binary models with single-flip updates: ``state`` with the flip cache (and the
    evaluations that cost, 0 or 1); otherwise ``state`` without one."""
    if space.kind == BINARY and has_flip_updates(model):
        return with_flip_cache(model, state, with_grad=False)
    if "flip" in state.aux:
        state = state.replace(aux={k: v for k, v in state.aux.items() if k != "flip"})
    return state, 0


def _flip_init(model, sampler) -> bool:
    return state_space(model, sampler).kind == BINARY and has_flip_updates(model)


def _jump(x_old: Tensor, x_new: Tensor) -> Tensor:
    return (x_new - x_old).abs().reshape(x_old.shape[0], -1).sum(-1)


class RandomScanGibbs(Sampler):
    """Random-scan single-site Gibbs ("Gibbs-1"): one uniform coordinate per chain per step.

    Exact (the conditional is computed exactly). Cost per step: 1 batched log_prob
    (binary) or S-1 (ordinal), no gradient.
    """

    needs_grad = False
    exact = True
    state_spaces = (BINARY, ORDINAL)

    def init(self, model, x: Tensor) -> ChainState:
        if _flip_init(model, self):
            return flip_state(model, x.detach(), with_grad=False)
        return super().init(model, x)

    def step(self, model, state: ChainState, generator: torch.Generator):
        space = state_space(model, self)
        state, extra = _flip_ready(model, space, state)
        n = state.x.shape[0]
        D = state.x[0].numel()
        site = torch.randint(0, D, (n,), generator=generator, device=state.x.device)
        new, n_lp = _site_update(model, space, state, site, generator)
        ones = torch.ones(n, device=state.x.device)
        info = StepInfo(
            accept_prob=ones,
            accepted=ones.bool(),
            jump=_jump(state.x, new.x),
            n_log_prob=n_lp + extra,
            n_grad=0,
        )
        return new, info


class SweepGibbs(Sampler):
    """Systematic-scan Gibbs: each step updates coordinates 0..D-1 once, in order.

    The loop over dimensions is inherent to a sweep (each update conditions on
    the previous ones); every single-site update is batched over chains. Cost per
    step: D batched log_prob (binary) or D (S-1) (ordinal).
    """

    needs_grad = False
    exact = True
    state_spaces = (BINARY, ORDINAL)

    def init(self, model, x: Tensor) -> ChainState:
        if _flip_init(model, self):
            return flip_state(model, x.detach(), with_grad=False)
        return super().init(model, x)

    def step(self, model, state: ChainState, generator: torch.Generator):
        space = state_space(model, self)
        state, n_lp = _flip_ready(model, space, state)
        n = state.x.shape[0]
        D = state.x[0].numel()
        x0 = state.x
        for i in range(D):
            site = torch.full((n,), i, device=x0.device, dtype=torch.long)
            state, c = _site_update(model, space, state, site, generator)
            n_lp += c
        ones = torch.ones(n, device=x0.device)
        info = StepInfo(
            accept_prob=ones,
            accepted=ones.bool(),
            jump=_jump(x0, state.x),
            n_log_prob=n_lp,
            n_grad=0,
        )
        return state, info
