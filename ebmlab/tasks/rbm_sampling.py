"""RBM sampling (DLP Fig. 4; ACS Fig. 4, 6 and 9): log-MMD to block-Gibbs ground truth.

Protocol (PROTOCOLS.md "RBM sampling"): the CD-trained target RBM, its block-Gibbs ground
truth and the chains' shared initial state (``init``: random or mode, ACS Fig. 6) come from
:mod:`ebmlab.learning.rbm_target`; a warm-up planned for the run (ACS's tuning, Alg. 2) runs
from there first (:mod:`ebmlab.tasks.chains`). One loop step is one sampler step. Every
``run.eval_every`` steps (and at step 0): log MMD^2 (kernel exp(-Hamming/d), V-statistic) of
the chains against the references, vs steps and vs seconds of sampling (ACS's tuning
included). At the end: ESS (per dimension after
``burn_in``, over the first ``ess_chains`` chains) and image grids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ebmlab.core.loop import Requirement
from ebmlab.data.binary_images import BinaryImages
from ebmlab.errors import check
from ebmlab.learning.cd import CD
from ebmlab.learning.rbm_target import (
    TRAIN_SPLITS,
    GroundTruth,
    initial_states,
    rbm_cache_key,
    target_and_ground_truth,
    training_split,
)
from ebmlab.metrics.ess import ess_per_dim
from ebmlab.metrics.mmd import mmd2_exp_hamming
from ebmlab.models.rbm import BernoulliRBM
from ebmlab.plotting.rbm_sampling import comparison_figure
from ebmlab.tasks.chains import Chains, ChainTask
from ebmlab.utils.plotting import image_grid


def log_mmd(x: Tensor, ref: Tensor) -> float:
    return math.log(max(float(mmd2_exp_hamming(x, ref)), 1e-300))


@dataclass
class Parts:
    model: BernoulliRBM
    chains: Chains
    ref: Tensor  # ground-truth references [gt_n_ref, V]
    x0: Tensor
    trace: Tensor  # uint8 [n_steps, ess_chains, V]
    info: dict  # known before sampling: split, floor, step-0 log MMD, tuning, mode class


class RBMSampling(ChainTask):
    main_metric = "log_mmd"
    progress_desc = "RBM sampling"
    requires = {
        "dataset": Requirement(BinaryImages, "a binary image dataset"),
        "model": Requirement(BernoulliRBM, "model=rbm", {"n_visible": "dataset.dim"}),
        "sampler": Requirement(),
        "learner": Requirement(CD, "learner=cd: it trains the target RBM"),
    }
    checkpoint_keys = ("chains", "trace", "info")

    def __init__(
        self,
        n_chains: int,
        init: str,
        train_split: str,
        gt_steps: int,
        gt_n_ref: int,
        gt_n_floor: int,
        gt_seed: int,
        burn_in: float,
        ess_chains: int,
        n_show: int,
        cache_dir: str,
    ):
        check(n_chains >= 1, "n_chains", f"must be >= 1 (got {n_chains})")
        check(init in ("random", "mode"), "init", f"must be random or mode (got {init!r})")
        check(train_split in TRAIN_SPLITS, "train_split", f"one of {list(TRAIN_SPLITS)}")
        check(0 <= burn_in < 1, "burn_in", f"must be a fraction in [0, 1) (got {burn_in})")
        check(1 <= ess_chains <= n_chains, "ess_chains", f"in [1, n_chains={n_chains}]")
        check(n_show >= 0, "n_show", f"must be >= 0 (got {n_show})")
        self.gt = GroundTruth(gt_n_ref, gt_n_floor, gt_steps, gt_seed)
        self.n_chains, self.init, self.train_split = n_chains, init, train_split
        self.burn_in, self.ess_chains = burn_in, ess_chains
        self.n_show, self.cache_dir = n_show, Path(cache_dir)

    def check_config(self, cfg) -> None:
        n = cfg.run.n_steps
        msg = f"leaves < 4 of run.n_steps={n} steps for ESS"
        check(n - int(self.burn_in * n) >= 4, "task.burn_in", msg)

    def memory_estimate(self, cfg) -> dict[str, int]:
        v, n = int(cfg.model.n_visible), self.n_chains
        return {
            "trace": int(cfg.run.n_steps) * self.ess_chains * v,
            "ground_truth": (self.gt.n_ref + self.gt.n_floor) * v * 4,
            "chains": 4 * n * v * 4,  # x, grad, proposal, flip probabilities
            "mmd_kernel": (n + self.gt.n_ref) ** 2 * 8,
        }

    def build(self, ctx) -> Parts:
        data, m, cd = ctx.build("dataset"), ctx.cfg.model, ctx.build("learner")
        sampler, n = self.build_sampler(ctx), self.cadence.n_steps
        split, train = training_split(data, self.train_split, need_labels=self.init == "mode")
        key, verbose = rbm_cache_key(m, data, split, cd), bool(ctx.cfg.progress)
        model, ref, floor_set, cached = target_and_ground_truth(
            key, lambda: ctx.build("model"), cd, train, self.gt, self.cache_dir, ctx.device, verbose
        )
        # the shared initial state: drawn from the run's generator before any sampler draw
        x0, info = initial_states(model, train, self.init, self.n_chains, ctx.generator)
        info.update(train_split=split, rbm_cached=cached, log_mmd_floor=log_mmd(floor_set, ref))
        trace = torch.zeros(n, self.ess_chains, x0.shape[1], dtype=torch.uint8, device=ctx.device)
        chains = self.start_chains(ctx, model, sampler, x0)
        return Parts(model, chains, ref, x0, trace, info)

    def warm_up(self, p: Parts, ctx) -> None:
        super().warm_up(p, ctx)  # step 0 of the curves is after the warm-up
        runner, c = p.chains.runner, p.chains
        p.info.update(tune_steps=c.tune_steps, tune_seconds=c.tune_seconds)
        if c.tune_steps:  # the tuned kernel's scalar parameters (ACS: alpha_max, alpha_min)
            params = runner.kernel.state_dict().items()
            p.info.update({k: v for k, v in params if isinstance(v, float)})
        p.info["log_mmd_0"] = log_mmd(c.x, p.ref)
        row0 = {"log_mmd": p.info["log_mmd_0"], "log_mmd_floor": p.info["log_mmd_floor"]}
        ctx.log({**row0, "seconds": c.tune_seconds}, step=0)

    def legacy(self, p: Parts, d: dict) -> dict:
        tune = (d["info"]["tune_steps"], d["info"]["tune_seconds"])
        return {"chains": p.chains.legacy_state(d["chain"], d["sampler"], tune), **d}

    def step(self, p: Parts, step: int, ctx) -> dict:
        info = self.advance(p, step, ctx)
        p.trace[step - 1] = self.trace_row(p.chains.state)
        return info.totals()

    def trace_row(self, state) -> Tensor:
        """What the trace keeps of one step: the first ``ess_chains`` chains, uint8."""
        return state.x[: self.ess_chains].to(torch.uint8)

    def steps(self, p: Parts, first: int, n: int, ctx) -> dict:
        """Loop steps ``first`` .. ``first + n - 1`` as one block (on CUDA, captured as a
        graph): the block's trace rows come back stacked and are written once, on the device
        (the same numbers as :meth:`step`)."""
        sums = self.advance_block(p, first, n, ctx, record=self.trace_row)
        p.trace[first - 1 : first - 1 + n] = sums.pop("record")
        return sums

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        return {
            "log_mmd": log_mmd(p.chains.x, p.ref),
            "log_mmd_floor": p.info["log_mmd_floor"],
            "seconds": ctx.elapsed() + p.info["tune_seconds"],  # replaces the loop's seconds
        }

    def finish(self, p: Parts, history, ctx) -> dict:
        n, info = self.cadence.n_steps, dict(p.info)
        b = int(self.burn_in * n)
        ess = float(ess_per_dim(p.trace[b:].float()).mean())
        samp = max(ctx.elapsed(), 1e-12)  # sampling only, tuning excluded
        steps = [0, *history.column("step")]
        secs = [info["tune_seconds"], *history.column("seconds")]
        lm = [info.pop("log_mmd_0"), *history.column("log_mmd")]
        name = ctx.choices.get("sampler", "")
        ds, split = ctx.cfg.dataset.name, info["train_split"]
        title = f"{ds} ({split} split), init={self.init}, {ctx.scale}"
        fig = comparison_figure({name: (steps, secs, lm)}, info["log_mmd_floor"], title)
        ctx.save_figure(fig, "log_mmd", step=n)
        if self.n_show:
            for x, fig_name, sub in (
                (p.chains.x, "samples", f"{name}: final chains"),
                (p.ref, "ground_truth", "block Gibbs ground truth"),
                (p.x0, "init", f"initial states ({self.init})"),
            ):
                show = x[: self.n_show].reshape(-1, *ctx.cfg.dataset.image_shape).cpu().numpy()
                ctx.save_figure(image_grid(show, title=sub), fig_name, step=n)
        tail = lm[-max(1, len(lm) // 10) :]
        return {
            "log_mmd": lm[-1],
            "log_mmd_tail_mean": sum(tail) / len(tail),  # last 10% of evaluations
            "log_mmd_mean": sum(lm[1:]) / max(1, len(lm) - 1),  # every evaluation after step 0
            "log_mmd_floor": info.pop("log_mmd_floor"),
            "ess": ess,
            "jump": ctx.totals.mean("jump"),  # the sampler-cost block has the rest
            "ess_per_second": ess / (samp * (n - b) / n),  # post-burn-in share of the time
            "seconds": samp + info["tune_seconds"],
            "seconds_per_step": samp / n,
            **info,  # train_split, rbm_cached, tune_steps, tune_seconds, [alpha_*, mode_class*]
        }
