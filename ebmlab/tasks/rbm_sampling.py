"""RBM sampling (DLP Fig. 4; ACS Fig. 4, 6 and 9): log-MMD to block-Gibbs ground truth.

Protocol (PROTOCOLS.md "RBM sampling"): target RBM, ground truth and the chains' shared start
(``init``: random or mode, ACS Fig. 6) from :mod:`ebmlab.learning.rbm_target`; a planned
warm-up (ACS Alg. 2) first (:mod:`ebmlab.tasks.chains`). One loop step is one sampler step;
every ``run.eval_every`` steps and at step 0: log MMD^2 (kernel exp(-Hamming/d)) to the
references, vs steps and seconds (tuning included). At the end: ESS per dimension after
``burn_in`` over the first ``ess_chains`` chains, and image grids.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ebmlab.core.loop import Requirement
from ebmlab.data.binary_images import BinaryImages
from ebmlab.errors import check, check_at_least
from ebmlab.learning.cd import CD
from ebmlab.learning.rbm_target import GroundTruth, SamplingTarget
from ebmlab.metrics.ess import trace_ess
from ebmlab.metrics.mmd import log_mmd2_exp_hamming as log_mmd
from ebmlab.metrics.mmd import log_mmd_curve_summary
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
        n, b = self.n_chains, self.burn_in
        check_at_least(vars(self), (("n_chains", 1), ("n_show", 0)))
        check(0 <= b < 1, "burn_in", f"must be a fraction in [0, 1) (got {b})")
        check(1 <= self.ess_chains <= n, "ess_chains", f"in [1, n_chains={n}]")
        self.gt = GroundTruth(self.gt_n_ref, self.gt_n_floor, self.gt_steps, self.gt_seed)
        self.target = SamplingTarget(self.train_split, self.init, n, self.gt, self.cache_dir)

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
        data, cd, sampler = ctx.build("dataset"), ctx.build("learner"), self.build_sampler(ctx)
        dev, verbose = ctx.device, bool(ctx.cfg.progress)
        model, ref, x0, info = self.target.build(
            data, ctx.cfg.model, lambda: ctx.build("model"), cd, dev, ctx.generator, verbose
        )
        shape = (self.cadence.n_steps, self.ess_chains, x0.shape[1])
        trace = torch.zeros(shape, dtype=torch.uint8, device=dev)
        return Parts(model, self.start_chains(ctx, model, sampler, x0), ref, x0, trace, info)

    def warm_up(self, p: Parts, ctx) -> None:
        super().warm_up(p, ctx)  # step 0 of the curves is after the warm-up
        c, info = p.chains, p.info
        info.update(c.warm_up_report(), log_mmd_0=log_mmd(c.x, p.ref))
        row0 = {"log_mmd": info["log_mmd_0"], "log_mmd_floor": info["log_mmd_floor"]}
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
        col, ds, floor = history.column, ctx.cfg.dataset, info.pop("log_mmd_floor")
        lm = [info.pop("log_mmd_0"), *col("log_mmd")]
        curve = ([0, *col("step")], [info["tune_seconds"], *col("seconds")], lm)
        title = f"{ds.name} ({info['train_split']} split), init={self.init}, {ctx.scale}"
        states = {"samples": p.chains.x, "ground_truth": p.ref, "init": p.x0}
        show = (self.n_show, ds.image_shape)
        figs = run_figures(name, curve, floor, title, states, self.init, show)
        ctx.save_figures(dict(figs), step=n)
        return {
            **log_mmd_curve_summary(lm),  # last value, tail mean, mean after step 0
            "log_mmd_floor": floor,
            "ess": ess["ess"],
            "ess_per_second": ess["ess_per_second"],
            **self.chain_results(p, ctx),  # jump; seconds (tuning included)
            "seconds_per_step": samp / n,
            **info,  # [mode_class*], train_split, rbm_cached, tune_steps, tune_seconds, [alpha_*]
        }
