"""Contrastive divergence (CD-k) training of a Bernoulli RBM (the ``cd`` learner).

CD-k (Hinton 2002), as in the RBM sampling protocol of GWG / DLP (App. I.3) and ACS (App. D.2):
negatives are k block-Gibbs sweeps started at the data batch (k steps of the
:class:`~ebmlab.samplers.block_gibbs.BlockGibbs` kernel as one block of the chain runner,
:mod:`ebmlab.core.chain`); the loss
-(mean log p~(data) - mean log p~(negatives)) is minimised with Adam. The visible bias starts
at logit(clamp(data mean, .01, .99)).
"""

from __future__ import annotations

import logging

import torch
from torch import Tensor
from tqdm import tqdm

from ebmlab.data.binary_images import BINARIZE_MODES, binarize_batch
from ebmlab.errors import ConfigError, DivergenceError, check
from ebmlab.learning.batches import EpochBatches, Transform
from ebmlab.learning.pcd import PersistentChains
from ebmlab.models.rbm import BernoulliRBM
from ebmlab.samplers.block_gibbs import BlockGibbs

log = logging.getLogger(__name__)
_LOG_EVERY = 100  # iterations between progress lines of CD.train


class CD:
    """CD-k training of a Bernoulli RBM from data (implements
    :class:`~ebmlab.core.protocols.Learner`; exact block Gibbs of the RBM, no configured sampler).

    One step: the next mini-batch of a shuffled pass over the data (``transform`` given to
    ``setup`` applied, e.g. binarisation), ``k`` block-Gibbs sweeps from it for the
    negatives (one chain-runner block of ``k`` one-sweep steps, restarted at every batch),
    one Adam step on -(mean log p~(data) - mean log p~(negatives)).

    Args:
        k: block-Gibbs sweeps per negative sample (DLP 10; ACS paper text 100).
        n_epochs: passes over the training data (DLP: 1); used when ``n_iters`` is 0.
        n_iters: optimiser steps instead of epochs (ACS code: 1000); 0 = use ``n_epochs``.
        batch_size, lr: Adam mini-batch and learning rate (DLP: 100, 1e-3).
        seed: seed of the training generator of :meth:`train` (part of the cache key).
        init_visible_bias: b = logit(clamp(data mean, .01, .99)) at ``setup``.
    """

    needs_sampler = False

    def __init__(
        self,
        k: int,
        n_epochs: int,
        n_iters: int,
        batch_size: int,
        lr: float,
        seed: int,
        init_visible_bias: bool,
    ):
        check(k >= 1, "k", f"must be >= 1 (got {k})")
        check(n_epochs >= 1, "n_epochs", f"must be >= 1 (got {n_epochs})")
        check(n_iters >= 0, "n_iters", f"must be >= 0 (0 = use n_epochs) (got {n_iters})")
        check(batch_size >= 1, "batch_size", f"must be >= 1 (got {batch_size})")
        check(lr > 0, "lr", f"must be > 0 (got {lr})")
        check(seed >= 0, "seed", f"must be >= 0 (got {seed})")
        self.k, self.n_epochs, self.n_iters = k, n_epochs, n_iters
        self.batch_size, self.lr, self.seed = batch_size, float(lr), seed
        self.init_visible_bias = init_visible_bias
        self.optimizer: torch.optim.Optimizer | None = None
        self.iteration = 0
        self.gibbs = BlockGibbs(n_sweeps=1)  # one v -> h -> v sweep per runner step
        self.chains = PersistentChains()

    def key(self) -> dict:
        """The settings that determine the trained weights (a cache key: see
        :func:`ebmlab.learning.rbm_target.cached_rbm`)."""
        return {
            "k": self.k,
            "n_epochs": self.n_epochs if self.n_iters == 0 else None,
            "n_iters": self.n_iters or None,
            "batch_size": self.batch_size,
            "lr": self.lr,
            "seed": self.seed,
            "init_visible_bias": self.init_visible_bias,
        }

    def setup(
        self,
        model: BernoulliRBM,
        data: Tensor,
        generator: torch.Generator,
        sampler=None,
        transform: Transform | None = None,
    ) -> None:
        """``data``: [n, V] training images; sets ``n_steps`` (n_iters, or n_epochs passes)."""
        dev = model.W.device
        data = data.reshape(data.shape[0], -1).to(dev, torch.float32)
        if data.shape[1] != model.n_visible:
            raise ConfigError(
                "model.n_visible",
                f"model has {model.n_visible} visible units, data has {data.shape[1]}",
            )
        self.data, self.transform = data, transform
        self.batches = EpochBatches(data.shape[0], min(self.batch_size, data.shape[0]), dev)
        self.n_steps = self.n_iters or self.n_epochs * self.batches.per_epoch
        if self.init_visible_bias:
            model.init_visible_bias_from_data(data.mean(0))
        self.optimizer = torch.optim.Adam(model.parameters(), lr=self.lr)
        self.iteration = 0

    def step(self, model: BernoulliRBM, generator: torch.Generator) -> dict:
        batch = self.data[self.batches.next(generator)]
        if self.transform is not None:
            batch = self.transform(batch, generator)
        return self.update(model, batch, generator)

    def update(self, model: BernoulliRBM, batch: Tensor, generator: torch.Generator) -> dict:
        """One CD-k update from ``batch``; returns the CD objective (before the update)."""
        x_neg, _ = self.chains.advance(model, self.gibbs, batch, generator, self.k)
        obj = model.log_prob(batch).mean() - model.log_prob(x_neg).mean()
        loss = -obj
        self.iteration += 1
        if not torch.isfinite(loss):
            raise DivergenceError(self.iteration, "the CD loss")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return {"cd_objective": obj.detach()}

    def state_dict(self) -> dict:
        return {
            "optimizer": self.optimizer.state_dict(),
            "iteration": self.iteration,
            "batches": self.batches.state_dict(),
        }

    def load_state_dict(self, d: dict) -> None:
        self.optimizer.load_state_dict(d["optimizer"])
        self.iteration = int(d["iteration"])
        self.batches.load_state_dict(d["batches"])

    def train(self, model: BernoulliRBM, x: Tensor, binarize: str, progress: bool) -> list[float]:
        """The whole training with the learner's own generator (seeded by ``seed``); each
        batch binarised per ``binarize``. Returns the CD objective of every step."""
        check(binarize in BINARIZE_MODES, "binarize", f"one of {list(BINARIZE_MODES)}")
        gen = torch.Generator(device=model.W.device).manual_seed(self.seed)
        self.setup(model, x, gen, transform=lambda b, g: binarize_batch(b, binarize, g))
        bar = tqdm(total=self.n_steps, desc=f"CD-{self.k}", leave=False) if progress else None
        objectives = []
        for it in range(1, self.n_steps + 1):
            objectives.append(self.step(model, gen)["cd_objective"])
            if bar is not None:
                bar.update(1)
            if it % _LOG_EVERY == 0:
                log.info(
                    "CD-%d iter %d/%d: log p~(data) - log p~(neg) = %.4f",
                    self.k,
                    it,
                    self.n_steps,
                    objectives[-1],
                )
        if bar is not None:
            bar.close()
        return torch.stack(objectives).tolist()


@torch.no_grad()
def reconstruction_error(model: BernoulliRBM, x: Tensor) -> float:
    """Mean squared error between x and its mean-field reconstruction sigmoid(W^T p(h|x) + b)."""
    p_h = torch.sigmoid(model.hidden_logits(x))
    return float(((torch.sigmoid(model.visible_logits(p_h)) - x) ** 2).mean())
