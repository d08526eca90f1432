"""RBM learning (ACS Table 1): PCD with any sampler, test log-likelihood by RBM AIS.

A Bernoulli RBM (visible bias from the data mean) is trained by PCD (``learner=pcd``: persistent
chains, batch, Adam, ``sampler_steps`` per iteration; ``learner=acs_pcd`` with ``sampler=acs``
for ACS's PCD schedule, Algorithm 6), one loop step per iteration. Every ``eval_every``
iterations the iteration's loss is kept (and every ``ais_every`` a cheaper AIS is logged as
``*_running``). At the end log Z is estimated by AIS with intermediate RBMs and block-Gibbs
transitions (Salakhutdinov & Murray 2008; ``ais_temps`` linear temperatures, ``ais_chains``
chains, base = independent Bernoulli of the training mean) and

    test LL = mean_{x in test} log p~(x) - log Z      (train LL: the first ``train_n`` images).

The final AIS is trusted only when independent runs agree: its chains are split into
``ais_groups`` groups, and while their log Z estimates spread more than ``ais_spread_max``
nats it is repeated with twice the temperatures, up to ``ais_temps_max`` (the temperatures
used are reported as ``ais_temps``, every attempt is logged as ``ais_attempt_*``, and a spread
still too wide is said on stderr). ``log_z_weight_ess``, the effective sample size of the AIS
weights, says whether a wide spread comes from a few chains carrying the estimate.

For tiny RBMs (min(V, H) <= 20) the exact log Z is reported beside it (``test_ll_exact``).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import torch
from torch import Tensor

from ebmlab.core.loop import Cadence, LoopTask
from ebmlab.errors import check, check_at_least
from ebmlab.learning.acs_pcd import ACSPCD
from ebmlab.learning.pcd import PCD
from ebmlab.learning.rbm_target import training_split
from ebmlab.metrics.ais import group_spread, rbm_ais_log_z, rbm_exact_log_z, weight_ess
from ebmlab.metrics.tempered_ais import mean_log_prob
from ebmlab.models.rbm import BernoulliRBM
from ebmlab.plotting.pcd_learning import pcd_figures
from ebmlab.samplers.acs import ACS

_EXACT_MAX_UNITS = 20  # exact log Z by enumerating the smaller layer up to this size


def ais_base_logits(train_x: Tensor) -> Tensor:
    """Logits of the AIS base distribution: independent Bernoulli of the training mean,
    clamped to [0.01, 0.99] so that no pixel is impossible."""
    m = train_x.mean(0).clamp(0.01, 0.99)
    return torch.log(m) - torch.log1p(-m)


@dataclass
class Parts:
    model: BernoulliRBM
    learner: PCD
    train_x: Tensor
    test_x: Tensor
    base_b: Tensor  # logits of the AIS base: Bernoulli(clamped training mean)
    loss: Tensor | float = 0.0  # the last iteration's PCD loss


class RBMLearning(LoopTask):
    main_metric = "test_ll"
    progress_desc = "RBM learning"

    def __init__(
        self,
        n_iters: int,
        eval_every: int,
        checkpoint_every: int,
        ais_temps: int,
        ais_chains: int,
        ais_groups: int,
        ais_spread_max: float,
        ais_temps_max: int,
        ais_every: int,
        ais_every_temps: int,
        init_visible_bias: bool,
        train_n: int,
        eval_chunk: int,
        n_show: int,
    ):
        check_at_least(
            locals(),
            (
                ("n_iters eval_every checkpoint_every ais_chains train_n eval_chunk", 1),
                ("ais_temps ais_every_temps ais_groups", 2),
                ("ais_every n_show", 0),
            ),
        )
        check(
            ais_groups <= ais_chains,
            "ais_groups",
            f"must be <= ais_chains {ais_chains} (got {ais_groups})",
        )
        check(ais_every % eval_every == 0, "ais_every", "must be a multiple of eval_every")
        check(ais_spread_max >= 0, "ais_spread_max", f"must be >= 0 (got {ais_spread_max})")
        check(
            ais_temps_max >= ais_temps,
            "ais_temps_max",
            f"must be >= ais_temps {ais_temps} (got {ais_temps_max})",
        )
        self.cad = Cadence(n_iters, eval_every, checkpoint_every)
        self.ais_temps, self.ais_chains, self.ais_groups = ais_temps, ais_chains, ais_groups
        self.ais_spread_max, self.ais_temps_max = float(ais_spread_max), ais_temps_max
        self.ais_every, self.ais_every_temps = ais_every, ais_every_temps
        self.init_visible_bias, self.train_n = init_visible_bias, train_n
        self.eval_chunk, self.n_show = eval_chunk, n_show

    def memory_estimate(self, cfg) -> dict[str, int]:
        v, h = int(cfg.model.get("n_visible", 0)), int(cfg.model.get("n_hidden", 0))
        chains = int(cfg.learner.get("buffer_size", 0)) + int(cfg.learner.get("batch_size", 0))
        return {"chains": 4 * chains * v * 4, "ais": self.ais_chains * (v + h) * 8 * 3}

    def build(self, ctx) -> Parts:
        for group in ("dataset", "model", "sampler", "learner"):
            check(ctx.has(group), group, f"rbm_learning needs a {group}")
        data = ctx.build("dataset")
        _, train = training_split(data, "train", need_labels=False)
        _, test = training_split(data, "test", need_labels=False)
        model = ctx.build("model").to(ctx.device)
        check(isinstance(model, BernoulliRBM), "model", "rbm_learning needs model=rbm")
        check(model.n_visible == data.dim, "model.n_visible", f"must be {data.dim} (dataset)")
        sampler, learner = ctx.build("sampler"), ctx.build("learner")
        check(isinstance(learner, PCD), "learner", "needs a PCD learner (pcd or acs_pcd)")
        check(
            isinstance(learner, ACSPCD) or not isinstance(sampler, ACS),
            "learner",
            "sampler=acs in PCD follows ACS's PCD schedule: use learner=acs_pcd",
        )
        x, test_x = train.x.to(ctx.device), test.x.to(ctx.device)
        mean = x.mean(0)
        if self.init_visible_bias:
            model.init_visible_bias_from_data(mean)
        learner.setup(model, x, ctx.generator, sampler)
        return Parts(model, learner, x, test_x, ais_base_logits(x))

    def cadence(self, parts: Parts) -> Cadence:
        return self.cad

    def step(self, p: Parts, step: int, ctx) -> dict:
        info = p.learner.step(p.model, ctx.generator)
        p.loss = info["loss"]
        return info

    def _ais(self, p: Parts, n_temps: int, ctx, progress: bool) -> dict:
        """AIS log Z, its standard error, the spread of its groups of chains and the weights'
        effective sample size."""
        W, b, c = p.model.parameters_for_ais()
        g = ctx.generator
        res = rbm_ais_log_z(W, b, c, p.base_b, n_temps, self.ais_chains, g, progress=progress)
        return {
            "log_z": res.log_z,
            "log_z_stderr": res.log_z_stderr,
            "log_z_spread": group_spread(res.log_weights, self.ais_groups),
            "log_z_weight_ess": weight_ess(res.log_weights),
        }

    def _with_test_ll(self, p: Parts, ais: dict) -> dict:
        """``ais`` with the test LL it gives, and the exact values for a tiny RBM."""
        mean_lp = mean_log_prob(p.model, p.test_x, self.eval_chunk)
        out = {**ais, "test_ll": mean_lp - ais["log_z"]}
        if min(p.model.n_visible, p.model.n_hidden) <= _EXACT_MAX_UNITS:
            W, b, c = p.model.parameters_for_ais()
            exact = rbm_exact_log_z(W, b, c, max_units=_EXACT_MAX_UNITS)
            out.update(log_z_exact=exact, test_ll_exact=mean_lp - exact)
        return out

    def _final_ais(self, p: Parts, ctx) -> dict:
        """The final AIS, repeated with twice the temperatures while its groups of chains
        disagree by more than ``ais_spread_max`` nats (up to ``ais_temps_max``)."""
        t0, temps, attempts = time.perf_counter(), self.ais_temps, []
        while True:
            ais = self._ais(p, temps, ctx, bool(ctx.cfg.progress))
            spread = ais["log_z_spread"]
            ess = ais["log_z_weight_ess"]
            attempts.append(
                {"temps": temps, "log_z": ais["log_z"], "log_z_spread": spread, "weight_ess": ess}
            )
            if spread <= self.ais_spread_max or temps >= self.ais_temps_max:
                break
            more = min(2 * temps, self.ais_temps_max)
            print(
                f"ebmlab: AIS log Z spread {spread:.2f} nats over {self.ais_groups} groups of "
                f"chains with {temps:,} temperatures (> ais_spread_max {self.ais_spread_max:g}); "
                f"again with {more:,}",
                file=sys.stderr,
            )
            temps = more
        if spread > self.ais_spread_max:
            print(
                f"ebmlab: AIS log Z spread still {spread:.2f} nats at ais_temps_max "
                f"{temps:,} temperatures; reported as log_z_spread",
                file=sys.stderr,
            )
        out = self._with_test_ll(p, ais)  # the test set's log p~ once, not per attempt
        seconds = time.perf_counter() - t0
        return {**out, "ais_temps": temps, "ais_seconds": seconds, "attempts": attempts}

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        out = {"last_loss": float(p.loss)}
        if self.ais_every and step % self.ais_every == 0 and step < self.cad.n_steps:
            ais = self._with_test_ll(p, self._ais(p, self.ais_every_temps, ctx, False))
            out.update({f"{k}_running": v for k, v in ais.items()})
        return out

    def state_dict(self, p: Parts) -> dict:
        return {"model": p.model.state_dict(), "learner": p.learner.state_dict()}

    def load_state_dict(self, p: Parts, d: dict) -> None:
        p.model.load_state_dict(d["model"])
        p.learner.load_state_dict(d["learner"])

    def finish(self, p: Parts, history, ctx) -> dict:
        """Final AIS (cached in checkpoints/test_ais.pt), figures, results."""
        seconds, n = ctx.elapsed(), self.cad.n_steps
        ais = ctx.load_file("test_ais")
        if ais is None:
            ais = self._final_ais(p, ctx)
            ctx.workspace.save(ais, "test_ais")
        ais_seconds, ais_temps = ais.pop("ais_seconds"), ais.pop("ais_temps")
        for a in ais.pop("attempts"):  # kept with the cached AIS, so a resumed run logs them too
            ctx.log({f"ais_attempt_{k}": v for k, v in a.items()}, step=n)
        ctx.log({f"final_{k}": v for k, v in ais.items()}, step=n)
        name = ctx.choices.get("sampler", "")
        title = f"RBM learning, {ctx.cfg.dataset.name}, {name} ({ctx.scale})"
        label = "mean f(buffer) - mean f(data)"
        shape = tuple(ctx.cfg.dataset.image_shape)
        for fig_name, fig in pcd_figures(
            history, p.learner.buffer, shape, self.n_show, title, label
        ).items():
            ctx.save_figure(fig, fig_name, step=n)
        train_lp = mean_log_prob(p.model, p.train_x[: self.train_n], self.eval_chunk)
        return {
            **ais,
            "train_ll": train_lp - ais["log_z"],
            "accept_rate": ctx.totals.mean("accept_rate"),
            "evals_per_iter": ctx.totals.total("n_log_prob") / n,
            "seconds": seconds,
            "time_per_iter": seconds / n,
            "ais_seconds": ais_seconds,
            "ais_temps": ais_temps,
            "n_iters": n,
        }
