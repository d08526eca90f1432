"""Persistent contrastive divergence with any sampler (DLP 7.3; Tieleman 2008).

One iteration (:meth:`PCD.step`): draw ``batch_size`` data rows with replacement, run
``sampler_steps`` steps of the sampler from the persistent buffer under the current model,
then take one Adam step on

    loss = -(mean f(data) - mean f(buffer)) + l1 * sum |theta|_1

where ``f = log_prob`` and theta are the model's ``l1_parameters()``; the model's
``project_()`` (e.g. symmetrise J, zero its diagonal) runs after every step. An iteration reads
nothing back to the host: the loss stays on the device, and a non-finite loss or parameter is
recorded there (:mod:`ebmlab.learning.divergence`) and raised as DivergenceError, with the
iteration it happened at, by :meth:`PCD.check_divergence` (the run loop calls it at every
evaluation and checkpoint).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ebmlab.core.chain import ChainRunner
from ebmlab.errors import ConfigError, check
from ebmlab.learning.batches import Transform, draw_rows
from ebmlab.learning.divergence import DivergenceWatch, all_finite

BUFFER_INITS = ("uniform", "data_mean")


class PersistentChains:
    """A learner's chains, advanced in blocks by the one chain runner (:mod:`ebmlab.core.chain`).

    A block starts from rows ``x`` under the current model (``kernel.init``: one evaluation,
    counted) and takes ``n_steps`` steps back to back with ``runner.run`` (the unit a CUDA
    graph captures); nothing is read back to the host. One runner per kernel, kept across
    iterations (an adaptive sampler therefore adapts across them, as its own steps would);
    runners of the ``keep`` kernels used last are kept (ACS-PCD alternates two). ``capture``:
    the runners' (``"auto"``: CUDA graphs on CUDA with ``compile: graph``, eager elsewhere).
    """

    keep = 2

    def __init__(self, capture="auto"):
        self.runners: dict[int, tuple[object, ChainRunner]] = {}
        self.capture = capture

    def advance(self, model, kernel, x: Tensor, generator: torch.Generator, n_steps: int):
        """``n_steps`` steps of ``kernel`` from ``x``. Returns (the chains' new x, scalars:
        mean acceptance and jump per step as float64 device tensors, evaluations spent)."""
        state = kernel.init(model, x)
        held = self.runners.pop(id(kernel), None)
        if held is None or held[0] is not kernel or held[1].model is not model:
            held = (kernel, ChainRunner(model, kernel, state, generator, capture=self.capture))
        self.runners[id(kernel)] = held  # the most recently used last
        for key in list(self.runners)[: -self.keep]:
            del self.runners[key]
        runner = held[1]
        runner.state, runner.generator = state, generator
        sums = runner.run(n_steps)
        n_lp, n_grad = kernel.init_cost()
        info = {
            "accept_rate": sums["accept_rate"] / n_steps,
            "jump": sums["jump"] / n_steps,
            "n_log_prob": n_lp + sums["n_log_prob"],
            "n_grad": n_grad + sums["n_grad"],
        }
        return runner.state.x.detach(), info


class PCD:
    """PCD learner (implements :class:`~ebmlab.core.protocols.Learner`).

    Args:
        buffer_size: persistent chains.
        batch_size: data rows per iteration.
        sampler_steps: sampler steps per iteration.
        lr: Adam learning rate.
        l1: weight of the L1 penalty on the model's ``l1_parameters()``.
        buffer_init: ``uniform`` (Bernoulli(1/2)) or ``data_mean`` (Bernoulli of the
            per-dimension data mean, clamped to [0.01, 0.99]).
    """

    needs_sampler = True
    follows_pcd_schedule: str | None = None  # the sampler's pcd_schedule it follows ("acs")

    def __init__(
        self,
        buffer_size: int,
        batch_size: int,
        sampler_steps: int,
        lr: float,
        l1: float,
        buffer_init: str,
    ):
        check(buffer_size >= 1, "buffer_size", f"must be >= 1 (got {buffer_size})")
        check(batch_size >= 1, "batch_size", f"must be >= 1 (got {batch_size})")
        check(sampler_steps >= 1, "sampler_steps", f"must be >= 1 (got {sampler_steps})")
        check(lr > 0, "lr", f"must be > 0 (got {lr})")
        check(l1 >= 0, "l1", f"must be >= 0 (got {l1})")
        check(
            buffer_init in BUFFER_INITS,
            "buffer_init",
            f"must be one of {', '.join(BUFFER_INITS)} (got {buffer_init!r})",
        )
        self.buffer_size, self.batch_size = buffer_size, batch_size
        self.sampler_steps, self.lr, self.l1 = sampler_steps, lr, l1
        self.buffer_init = buffer_init
        self.buffer: Tensor | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.iteration = 0

    def setup(
        self,
        model,
        data: Tensor,
        generator: torch.Generator,
        sampler=None,
        transform: Transform | None = None,
    ) -> None:
        """Adam on the trainable parameters; the buffer drawn per ``buffer_init``."""
        if sampler is None:
            raise ConfigError("sampler", "PCD needs a sampler (e.g. sampler=gwg)")
        self.sampler, self.data, self.transform = sampler, data, transform
        self.chains = PersistentChains()
        self.watch = DivergenceWatch(("the PCD loss", "a model parameter"))
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.Adam(params, lr=self.lr)
        d = data.shape[1]
        if self.buffer_init == "uniform":
            p = torch.full((self.buffer_size, d), 0.5, device=data.device)
        else:
            p = data.float().mean(0).clamp(0.01, 0.99).expand(self.buffer_size, d)
        u = torch.rand(p.shape, generator=generator, device=data.device)
        self.buffer = (u < p).float()

    def step(self, model, generator: torch.Generator) -> dict:
        """One iteration: draw a data batch, then :meth:`update` on it."""
        batch = draw_rows(self.data, self.batch_size, generator, self.transform)
        return self.update(model, batch, generator)

    def update(self, model, batch: Tensor, generator: torch.Generator) -> dict:
        """Advance the buffer, then one optimiser step with ``batch`` as positives."""
        info = self.sample(model, generator)
        return {"loss": self.descend(model, batch), **info}

    def sample(self, model, generator: torch.Generator) -> dict:
        """Advance the persistent buffer by ``sampler_steps`` steps; returns sampling scalars
        (kept on the device)."""
        self.buffer, info = self.chains.advance(
            model, self.sampler, self.buffer, generator, self.sampler_steps
        )
        return info

    def descend(self, model, batch: Tensor) -> Tensor:
        """One optimiser step on the PCD loss with the current buffer as negatives."""
        pos = model.log_prob(batch).mean()
        neg = model.log_prob(self.buffer).mean()
        loss = neg - pos
        l1_params = model.l1_parameters()
        if self.l1 > 0 and l1_params:
            loss = loss + self.l1 * sum(p.abs().sum() for p in l1_params)
        self.iteration += 1
        finite_loss = torch.isfinite(loss.detach())
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        model.project_()
        finite_params = all_finite(model.parameters(), loss.device)
        self.watch.observe(self.iteration, [finite_loss, finite_params], loss)
        return loss.detach()

    def check_divergence(self) -> None:
        """DivergenceError if an iteration so far had a non-finite loss or parameter (one
        host read; the run loop calls it at its evaluation and checkpoint points)."""
        self.watch.check()

    def state_dict(self) -> dict:
        return {
            "buffer": self.buffer,
            "optimizer": self.optimizer.state_dict(),
            "iteration": self.iteration,
            "sampler": self.sampler.state_dict(),
        }

    def load_state_dict(self, d: dict) -> None:
        self.buffer = d["buffer"].to(self.buffer.device)  # where setup put it (the run's device)
        self.optimizer.load_state_dict(d["optimizer"])
        self.iteration = int(d["iteration"])
        self.sampler.load_state_dict(d["sampler"])
