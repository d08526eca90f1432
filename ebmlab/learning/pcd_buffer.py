"""PCD with a replay buffer, warm-up and EMA weights (GWG / DLP / ACS deep-EBM training).

Each iteration (PROTOCOLS.md "Deep EBMs"): draw ``batch_size`` data rows with replacement
(then the ``transform`` given to ``setup``, e.g. dynamic binarisation), and

1. draw ``batch_size`` distinct chains from the replay buffer (``buffer_size`` states,
   initialised from the model's Bernoulli base); each is re-initialised from the base with
   probability ``reinit_freq``;
2. run ``sampler_steps`` steps of the sampler on them under the current model and write them
   back. With ``sampler=acs`` the steps follow ACS's PCD schedule (ACS Algorithm 6, App. B):
   one exploration iteration per cycle at (alpha_max, beta_max) without MH
   (``acs.explore_steps``), the others at (alpha_min, 0.5) with MH, and the periodic re-tuning
   of alpha_max / alpha_min replacing the sampling of an iteration;
3. one Adam step on ``loss = mean f(samples) - mean f(data)`` (+ ``energy_l2`` times the mean
   squared network output of both), learning rate ramped linearly over ``warmup_iters``;
4. EMA of the weights: ``theta_ema <- ema theta_ema + (1 - ema) theta``.

A non-finite loss or parameter, or ``|loss| > max_abs_loss``, is recorded on the device (an
iteration reads nothing back) and raised as :class:`~ebmlab.errors.DivergenceError`, with the
iteration it happened at, by :meth:`PCDBuffer.check_divergence`, which the run loop calls at
every evaluation and checkpoint (checkpoints written before stay as they are).
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor

from ebmlab.errors import ConfigError, check
from ebmlab.learning.acs_schedule import ACSPCDSchedule
from ebmlab.learning.batches import Transform, draw_rows
from ebmlab.learning.divergence import DivergenceWatch, all_finite
from ebmlab.learning.pcd import PersistentChains


class PCDBuffer:
    """Replay-buffer PCD learner. Models need ``sample_base(n, generator)`` (a base draw).

    Args:
        buffer_size: replay buffer states (papers: 10,000; 1,000 for Caltech).
        batch_size: data and sampled chains per iteration (100).
        sampler_steps: sampler steps per iteration (DLP 40; ACS 10, Caltech 30).
        lr: Adam learning rate after warm-up (1e-4).
        warmup_iters: iterations of the linear learning-rate warm-up (10,000; 0 = none).
        ema: EMA decay of the weights (0.999; 0 = EMA equals the current weights).
        reinit_freq: probability that a drawn chain restarts from the base (0 = never).
        acs: ACS's PCD schedule (Algorithm 6), used when the sampler is ACS.
        energy_l2: weight of mean(net(data)^2 + net(samples)^2) (0 = off; ours, optional).
        max_abs_loss: |loss| above this counts as divergence.
    """

    needs_sampler = True

    def __init__(
        self,
        buffer_size: int,
        batch_size: int,
        sampler_steps: int,
        lr: float,
        warmup_iters: int,
        ema: float,
        reinit_freq: float,
        acs: ACSPCDSchedule,
        energy_l2: float,
        max_abs_loss: float,
    ):
        check(buffer_size >= 1, "buffer_size", f"must be >= 1 (got {buffer_size})")
        check(batch_size >= 1, "batch_size", f"must be >= 1 (got {batch_size})")
        check(
            batch_size <= buffer_size,
            "batch_size",
            f"must be <= buffer_size={buffer_size} (got {batch_size})",
        )
        check(sampler_steps >= 1, "sampler_steps", f"must be >= 1 (got {sampler_steps})")
        check(lr > 0, "lr", f"must be > 0 (got {lr})")
        check(warmup_iters >= 0, "warmup_iters", f"must be >= 0 (got {warmup_iters})")
        check(0 <= ema < 1, "ema", f"must be in [0, 1) (got {ema})")
        check(0 <= reinit_freq <= 1, "reinit_freq", f"must be in [0, 1] (got {reinit_freq})")
        check(energy_l2 >= 0, "energy_l2", f"must be >= 0 (got {energy_l2})")
        check(max_abs_loss > 0, "max_abs_loss", f"must be > 0 (got {max_abs_loss})")
        self.buffer_size, self.batch_size = int(buffer_size), int(batch_size)
        self.sampler_steps, self.lr, self.warmup_iters = int(sampler_steps), float(lr), warmup_iters
        self.ema, self.reinit_freq, self.energy_l2 = float(ema), float(reinit_freq), energy_l2
        self.acs = acs
        self.max_abs_loss = float(max_abs_loss)
        self.buffer: Tensor | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.ema_model = None
        self.sampler = None
        self.iteration = 0

    # -- setup ----------------------------------------------------------------------------
    def setup(
        self,
        model,
        data: Tensor,
        generator: torch.Generator,
        sampler=None,
        transform: Transform | None = None,
    ) -> None:
        """Adam on the model's parameters, EMA copy, buffer drawn from the model's base.
        ``data``: training rows the batches are drawn from; ``transform``: e.g. dynamic
        binarisation of each drawn batch."""
        if sampler is None:
            raise ConfigError("sampler", "PCD with a replay buffer needs a sampler")
        self.sampler, self.data, self.transform = sampler, data, transform
        self.chains = PersistentChains()
        bound = ("the PCD loss", "({loss:.3g}) exceeds max_abs_loss in magnitude")
        self.watch = DivergenceWatch(("the PCD loss", bound, "a model parameter"))
        self.acs_schedule = getattr(sampler, "pcd_schedule", None) == "acs"
        if self.acs_schedule:
            self.acs.bind(sampler)
        self.optimizer = torch.optim.Adam(
            [p for p in model.parameters() if p.requires_grad], lr=self.lr
        )
        self.ema_model = copy.deepcopy(model)
        for p in self.ema_model.parameters():
            p.requires_grad_(False)
        self.buffer = model.sample_base(self.buffer_size, generator).detach()
        self.iteration = 0

    def current_lr(self) -> float:
        if self.warmup_iters == 0:
            return self.lr
        return self.lr * min(1.0, (self.iteration + 1) / self.warmup_iters)

    # -- sampling -------------------------------------------------------------------------
    def _sample(self, model, x0: Tensor, generator: torch.Generator) -> tuple[Tensor, dict]:
        """``sampler_steps`` steps from ``x0`` (or ACS's schedule for this iteration); the
        scalars stay on the device."""
        if self.acs_schedule:
            xs, out = self.acs.advance(model, x0, generator, self.iteration, self.sampler_steps)
            del out["phase"]
        else:
            xs, out = self.chains.advance(model, self.sampler, x0, generator, self.sampler_steps)
        out["n_log_prob"], out["n_grad"] = float(out["n_log_prob"]), float(out["n_grad"])
        return xs, out

    # -- one iteration --------------------------------------------------------------------
    def step(self, model, generator: torch.Generator) -> dict:
        """One iteration: draw ``batch_size`` data rows (with replacement), then :meth:`update`."""
        batch = draw_rows(self.data, self.batch_size, generator, self.transform)
        return self.update(model, batch, generator)

    def update(self, model, batch: Tensor, generator: torch.Generator) -> dict:
        """One PCD iteration on a binarised data batch; returns scalars for logging."""
        n, dev = self.buffer.shape[0], self.buffer.device
        idx = torch.randperm(n, generator=generator, device=dev)[: self.batch_size]
        x0 = self.buffer[idx]
        if self.reinit_freq > 0:
            fresh = model.sample_base(self.batch_size, generator)
            u = torch.rand(self.batch_size, generator=generator, device=dev)
            x0 = torch.where((u < self.reinit_freq)[:, None], fresh.reshape(x0.shape), x0)
        xs, info = self._sample(model, x0, generator)
        self.buffer[idx] = xs
        lr = self.current_lr()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        f_pos, f_neg = model.log_prob(batch), model.log_prob(xs)
        loss = f_neg.mean() - f_pos.mean()
        total = loss
        if self.energy_l2 > 0:
            base_pos, base_neg = model.base_log_prob(batch), model.base_log_prob(xs)
            reg = ((f_pos - base_pos) ** 2).mean() + ((f_neg - base_neg) ** 2).mean()
            total = loss + self.energy_l2 * reg
        self.iteration += 1
        value = loss.detach()
        finite_loss = torch.isfinite(value)
        bounded = ~(value.abs() > self.max_abs_loss)  # NaN: the loss check names it
        self.optimizer.zero_grad(set_to_none=True)
        total.backward()
        self.optimizer.step()
        finite_params = all_finite(model.parameters(), value.device)
        self.watch.observe(self.iteration, [finite_loss, bounded, finite_params], value)
        self._update_ema(model)
        return {"loss": value, "lr": lr, **info}

    def check_divergence(self) -> None:
        """DivergenceError if an iteration so far had a non-finite loss or parameter or a loss
        out of bounds (one host read; the run loop calls it at evaluations and checkpoints)."""
        self.watch.check()

    @torch.no_grad()
    def _update_ema(self, model) -> None:
        for pe, p in zip(self.ema_model.parameters(), model.parameters()):
            pe.mul_(self.ema).add_(p.detach(), alpha=1.0 - self.ema)
        for be, b in zip(self.ema_model.buffers(), model.buffers()):
            be.copy_(b)

    # -- checkpoints ----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "buffer": self.buffer,
            "optimizer": self.optimizer.state_dict(),
            "ema": self.ema_model.state_dict(),
            "iteration": self.iteration,
            "sampler": self.sampler.state_dict(),
            "acs": self.acs.state_dict(),
        }

    def load_state_dict(self, d: dict) -> None:
        self.buffer = d["buffer"].to(self.buffer.device).clone()
        self.optimizer.load_state_dict(copy.deepcopy(d["optimizer"]))
        self.ema_model.load_state_dict(d["ema"])
        self.iteration = int(d["iteration"])
        self.sampler.load_state_dict(d["sampler"])
        self.acs.load_state_dict(d["acs"], d["sampler"])
