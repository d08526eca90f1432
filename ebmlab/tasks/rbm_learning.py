"""RBM learning (ACS Table 1): PCD with any sampler, test log-likelihood by RBM AIS.

A Bernoulli RBM (visible bias from the data mean) is trained by PCD (``learner=pcd``: persistent
chains, batch, Adam, ``sampler_steps`` per iteration; ``learner=acs_pcd`` with ``sampler=acs``
for ACS's PCD schedule, Algorithm 6), one loop step per iteration. Every ``run.eval_every``
iterations the iteration's loss is kept (and every ``ais_every`` a cheaper AIS is logged as
``*_running``). At the end log Z is estimated by AIS with intermediate RBMs and block-Gibbs
transitions (Salakhutdinov & Murray 2008; ``ais_temps`` linear temperatures, ``ais_chains``
chains, base = independent Bernoulli of the training mean) and

    test LL = mean_{x in test} log p~(x) - log Z      (train LL: the first ``train_n`` images).

The final AIS is trusted only when ``ais_groups`` groups of its chains agree within
``ais_spread_max`` nats, else repeated with twice the temperatures up to ``ais_temps_max``
(:meth:`~ebmlab.metrics.rbm_likelihood.RBMAIS.trusted`; each attempt logged as
``ais_attempt_*``, the temperatures used reported as ``ais_temps``).

For tiny RBMs (min(V, H) <= 20) the exact log Z is reported beside it (``test_ll_exact``).
"""

from __future__ import annotations

from dataclasses import dataclass

from hydra.utils import get_object
from torch import Tensor

from ebmlab.core.loop import LoopTask, Requirement
from ebmlab.data.binary_images import BinaryImages
from ebmlab.errors import check, check_at_least
from ebmlab.learning.pcd import PCD
from ebmlab.learning.rbm_target import training_split
from ebmlab.metrics.rbm_likelihood import RBMAIS, ais_base_logits
from ebmlab.metrics.tempered_ais import mean_log_prob
from ebmlab.models.rbm import BernoulliRBM
from ebmlab.plotting.pcd_learning import pcd_figures


@dataclass
class Parts:
    model: BernoulliRBM
    learner: PCD
    train_x: Tensor
    test_x: Tensor
    base_b: Tensor  # logits of the AIS base: Bernoulli(clamped training mean)
    loss: Tensor | float = 0.0  # the last iteration's PCD loss


