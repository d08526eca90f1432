"""Ising learning (DLP 7.3.1; RMwGGIS Table 3): recover J of a lattice Ising from samples.

One loop step is one learner iteration (PCD with any sampler, or a ratio-matching
objective). Metric: RMSE over all entries of the learned J against sigma * adjacency,
logged (and plotted as log-RMSE) against iterations and wall-clock seconds, plus the
time per iteration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from hydra.utils import get_object
from omegaconf import OmegaConf
from torch import Tensor

from ebmlab.core.loop import LoopTask, Requirement
from ebmlab.core.protocols import Learner
from ebmlab.data.ising_data import IsingLatticeData
from ebmlab.errors import ConfigError
from ebmlab.models.ising import DenseIsing
from ebmlab.utils.memory import learner_batch_bytes
from ebmlab.utils.plotting import side_by_side


@dataclass
class Parts:
    model: torch.nn.Module
    learner: Learner
    j_true: Tensor


class IsingLearning(LoopTask):
    main_metric = "log_rmse"
    progress_desc = "Ising learning"
    requires = {
        "dataset": Requirement(IsingLatticeData, "an Ising dataset (dataset=ising_lattice)"),
        "model": Requirement(DenseIsing, "a learnable Ising (model=ising)", {"dim": "dataset.dim"}),
        "learner": Requirement(),
    }
    checkpoint_keys = ("model", "learner")
    reports_sampler_cost = True  # with a sampler (PCD): its acceptance and evaluations

    def check_config(self, cfg) -> None:
        sampler = OmegaConf.select(cfg, "sampler._target_")
        if get_object(cfg.learner._target_).needs_sampler and sampler is None:
            raise ConfigError("sampler", "the learner draws negatives with a sampler: choose one")

    def memory_estimate(self, cfg) -> dict[str, int]:
        d = int(cfg.dataset.n_side) ** 2
        return {
            # learned J, its gradient and Adam's two moments; the true J and the lattice's
            # adjacency (also built to generate the data)
            "couplings": 6 * d * d * 4,
            "samples": int(cfg.dataset.n_samples) * d * 4,
            **learner_batch_bytes(cfg.get("learner"), d),
        }

    def build(self, ctx) -> Parts:
        data, model = ctx.build("dataset"), ctx.build("model").to(ctx.device)
        learner = ctx.build("learner")
        sampler = ctx.build("sampler") if learner.needs_sampler else None
        x = data.samples(progress=ctx.cfg.progress).to(ctx.device)
        learner.setup(model, x, ctx.generator, sampler)
        return Parts(model, learner, data.true_coupling().to(ctx.device))

    def step(self, p: Parts, step: int, ctx) -> dict:
        return p.learner.step(p.model, ctx.generator)

    @staticmethod
    def _rmse(p: Parts) -> float:
        return float(torch.sqrt(((p.model.J.detach() - p.j_true) ** 2).mean()))

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        r = self._rmse(p)
        return {"rmse": r, "log_rmse": math.log(r)}

    def finish(self, p: Parts, history, ctx) -> dict:
        seconds, n = ctx.elapsed(), self.cadence.n_steps
        its, secs = history.column("step"), history.column("seconds")
        lr = history.column("log_rmse")
        fig = side_by_side(
            [
                ("vs iterations", {"log RMSE": (its, lr)}, "iteration", "log RMSE(J)"),
                ("vs wall time", {"log RMSE": (secs, lr)}, "seconds", "log RMSE(J)"),
            ],
            title=f"Ising learning ({ctx.choices.get('sampler', '')}, {ctx.scale})",
        )
        ctx.save_figure(fig, "log_rmse", step=n)
        r = self._rmse(p)
        return {
            "rmse": r,
            "log_rmse": math.log(r),
            "seconds": seconds,
            "time_per_iter": seconds / n,
            "n_iters": n,
        }
