"""RBM sampling (DLP Fig. 4; ACS Fig. 4, 6 and 9): log-MMD to block-Gibbs ground truth.

Protocol (PROTOCOLS.md "RBM sampling"): the CD-trained target RBM, its block-Gibbs ground
truth and the chains' shared initial state (``init``: random or mode, ACS Fig. 6) come from
:mod:`ebmlab.learning.rbm_target`; a warm-up planned for the run (ACS's tuning, Alg. 2) runs
from there first (:mod:`ebmlab.tasks.chains`). One loop step is one sampler step. Every
``run.eval_every`` steps (and at step 0): log MMD^2 (kernel exp(-Hamming/d), V-statistic) of
the chains against the references, vs steps and vs seconds of sampling (ACS's tuning
included). At the end: ESS (per dimension after ``burn_in``, over the first ``ess_chains``
chains) and image grids.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ebmlab.core.loop import Requirement
from ebmlab.data.binary_images import BinaryImages
from ebmlab.errors import check
from ebmlab.learning import rbm_target as target
from ebmlab.learning.cd import CD
from ebmlab.metrics.ess import trace_ess
from ebmlab.metrics.mmd import log_mmd2_exp_hamming as log_mmd
from ebmlab.models.rbm import BernoulliRBM
from ebmlab.plotting.rbm_sampling import run_figures
from ebmlab.tasks.chains import Chains, ChainTask


@dataclass
class Parts:
    model: BernoulliRBM
    chains: Chains
    ref: Tensor  # ground-truth references [gt_n_ref, V]
    x0: Tensor
    trace: Tensor  # uint8 [n_steps, ess_chains, V]
    info: dict  # known before sampling: split, floor, step-0 log MMD, tuning, mode class


@dataclass(eq=False)
class RBMSampling(ChainTask):
    n_chains: int
    init: str
    train_split: str
    gt_steps: int
    gt_n_ref: int
    gt_n_floor: int
    gt_seed: int
    burn_in: float
    ess_chains: int
    n_show: int
    cache_dir: str

    main_metric = "log_mmd"
    progress_desc = "RBM sampling"
    requires = {
        "dataset": Requirement(BinaryImages, "a binary image dataset"),
        "model": Requirement(BernoulliRBM, "model=rbm", {"n_visible": "dataset.dim"}),
        "sampler": Requirement(),
        "learner": Requirement(CD, "learner=cd: it trains the target RBM"),
    }
    checkpoint_keys = ("chains", "trace", "info")

    def __post_init__(self):
        n, init, b, splits = self.n_chains, self.init, self.burn_in, list(target.TRAIN_SPLITS)
        check(n >= 1, "n_chains", f"must be >= 1 (got {n})")
        check(init in ("random", "mode"), "init", f"must be random or mode (got {init!r})")
        check(self.train_split in splits, "train_split", f"one of {splits}")
        check(0 <= b < 1, "burn_in", f"must be a fraction in [0, 1) (got {b})")
        check(1 <= self.ess_chains <= n, "ess_chains", f"in [1, n_chains={n}]")
        check(self.n_show >= 0, "n_show", f"must be >= 0 (got {self.n_show})")
        self.gt = target.GroundTruth(self.gt_n_ref, self.gt_n_floor, self.gt_steps, self.gt_seed)

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
        labels = self.init == "mode"  # the mode init starts from a labelled class
        split, train = target.training_split(data, self.train_split, need_labels=labels)
        key, verbose = target.rbm_cache_key(m, data, split, cd), bool(ctx.cfg.progress)
        build_model, cache = (lambda: ctx.build("model")), Path(self.cache_dir)
        model, ref, floor_set, cached = target.target_and_ground_truth(
            key, build_model, cd, train, self.gt, cache, ctx.device, verbose
        )
        # the shared initial state: drawn from the run's generator before any sampler draw
        x0, info = target.initial_states(model, train, self.init, self.n_chains, ctx.generator)
        info.update(train_split=split, rbm_cached=cached, log_mmd_floor=log_mmd(floor_set, ref))
        trace = torch.zeros(n, self.ess_chains, x0.shape[1], dtype=torch.uint8, device=ctx.device)
        return Parts(model, self.start_chains(ctx, model, sampler, x0), ref, x0, trace, info)

    def warm_up(self, p: Parts, ctx) -> None:
        super().warm_up(p, ctx)  # step 0 of the curves is after the warm-up
        c = p.chains
        p.info.update(c.warm_up_report())
        p.info["log_mmd_0"] = log_mmd(c.x, p.ref)
        row0 = {"log_mmd": p.info["log_mmd_0"], "log_mmd_floor": p.info["log_mmd_floor"]}
        ctx.log({**row0, "seconds": c.tune_seconds}, step=0)

    def record(self, state) -> Tensor:
        """What the trace keeps of one step: the first ``ess_chains`` chains, uint8."""
        return state.x[: self.ess_chains].to(torch.uint8)

    def keep(self, p: Parts, first: int, rows: Tensor) -> None:
        p.trace[first - 1 : first - 1 + rows.shape[0]] = rows

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        return {
            "log_mmd": log_mmd(p.chains.x, p.ref),
            "log_mmd_floor": p.info["log_mmd_floor"],
            "seconds": ctx.elapsed() + p.info["tune_seconds"],  # replaces the loop's seconds
        }

    def finish(self, p: Parts, history, ctx) -> dict:
        n, info, name = self.cadence.n_steps, dict(p.info), ctx.choices.get("sampler", "")
        samp = max(ctx.elapsed(), 1e-12)  # sampling only
        ess = trace_ess(p.trace, self.burn_in, samp)  # post-burn-in share of the time
        steps = [0, *history.column("step")]
        secs = [info["tune_seconds"], *history.column("seconds")]
        lm = [info.pop("log_mmd_0"), *history.column("log_mmd")]
        ds, split = ctx.cfg.dataset, info["train_split"]
        title = f"{ds.name} ({split} split), init={self.init}, {ctx.scale}"
        states = {"samples": p.chains.x, "ground_truth": p.ref, "init": p.x0}
        curve, floor, show = (steps, secs, lm), info["log_mmd_floor"], (self.n_show, ds.image_shape)
        for key, fig in run_figures(name, curve, floor, title, states, self.init, show):
            ctx.save_figure(fig, key, step=n)
        tail = lm[-max(1, len(lm) // 10) :]
        return {
            "log_mmd": lm[-1],
            "log_mmd_tail_mean": sum(tail) / len(tail),  # last 10% of evaluations
            "log_mmd_mean": sum(lm[1:]) / max(1, len(lm) - 1),  # every evaluation after step 0
            "log_mmd_floor": info.pop("log_mmd_floor"),
            "ess": ess["ess"],
            "ess_per_second": ess["ess_per_second"],
            **self.chain_results(p, ctx),  # jump; seconds (tuning included)
            "seconds_per_step": samp / n,
            **info,  # train_split, rbm_cached, tune_steps, tune_seconds, [alpha_*, mode_class*]
        }