@dataclass
class RBMLearning(LoopTask):
    """``task=rbm_learning`` (conf/task/rbm_learning.yaml documents every key)."""

    main_metric = "test_ll"
    progress_desc = "RBM learning"
    requires = {
        "dataset": Requirement(BinaryImages, "a binary image dataset"),
        "model": Requirement(BernoulliRBM, "model=rbm", {"n_visible": "dataset.dim"}),
        "sampler": Requirement(),
        "learner": Requirement(PCD, "a PCD learner (learner=pcd or learner=acs_pcd)"),
    }
    checkpoint_keys = ("model", "learner")
    reports_sampler_cost = True
    periods = ("ais_every",)
    ais_temps: int
    ais_chains: int
    ais_groups: int
    ais_spread_max: float
    ais_temps_max: int
    ais_every: int
    ais_every_temps: int
    init_visible_bias: bool
    train_n: int
    eval_chunk: int
    n_show: int

    def __post_init__(self):
        ones = "ais_chains train_n eval_chunk"
        bounds = ((ones, 1), ("ais_temps ais_every_temps ais_groups", 2), ("ais_every n_show", 0))
        check_at_least(vars(self), bounds)
        chains, temps, spread = self.ais_chains, self.ais_temps, self.ais_spread_max
        check(self.ais_groups <= chains, "ais_groups", f"must be <= ais_chains {chains}")
        check(spread >= 0, "ais_spread_max", f"must be >= 0 (got {spread})")
        check(self.ais_temps_max >= temps, "ais_temps_max", f"must be >= ais_temps {temps}")
        self.ais = RBMAIS(self.ais_chains, self.ais_groups, self.eval_chunk)

    def memory_estimate(self, cfg) -> dict[str, int]:
        v, h = int(cfg.model.get("n_visible", 0)), int(cfg.model.get("n_hidden", 0))
        chains = int(cfg.learner.get("buffer_size", 0)) + int(cfg.learner.get("batch_size", 0))
        return {"chains": 4 * chains * v * 4, "ais": self.ais_chains * (v + h) * 8 * 3}

    def check_config(self, cfg) -> None:
        """A sampler that declares a PCD schedule (``pcd_schedule``: ACS's Algorithm 6) needs
        the learner that declares it follows that schedule (``follows_pcd_schedule``)."""
        schedule = getattr(get_object(cfg.sampler._target_), "pcd_schedule", None)
        if schedule is not None:
            follows = getattr(get_object(cfg.learner._target_), "follows_pcd_schedule", None)
            msg = "sampler=acs in PCD follows ACS's PCD schedule: use learner=acs_pcd"
            check(follows == schedule, "learner", msg)

    def build(self, ctx) -> Parts:
        data = ctx.build("dataset")
        _, train = training_split(data, "train", need_labels=False)
        _, test = training_split(data, "test", need_labels=False)
        model = ctx.build("model").to(ctx.device)
        sampler, learner = ctx.build("sampler"), ctx.build("learner")
        x, test_x = train.x.to(ctx.device), test.x.to(ctx.device)
        if self.init_visible_bias:
            model.init_visible_bias_from_data(x.mean(0))
        learner.setup(model, x, ctx.generator, sampler)
        return Parts(model, learner, x, test_x, ais_base_logits(x))

    def step(self, p: Parts, step: int, ctx) -> dict:
        info = p.learner.step(p.model, ctx.generator)
        p.loss = info["loss"]  # the loss of the last iteration before an evaluation
        return info

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        out = {"last_loss": float(p.loss)}
        if self.ais_every and step % self.ais_every == 0 and step < self.cadence.n_steps:
            ais = self.ais.log_z(p.model, p.base_b, self.ais_every_temps, ctx.generator, False)
            ais = self.ais.with_test_ll(p.model, p.test_x, ais)
            out.update({f"{k}_running": v for k, v in ais.items()})
        return out

    def finish(self, p: Parts, history, ctx) -> dict:
        """Final AIS (cached in checkpoints/test_ais.pt: a resumed run re-runs none), figures,
        results."""
        seconds, n = ctx.elapsed(), self.cadence.n_steps
        ais = ctx.load_file("test_ais")
        if ais is None:
            limits = (self.ais_temps, self.ais_spread_max, self.ais_temps_max, ctx.generator)
            ais = self.ais.trusted(p.model, p.base_b, p.test_x, *limits, bool(ctx.cfg.progress))
            ctx.workspace.save(ais, "test_ais")
        ais_seconds, ais_temps = ais.pop("ais_seconds"), ais.pop("ais_temps")
        for a in ais.pop("attempts"):  # kept with the cached AIS, so a resumed run logs them too
            ctx.log({f"ais_attempt_{k}": v for k, v in a.items()}, step=n)
        ctx.log({f"final_{k}": v for k, v in ais.items()}, step=n)
        title = f"RBM learning, {ctx.cfg.dataset.name}, {ctx.choices.get('sampler', '')}"
        shape, label = tuple(ctx.cfg.dataset.image_shape), "mean f(buffer) - mean f(data)"
        args = (shape, self.n_show, f"{title} ({ctx.scale})", label)
        ctx.save_figures(pcd_figures(history, p.learner.buffer, *args), n)
        train_lp = mean_log_prob(p.model, p.train_x[: self.train_n], self.eval_chunk)
        out = {**ais, "train_ll": train_lp - ais["log_z"], "seconds": seconds}
        out.update(time_per_iter=seconds / n, ais_seconds=ais_seconds, ais_temps=ais_temps)
        return {**out, "n_iters": n}
