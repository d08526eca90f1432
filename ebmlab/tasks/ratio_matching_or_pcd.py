"""What the tasks that learn a binary energy by ratio matching or by PCD share (RMwGGIS Sec. 5:
density_modeling, graph_generation): the learner they require, its sampler, and the results
of the last update."""

from __future__ import annotations

from hydra.utils import get_object
from omegaconf import OmegaConf

from ebmlab.core.loop import Requirement
from ebmlab.errors import check
from ebmlab.learning.pcd import PCD
from ebmlab.learning.ratio_matching_learner import RatioMatchingLearner

LEARNER = Requirement(
    (RatioMatchingLearner, PCD), "a ratio matching learner (rm, rmwggis, rmwrand) or pcd"
)


def check_learner_sampler(cfg) -> bool:
    """ConfigError unless a learner that needs a sampler (PCD) has one; whether it needs one."""
    needs_sampler = get_object(cfg.learner._target_).needs_sampler
    msg = "a PCD learner needs a sampler (e.g. sampler=gwg)"
    check(not needs_sampler or OmegaConf.select(cfg, "sampler._target_"), "sampler", msg)
    return needs_sampler


def build_learner(ctx):
    """The learner and, when it needs one (PCD), the sampler."""
    learner = ctx.build("learner")
    return learner, (ctx.build("sampler") if learner.needs_sampler else None)


def learner_results(learner, last: dict, seconds: float, n_iters: int) -> dict:
    """The last update's loss (and acceptance, for PCD) and the run's time per iteration."""
    out = {"final_loss": float(last["loss"])}
    if learner.needs_sampler:
        out["accept_rate"] = float(last["accept_rate"])
    return {**out, "time_per_iter": seconds / n_iters, "seconds": seconds, "n_iters": n_iters}
