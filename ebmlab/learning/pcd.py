"""Persistent contrastive divergence with any sampler (DLP 7.3; Tieleman 2008).

Each iteration runs ``sampler_steps`` steps of the sampler from the
persistent buffer under the current model, then takes one optimiser step on

    loss = -(mean f(data) - mean f(buffer)) + l1 * sum |theta|_1

where ``f = log_prob`` and theta are the model's ``l1_parameters()`` (if any).
Models with a ``project_()`` method (e.g. symmetrise J, zero its diagonal) get
it called after every step.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ebmlab.errors import DivergenceError, check


class PCD:
    def __init__(
        self,
        buffer_size: int = 256,
        batch_size: int = 256,
        sampler_steps: int = 10,
        lr: float = 1e-3,
        l1: float = 0.0,
        buffer_init: str = "uniform",
    ):
        check(buffer_size >= 1, "buffer_size", f"must be >= 1 (got {buffer_size})")
        check(batch_size >= 1, "batch_size", f"must be >= 1 (got {batch_size})")
        check(sampler_steps >= 1, "sampler_steps", f"must be >= 1 (got {sampler_steps})")
        check(lr > 0, "lr", f"must be > 0 (got {lr})")
        check(l1 >= 0, "l1", f"must be >= 0 (got {l1})")
        check(
            buffer_init in ("uniform", "data_mean"),
            "buffer_init",
            f"must be uniform or data_mean (got {buffer_init!r})",
        )
        self.buffer_size, self.batch_size, self.sampler_steps = (
            buffer_size,
            batch_size,
            sampler_steps,
        )
        self.lr, self.l1, self.buffer_init = lr, l1, buffer_init
        self.buffer: Tensor | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.iteration = 0

    def setup(self, model, sampler, data: Tensor, generator: torch.Generator) -> None:
        self.sampler = sampler
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.Adam(params, lr=self.lr)
        d = data.shape[1]
        if self.buffer_init == "uniform":
            p = torch.full((self.buffer_size, d), 0.5, device=data.device)
        else:
            p = data.float().mean(0).clamp(0.01, 0.99).expand(self.buffer_size, d)
        u = torch.rand(p.shape, generator=generator, device=data.device)
        self.buffer = (u < p).float()

    def sample_batch(self, data: Tensor, generator: torch.Generator) -> Tensor:
        idx = torch.randint(
            0, data.shape[0], (self.batch_size,), generator=generator, device=data.device
        )
        return data[idx]

    def sample(self, model, generator: torch.Generator) -> dict:
        """Advance the persistent buffer by ``sampler_steps`` steps; returns sampling scalars."""
        state = self.sampler.init(model, self.buffer)
        n_lp, n_grad = self.sampler.init_cost()
        acc = jump = torch.zeros((), device=self.buffer.device)  # summed on device: no sync
        for _ in range(self.sampler_steps):
            state, info = self.sampler.step(model, state, generator)
            acc = acc + info.accept_prob.float().mean()
            jump = jump + info.jump.float().mean()
            n_lp += info.n_log_prob
            n_grad += info.n_grad
        self.buffer = state.x.detach()
        k = self.sampler_steps
        return {
            "accept_rate": acc.item() / k,
            "jump": jump.item() / k,
            "n_log_prob": n_lp,
            "n_grad": n_grad,
        }

    def update(self, model, batch: Tensor) -> float:
        """One optimiser step on the PCD loss with the current buffer as negatives."""
        pos = model.log_prob(batch).mean()
        neg = model.log_prob(self.buffer).mean()
        loss = neg - pos
        if self.l1 > 0 and hasattr(model, "l1_parameters"):
            loss = loss + self.l1 * sum(p.abs().sum() for p in model.l1_parameters())
        self.iteration += 1
        if not math.isfinite(loss.item()):
            raise DivergenceError(self.iteration, "the PCD loss")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        if hasattr(model, "project_"):
            model.project_()
        for p in model.parameters():
            if not torch.isfinite(p).all():
                raise DivergenceError(self.iteration, "a model parameter")
        return loss.item()

    def step(self, model, batch: Tensor, generator: torch.Generator) -> dict:
        """One PCD iteration: sample the buffer, then update; returns scalars."""
        info = self.sample(model, generator)
        return {"loss": self.update(model, batch), **info}

    def state_dict(self) -> dict:
        return {
            "buffer": self.buffer,
            "optimizer": self.optimizer.state_dict(),
            "iteration": self.iteration,
            "sampler": self.sampler.state_dict(),
        }

    def load_state_dict(self, d: dict) -> None:
        self.buffer = d["buffer"]
        self.optimizer.load_state_dict(d["optimizer"])
        self.iteration = int(d["iteration"])
        self.sampler.load_state_dict(d["sampler"])
