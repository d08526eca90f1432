"""Exact block Gibbs for RBMs: alternate h ~ p(h | v) and v ~ p(v | h) (DLP App. I.3).

Model-specific: the model must provide ``hidden_logits(v)``, ``visible_logits(h)`` and
``log_prob_from_hidden_logits(v, hidden_logits)`` (see :class:`ebmlab.models.rbm.BernoulliRBM`).

Cost and bookkeeping: one sweep is two V x H matrix products and never calls ``log_prob``,
so a step reports ``n_log_prob = n_grad = 0`` (``matmuls_per_step`` gives the real cost).
``state.log_prob`` is nevertheless exact at no extra cost: the hidden logits W v + c of
the new v are computed at the end of a step (the next step needs them to draw h), and
log p~(v) = sum softplus(W v + c) + b^T v reuses them. They are cached in
``state.extra["hidden_logits"]`` together with the x they belong to, so a state whose x was
replaced elsewhere is recomputed rather than trusted.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ebmlab.errors import ConfigError
from ebmlab.samplers.base import ChainState, Sampler, StepInfo, bernoulli
from ebmlab.samplers.spaces import BINARY

REQUIRED = ("hidden_logits", "visible_logits", "log_prob_from_hidden_logits")


class BlockGibbs(Sampler):
    """Block Gibbs on an RBM; every move is accepted (accept_prob 1), the chain is exact.

    Args:
        n_sweeps: v -> h -> v sweeps per ``step`` (1 in the reference experiments).
    """

    needs_grad = False
    exact = True
    state_spaces = (BINARY,)
    model_type = "ebmlab.models.rbm.BernoulliRBM"

    def __init__(self, n_sweeps: int):
        if not isinstance(n_sweeps, int) or isinstance(n_sweeps, bool) or n_sweeps < 1:
            raise ConfigError("n_sweeps", f"an integer >= 1 (got {n_sweeps!r})")
        self.n_sweeps = n_sweeps
        self.matmuls_per_step = 2 * n_sweeps

    @staticmethod
    def check_model(model) -> None:
        missing = [m for m in REQUIRED if not callable(getattr(model, m, None))]
        if missing:
            raise ConfigError(
                "sampler",
                "block_gibbs needs an RBM-like model providing "
                f"{', '.join(REQUIRED)} (got {type(model).__name__}, missing {missing}); "
                "use it with model=rbm",
            )

    @torch.no_grad()
    def _state(self, model, x: Tensor) -> ChainState:
        hl = model.hidden_logits(x)
        lp = model.log_prob_from_hidden_logits(x, hl)
        return ChainState(x=x, log_prob=lp, grad=None, extra={"hidden_logits": hl, "hl_of": x})

    def init(self, model, x: Tensor) -> ChainState:
        self.check_model(model)
        return self._state(model, x.detach())

    def init_cost(self) -> tuple[int, int]:
        return (0, 0)

    @torch.no_grad()
    def step(self, model, state: ChainState, generator: torch.Generator):
        hl = state.extra.get("hidden_logits")
        if hl is None or state.extra.get("hl_of") is not state.x:
            self.check_model(model)
            hl = model.hidden_logits(state.x)
        x = state.x
        for i in range(self.n_sweeps):
            if i > 0:
                hl = model.hidden_logits(x)
            h = bernoulli(torch.sigmoid(hl), generator)
            x = bernoulli(torch.sigmoid(model.visible_logits(h)), generator)
        new = self._state(model, x)
        n = x.shape[0]
        info = StepInfo(
            accept_prob=torch.ones(n, device=x.device),
            accepted=torch.ones(n, dtype=torch.bool, device=x.device),
            jump=(x != state.x).flatten(1).sum(-1).float(),
            n_log_prob=0,
            n_grad=0,
        )
        return new, info
