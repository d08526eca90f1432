"""Ising learning (DLP 7.3.1; RMwGGIS Table 3): recover J of a lattice Ising from samples.

Metric: RMSE over all entries of the learned J against sigma * adjacency,
logged (and plotted as log-RMSE) against iterations and wall-clock seconds,
plus the time per iteration.
"""

from __future__ import annotations

import math

import torch

from ebmlab.errors import ConfigError, check
from ebmlab.learning.ratio_matching_learner import RatioMatchingTrainer
from ebmlab.utils.plotting import side_by_side


class IsingLearning:
    main_metric = "log_rmse"

    def __init__(
        self,
        n_iters: int = 10000,
        eval_every: int = 100,
        checkpoint_every: int = 500,
        rm_batch_size: int = 100,
        rm_l1: float = 0.01,
    ):
        """rm_batch_size / rm_l1: mini-batch and L1 on J used when ``learner`` names a bare
        ratio-matching objective (learner=rm|rmwggis|rmwrand; RMwGGIS App. J: 100, 0.01)."""
        check(n_iters >= 1, "n_iters", f"must be >= 1 (got {n_iters})")
        check(rm_batch_size >= 1, "rm_batch_size", f"must be >= 1 (got {rm_batch_size})")
        check(rm_l1 >= 0, "rm_l1", f"must be >= 0 (got {rm_l1})")
        self.rm_batch_size, self.rm_l1 = rm_batch_size, rm_l1
        check(eval_every >= 1, "eval_every", f"must be >= 1 (got {eval_every})")
        check(checkpoint_every >= 1, "checkpoint_every", f"must be >= 1 (got {checkpoint_every})")
        self.n_iters, self.eval_every, self.checkpoint_every = n_iters, eval_every, checkpoint_every

    def setup(self, ctx) -> None:
        for group in ("model", "dataset", "learner"):
            if not ctx.has(group):
                raise ConfigError(group, "task ising_learning needs a " + group)
        self.data = ctx.build("dataset")
        if not hasattr(self.data, "true_coupling"):
            raise ConfigError("dataset", "ising_learning needs an Ising dataset (ising_lattice)")
        self.model = ctx.build("model").to(ctx.device)
        if not hasattr(self.model, "J"):
            raise ConfigError("model", "ising_learning needs a learnable Ising model (model=ising)")
        if self.model.dim != self.data.dim:
            raise ConfigError(
                "model.dim",
                f"model dimension {self.model.dim} does not match the dataset's "
                f"{self.data.dim} (dataset.n_side={self.data.n_side}); model.dim defaults to "
                "${dataset.dim}",
            )
        self.learner = ctx.build("learner")
        if not hasattr(self.learner, "setup") and hasattr(self.learner, "make_optimizer"):
            # learner=rm|rmwggis|rmwrand names the objective only: train it on mini-batches
            # with the L1 penalty on J and project_() (RMwGGIS App. J; experiment=
            # ising_learning_rm also sets App. J's lr 1e-4).
            obj = self.learner
            self.learner = RatioMatchingTrainer(
                objective=obj.objective,
                variant=obj.variant,
                s=obj.s,
                replacement=obj.replacement,
                lr=obj.lr,
                weight_decay=obj.weight_decay,
                grad_clip=obj.grad_clip,
                batch_size=self.rm_batch_size,
                l1=self.rm_l1,
            )
        self.sampler = ctx.build("sampler") if ctx.has("sampler") else None
        if getattr(self.learner, "needs_sampler", True) and self.sampler is None:
            raise ConfigError("sampler", "this learner needs a sampler")

    def run(self, ctx) -> dict:
        x = self.data.samples(progress=ctx.cfg.progress).to(ctx.device)
        j_true = self.data.true_coupling().to(ctx.device)
        model, learner = self.model, self.learner
        learner.setup(model, self.sampler, x, ctx.generator)
        ctx.start_clock()
        start = 0
        state = ctx.resume(model=model, learner=learner)
        if state is not None:
            start = state["_run"]["step"]
        history = {"step": [], "seconds": [], "log_rmse": []}
        for row in (state or {}).get("history", []):
            for k in history:
                history[k].append(row[k])

        def rmse() -> float:
            return float(torch.sqrt(((model.J.detach() - j_true) ** 2).mean()))

        bar = ctx.progress(self.n_iters, initial=start, desc="Ising learning")
        info = {}
        for it in range(start, self.n_iters):
            batch = learner.sample_batch(x, ctx.generator)
            info = learner.step(model, batch, ctx.generator)
            step = it + 1
            if step % self.eval_every == 0 or step == self.n_iters:
                r = rmse()
                row = {"step": step, "seconds": ctx.elapsed(), "log_rmse": math.log(r)}
                for k in history:
                    history[k].append(row[k])
                ctx.log(
                    {"rmse": r, "log_rmse": row["log_rmse"], "seconds": row["seconds"], **info},
                    step=step,
                )
                bar.set_postfix(log_rmse=f"{row['log_rmse']:.3f}")
            if step % self.checkpoint_every == 0 or step == self.n_iters:
                rows = [dict(zip(history, vals)) for vals in zip(*history.values())]
                ctx.save_checkpoint(
                    {"model": model.state_dict(), "learner": learner.state_dict(), "history": rows},
                    step=step,
                )
            bar.update(1)
            ctx.maybe_fault(step)
        bar.close()
        seconds = ctx.elapsed()
        fig = side_by_side(
            [
                (
                    "vs iterations",
                    {"log RMSE": (history["step"], history["log_rmse"])},
                    "iteration",
                    "log RMSE(J)",
                ),
                (
                    "vs wall time",
                    {"log RMSE": (history["seconds"], history["log_rmse"])},
                    "seconds",
                    "log RMSE(J)",
                ),
            ],
            title=f"Ising learning ({ctx.choices.get('sampler', '')}, {ctx.scale})",
        )
        ctx.save_figure(fig, "log_rmse", step=self.n_iters)
        r = rmse()
        return {
            "rmse": r,
            "log_rmse": math.log(r),
            "seconds": seconds,
            "time_per_iter": seconds / self.n_iters,
            "n_iters": self.n_iters,
            "accept_rate": info.get("accept_rate", float("nan")),
            "evals_per_iter": info.get("n_log_prob", float("nan")),
        }
