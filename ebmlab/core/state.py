"""Explicit chain state and per-step info shared by every kernel (BlackJAX-style).

``ChainState`` caches ``log_prob(x)`` and ``grad log_prob(x)`` so a Metropolis-Hastings
step costs one forward and one backward; ``StepInfo`` is what one step did.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
from torch import Tensor


@dataclass
class ChainState:
    """Per-chain state: ``x`` [chains, ...], ``log_prob`` [chains], ``grad`` like x or None."""

    x: Tensor
    log_prob: Tensor
    grad: Tensor | None = None
    extra: dict = field(default_factory=dict)

    def replace(self, **kw) -> ChainState:
        return replace(self, **kw)

    def state_dict(self) -> dict:
        """The chains and their cached log-probabilities and gradients, for a checkpoint."""
        return {"x": self.x, "log_prob": self.log_prob, "grad": self.grad}

    def restored(self, d) -> ChainState:
        """This state with ``d`` (from :meth:`state_dict`, or an (x, log_prob, grad) tuple
        as older checkpoints hold) put back; ``extra`` is kept."""
        if isinstance(d, (tuple, list)):
            d = dict(zip(("x", "log_prob", "grad"), d))
        return replace(self, x=d["x"], log_prob=d["log_prob"], grad=d["grad"])

    def select(self, accept: Tensor, other: ChainState) -> ChainState:
        """Take ``other``'s values where ``accept`` [chains] is True, else keep ours."""
        a = accept.view(-1, *([1] * (self.x.dim() - 1)))
        x = torch.where(a, other.x, self.x)
        lp = torch.where(accept, other.log_prob, self.log_prob)
        g = None
        if self.grad is not None and other.grad is not None:
            g = torch.where(a, other.grad, self.grad)
        return ChainState(x=x, log_prob=lp, grad=g, extra=self.extra)


@dataclass
class StepInfo:
    """What one step did, per chain where it makes sense.

    accept_prob: MH acceptance probability [chains] (1 for always-accept moves).
    accepted: whether the move was taken [chains] (bool).
    jump: Hamming distance (or L1 for ordinal states) between old and new x [chains].
    n_log_prob: batched log_prob evaluations this step cost (one per chain each).
    n_grad: batched gradient evaluations this step cost.
    """

    accept_prob: Tensor
    accepted: Tensor
    jump: Tensor
    n_log_prob: int
    n_grad: int

    def totals(self) -> dict:
        """Per-step scalars for :class:`ebmlab.core.loop.Totals`, left on the device."""
        return {
            "accept_rate": self.accept_prob.float().mean(),
            "jump": self.jump.float().mean(),
            "n_log_prob": self.n_log_prob,
            "n_grad": self.n_grad,
        }

    def scalars(self) -> dict[str, float]:
        return {
            "accept_rate": float(self.accept_prob.float().mean()),
            "jump": float(self.jump.float().mean()),
            "n_log_prob": float(self.n_log_prob),
            "n_grad": float(self.n_grad),
        }
