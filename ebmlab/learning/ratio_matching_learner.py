"""Ratio matching with the PCD learner interface (RMwGGIS App. J: Ising learning, Table 3).

Adapts :class:`~ebmlab.learning.ratio_matching.RatioMatchingLearner` (RM, RMwGGIS basic /
advanced, RMwRAND objectives) to the interface the data-set driven tasks call
(``setup`` / ``sample_batch`` / ``step(model, batch, generator)`` / ``state_dict``), and adds
what the Ising experiment needs on top of the objective, as the PCD learner does:

    loss = J_RM-estimate(batch) + l1 * sum |theta|_1     (theta = model.l1_parameters())

then grad-norm clipping (``grad_clip`` > 0), an Adam step with ``weight_decay``, and the
model's ``project_()`` (symmetrise J, zero its diagonal) after every step. No sampler.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from ebmlab.errors import DivergenceError, check
from ebmlab.learning.ratio_matching import RatioMatchingLearner


class RatioMatchingTrainer:
    """RM / RMwGGIS / RMwRAND on mini-batches of a fixed data set (no sampler needed).

    Ising defaults (RMwGGIS App. J): s = 10, Adam lr 1e-4, batch 100, L1 0.01.
    """

    needs_sampler = False

    def __init__(
        self,
        objective: Literal["rm", "rmwggis", "rmwrand"] = "rmwggis",
        variant: Literal["basic", "advanced"] = "advanced",
        s: int = 10,
        replacement: bool = False,
        lr: float = 1e-4,
        weight_decay: float = 0.0,
        grad_clip: float = 0.0,
        chunk_size: int = 0,
        batch_size: int = 100,
        l1: float = 0.01,
    ):
        # the objective's own arguments are validated by RatioMatchingLearner
        self.objective_fn = RatioMatchingLearner(
            objective=objective,
            variant=variant,
            s=s,
            replacement=replacement,
            lr=lr,
            weight_decay=weight_decay,
            grad_clip=grad_clip,
            chunk_size=chunk_size,
        )
        check(batch_size >= 1, "batch_size", f"must be an integer >= 1 (got {batch_size})")
        check(l1 >= 0, "l1", f"must be >= 0 (got {l1})")
        self.objective, self.variant, self.s, self.replacement = objective, variant, s, replacement
        self.lr, self.weight_decay, self.grad_clip = lr, weight_decay, grad_clip
        self.batch_size, self.l1 = batch_size, l1
        self.optimizer: torch.optim.Optimizer | None = None
        self.iteration = 0

    def setup(self, model, sampler, data: Tensor, generator: torch.Generator) -> None:
        """Build the optimiser; ``sampler`` is ignored (ratio matching needs none)."""
        d = data.shape[1]
        check(
            self.objective == "rm" or self.replacement or self.s <= d,
            "s",
            f"must be <= the data dimension {d} when drawing without replacement (got {self.s})",
        )
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.Adam(params, lr=self.lr, weight_decay=self.weight_decay)

    def sample_batch(self, data: Tensor, generator: torch.Generator) -> Tensor:
        idx = torch.randint(
            0, data.shape[0], (self.batch_size,), generator=generator, device=data.device
        )
        return data[idx]

    def step(self, model, batch: Tensor, generator: torch.Generator) -> dict:
        """One update: objective (+ L1), backward, clip, Adam, ``project_()``; returns scalars."""
        self.iteration += 1
        objective = self.objective_fn.loss(model, batch, generator)
        loss = objective
        if self.l1 > 0 and hasattr(model, "l1_parameters"):
            loss = loss + self.l1 * sum(p.abs().sum() for p in model.l1_parameters())
        if not torch.isfinite(loss):
            raise DivergenceError(self.iteration, "the ratio matching loss")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        params = [p for p in model.parameters() if p.grad is not None]
        max_norm = self.grad_clip if self.grad_clip > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        if not torch.isfinite(grad_norm):
            raise DivergenceError(self.iteration, "the gradient norm")
        self.optimizer.step()
        if hasattr(model, "project_"):
            model.project_()
        return {
            "loss": float(loss.detach()),
            "rm_loss": float(objective.detach()),
            "grad_norm": float(grad_norm),
        }

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "iteration": self.iteration}

    def load_state_dict(self, d: dict) -> None:
        self.optimizer.load_state_dict(d["optimizer"])
        self.iteration = int(d["iteration"])
