"""The ratio matching learner: RM, RMwGGIS basic / advanced, RMwRAND (RMwGGIS paper, Alg. 1).

One iteration (:meth:`RatioMatchingLearner.step`): draw ``batch_size`` data rows with
replacement, then one update on

    loss = J_objective(batch) + l1 * sum |theta|_1     (theta = model.l1_parameters())

(``objective``: the loss form, ``estimator``: how its sum over the d neighbours is computed;
:mod:`ebmlab.learning.ratio_matching`), gradient-norm clipping
(``grad_clip`` > 0), an Adam step with ``weight_decay``, and the model's ``project_()``
(symmetrise J and zero its diagonal for the Ising model; nothing for other models).
No sampler. Settings per benchmark (in conf/): density modelling and graph generation use
the reference's Adam 5e-4, weight decay 1e-4, clip 1; Ising learning (App. J) Adam 1e-4,
batch 100, L1 0.01 on J, no weight decay, no clipping.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from ebmlab.errors import ConfigError, DivergenceError, check
from ebmlab.learning.batches import Transform, draw_rows
from ebmlab.learning.ratio_matching import (
    ESTIMATORS,
    NEIGHBOURS,
    VARIANTS,
    full_loss,
    sampled_loss,
)
from ebmlab.learning.ratio_matching_objectives import OBJECTIVES, PROPOSALS


class RatioMatchingLearner:
    """Ratio matching family on mini-batches of a data set (implements
    :class:`~ebmlab.core.protocols.Learner`).

    Args:
        objective: the loss form: ``eq3`` (the paper's Eq. 3, minimised by p_data^(1/4)),
            ``hyvarinen`` (Eq. 2) or ``lyu`` (Lyu's form with its cross term), both consistent.
        estimator: ``full`` (RM, all d neighbours), ``ggis`` (RMwGGIS, gradient-guided
            proposal) or ``uniform`` (RMwRAND, Sec. 5.1).
        proposal: ``value`` (n(i) ∝ |t(delta_hat_i)|, Eq. 10 for ``eq3``) or ``slope``
            (n(i) ∝ |t'(delta_hat_i)|); used by ``ggis`` only.
        variant: ``advanced`` (unweighted sum of the s terms, Eq. 11) or ``basic``
            (importance-weighted, Eq. 6, unbiased); unused by ``full``.
        s: sampled neighbours per data point; unused by ``full``.
        replacement: draw the s indices with replacement; unused by ``full``.
        lr, weight_decay: Adam.
        grad_clip: max total gradient norm; 0 disables clipping.
        chunk_size: rows per forward over the n*d neighbours of ``full`` (0 = one batch).
        batch_size: data rows per iteration.
        l1: weight of the L1 penalty on the model's ``l1_parameters()``.
        neighbours: ``model`` (the model's exact flip form, e.g. the Ising closed form: RM
            on the 25x25 Ising costs one [n, d] x [d, d] product) or ``generic`` (the flipped
            vectors as one batch, the papers' cost model); the values are the same.
    """

    needs_sampler = False

    def __init__(
        self,
        objective: Literal["eq3", "hyvarinen", "lyu"],
        estimator: Literal["full", "ggis", "uniform"],
        proposal: Literal["value", "slope"],
        variant: Literal["basic", "advanced"],
        s: int,
        replacement: bool,
        lr: float,
        weight_decay: float,
        grad_clip: float,
        chunk_size: int,
        batch_size: int,
        l1: float,
        neighbours: Literal["model", "generic"],
    ):
        check(
            objective in OBJECTIVES,
            "objective",
            f"must be one of {', '.join(OBJECTIVES)} (got {objective!r})",
        )
        check(
            estimator in ESTIMATORS,
            "estimator",
            f"must be one of {', '.join(ESTIMATORS)} (got {estimator!r})",
        )
        check(
            proposal in PROPOSALS,
            "proposal",
            f"must be one of {', '.join(PROPOSALS)} (got {proposal!r})",
        )
        check(
            variant in VARIANTS,
            "variant",
            f"must be one of {', '.join(VARIANTS)} (got {variant!r})",
        )
        check(isinstance(s, int) and s >= 1, "s", f"must be an integer >= 1 (got {s})")
        check(lr > 0, "lr", f"must be > 0 (got {lr})")
        check(weight_decay >= 0, "weight_decay", f"must be >= 0 (got {weight_decay})")
        check(grad_clip >= 0, "grad_clip", f"must be >= 0; 0 disables clipping (got {grad_clip})")
        check(chunk_size >= 0, "chunk_size", f"must be >= 0; 0 means one batch (got {chunk_size})")
        check(batch_size >= 1, "batch_size", f"must be an integer >= 1 (got {batch_size})")
        check(l1 >= 0, "l1", f"must be >= 0 (got {l1})")
        check(
            neighbours in NEIGHBOURS,
            "neighbours",
            f"must be one of {', '.join(NEIGHBOURS)} (got {neighbours!r})",
        )
        self.neighbours = neighbours
        self.objective, self.estimator, self.proposal = objective, estimator, proposal
        self.variant, self.s, self.replacement = variant, s, replacement
        self.lr, self.weight_decay, self.grad_clip = lr, weight_decay, grad_clip
        self.chunk_size, self.batch_size, self.l1 = chunk_size, batch_size, l1
        self.optimizer: torch.optim.Optimizer | None = None
        self.iteration = 0

    def check_data_dim(self, d: int) -> None:
        """Drawing s distinct indices needs s <= d (call it at build time, before compute)."""
        if not (self.estimator == "full" or self.replacement or self.s <= d):
            raise ConfigError(
                "learner.s",
                f"must be <= the data dimension {d} when drawing without replacement "
                f"(got {self.s})",
            )

    def setup(
        self,
        model,
        data: Tensor,
        generator: torch.Generator,
        sampler=None,
        transform: Transform | None = None,
    ) -> None:
        """Adam on the trainable parameters; ``sampler`` is unused (none needed)."""
        self.check_data_dim(data.shape[1])
        self.data, self.transform = data, transform
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.Adam(params, lr=self.lr, weight_decay=self.weight_decay)

    def objective_loss(self, model, x: Tensor, generator: torch.Generator) -> Tensor:
        """The configured objective and estimator, mean over the rows of ``x``."""
        if self.estimator == "full":
            return full_loss(model, x, self.objective, "mean", self.chunk_size, self.neighbours)
        return sampled_loss(
            model,
            x,
            self.objective,
            self.estimator,
            self.proposal,
            self.s,
            self.variant,
            self.replacement,
            generator,
            "mean",
            self.neighbours,
        )

    def step(self, model, generator: torch.Generator) -> dict:
        """One iteration: draw a data batch, then :meth:`update` on it."""
        batch = draw_rows(self.data, self.batch_size, generator, self.transform)
        return self.update(model, batch, generator)

    def update(self, model, batch: Tensor, generator: torch.Generator) -> dict:
        """One optimiser update on ``batch``; raises DivergenceError (naming the iteration)
        when the loss or the gradient norm is not finite."""
        self.iteration += 1
        objective = self.objective_loss(model, batch, generator)
        loss = objective
        l1_params = model.l1_parameters()
        if self.l1 > 0 and l1_params:
            loss = loss + self.l1 * sum(p.abs().sum() for p in l1_params)
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
        model.project_()
        return {"loss": loss.detach(), "rm_loss": objective.detach(), "grad_norm": grad_norm}

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "iteration": self.iteration}

    def load_state_dict(self, d: dict) -> None:
        self.optimizer.load_state_dict(d["optimizer"])
        self.iteration = int(d["iteration"])
