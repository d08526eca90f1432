"""Deep-EBM learning on binary images (DLP Table 1; ACS Table 2).

A ResNet energy (base Bernoulli(train mean)) is trained by replay-buffer PCD with warm-up and
EMA (``learner=pcd_buffer``; ACS's PCD schedule, Algorithm 6, with ``sampler=acs``), one loop
step per iteration. Every ``valid_every`` iterations the validation LL of the evaluated weights
(EMA by default) is estimated by AIS; the best is kept as ``checkpoints/best.pt`` (``model``,
``learner`` with ``learner["ema"]``, ``step``, ``valid_ll``). At the end the ``final_model``
weights get the protocol's AIS (``ais_temps`` linear temperatures, ``ais_chains`` chains, one
``ais_sampler`` step each): test LL = mean log p~(test) - log Z. On divergence with
``on_divergence=evaluate_best`` best.pt is evaluated and ``diverged_at`` recorded.
``best_valid_ll`` is left out of the results when no validation ran.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from torch import Tensor

from ebmlab.core.loop import LoopTask, Requirement
from ebmlab.data.binary_images import BinaryImages, binarize_batch
from ebmlab.errors import check, check_at_least
from ebmlab.learning.ebm_likelihood import AIS_KERNELS, AISLikelihood
from ebmlab.learning.pcd_buffer import PCDBuffer
from ebmlab.models.resnet_ebm import ResNetEBM
from ebmlab.plotting.pcd_learning import pcd_figures


@dataclass
class Parts:
    model: ResNetEBM
    learner: PCDBuffer
    valid_x: Tensor | None
    test_x: Tensor
    best: dict  # {"valid_ll", "step"} of checkpoints/best.pt; step 0: none yet
    loss: Tensor | float = 0.0  # the last iteration's PCD loss


class EBMLearning(LoopTask):
    main_metric = "test_ll"
    progress_desc = "EBM learning"
    requires = {
        "dataset": Requirement(BinaryImages, "a binary image dataset"),
        "model": Requirement(ResNetEBM, "model=resnet_ebm", {"dim": "dataset.dim"}),
        "sampler": Requirement(),
        "learner": Requirement(PCDBuffer, "learner=pcd_buffer"),
    }
    checkpoint_keys = ("model", "learner", "best")
    reports_sampler_cost = True
    periods = ("valid_every",)

    def __init__(
        self,
        valid_every: int,
        valid_ais_temps: int,
        valid_ais_chains: int,
        valid_n: int,
        ais_temps: int,
        ais_chains: int,
        ais_sampler: str,
        ais_step_size: float,
        test_n: int,
        eval_chunk: int,
        final_model: str,
        use_ema: bool,
        on_divergence: str,
        n_show: int,
    ):
        at_least = (("eval_chunk valid_ais_chains ais_chains", 1), ("valid_ais_temps ais_temps", 2))
        check_at_least(locals(), (*at_least, ("valid_every valid_n test_n n_show", 0)))
        check(ais_sampler in AIS_KERNELS, "ais_sampler", f"gwg or dmala (got {ais_sampler!r})")
        check(ais_step_size > 0, "ais_step_size", f"must be > 0 (got {ais_step_size})")
        check(final_model in ("best", "last"), "final_model", f"best or last ({final_model!r})")
        check(on_divergence in ("evaluate_best", "stop"), "on_divergence", "evaluate_best or stop")
        self.valid_every, self.valid_n, self.test_n = valid_every, valid_n, test_n
        ais = (ais_sampler, ais_step_size, eval_chunk)
        self.valid_ais = AISLikelihood(valid_ais_temps, valid_ais_chains, *ais)
        self.test_ais = AISLikelihood(ais_temps, ais_chains, *ais)
        self.final_model, self.use_ema = final_model, use_ema
        self.divergence_policy, self.n_show = on_divergence, n_show

    def memory_estimate(self, cfg) -> dict[str, int]:
        d, c = int(cfg.dataset.get("dim", 0)), int(cfg.model.get("n_channels", 0))
        chains = max(self.valid_ais.n_chains, self.test_ais.n_chains)
        chains = max(chains, 2 * int(cfg.learner.get("batch_size", 0)))
        return {"buffer": int(cfg.learner.get("buffer_size", 0)) * d * 4, "net": chains * c * d * 8}

    def build(self, ctx) -> Parts:
        data = ctx.build("dataset")
        data.check_files(["train", "test"] + (["valid"] if self.valid_every else []))
        model = ctx.build("model").to(ctx.device)
        sampler, learner = ctx.build("sampler"), ctx.build("learner")
        train, dev = data.split("train"), ctx.device
        x_train, test_x = train.x.to(dev), data.spread_rows("test", self.test_n, dev)
        valid_x = data.spread_rows("valid", self.valid_n, dev) if self.valid_every else None
        model.set_base_mean(x_train.mean(0))  # dynamic data: grayscale mean = binary mean
        mode = train.binarize  # each drawn batch is binarised (dynamic: fresh Bernoulli draws)
        learner.setup(
            model, x_train, ctx.generator, sampler, lambda b, g: binarize_batch(b, mode, g)
        )
        return Parts(model, learner, valid_x, test_x, {"valid_ll": 0.0, "step": 0})

    def step(self, p: Parts, step: int, ctx) -> dict:
        info = p.learner.step(p.model, ctx.generator)
        p.loss = info["loss"]
        return info

    def _ll(self, p: Parts, x: Tensor, ais: AISLikelihood, ctx, progress: bool = False) -> dict:
        """AIS log Z of the evaluated weights (EMA or raw) and the mean log-likelihood of ``x``."""
        return ais(p.learner.ema_model if self.use_ema else p.model, x, ctx.generator, progress)

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        out = {"last_loss": float(p.loss)}
        if self.valid_every and (step % self.valid_every == 0 or step == self.cadence.n_steps):
            v = self._ll(p, p.valid_x, self.valid_ais, ctx)
            out.update(valid_ll=v["ll"], valid_log_z=v["log_z"])
            if p.best["step"] == 0 or v["ll"] > p.best["valid_ll"]:
                p.best = {"valid_ll": v["ll"], "step": step}
                ctx.workspace.save({**self.state_dict(p), **p.best}, "best")
        return out

    def on_divergence(self, p: Parts, error, history, ctx) -> dict:
        if self.divergence_policy == "stop" or p.best["step"] == 0:
            raise error
        kept = f"last good: step {ctx.last_good_step}, best: step {p.best['step']}"
        print(f"ebmlab: {error}; training stopped ({kept}); evaluating best.pt", file=sys.stderr)
        ctx.log({"diverged_at": float(error.step)}, step=error.step)
        return self.finish(p, history, ctx, diverged=error.step)

    def finish(self, p: Parts, history, ctx, diverged: int = 0) -> dict:
        """Final AIS on the test split (cached in checkpoints/test_ais.pt), figures, results."""
        seconds, n = ctx.elapsed(), (diverged - 1 if diverged else self.cadence.n_steps)
        which = "best" if (self.final_model == "best" or diverged) and p.best["step"] else "last"
        if which == "best":
            best = ctx.load_file("best")
            p.model.load_state_dict(best["model"])
            p.learner.ema_model.load_state_dict(best["learner"]["ema"])
        res = ctx.load_file("test_ais")
        if res is None:
            res = self._ll(p, p.test_x, self.test_ais, ctx, bool(ctx.cfg.progress))
            ctx.workspace.save(res, "test_ais")
        ctx.log({"test_ll": res["ll"], "log_z": res["log_z"]}, step=max(n, 1))
        title = f"{ctx.cfg.dataset.name}, {ctx.choices.get('sampler', '')} ({ctx.scale})"
        buf, shape = p.learner.buffer, p.model.image_shape
        ctx.save_figures(pcd_figures(history, buf, shape, self.n_show, title, "loss"), step=n)
        out = {"test_ll": res["ll"], "log_z": res["log_z"], "log_z_stderr": res["log_z_stderr"]}
        if p.best["step"]:
            out["best_valid_ll"] = p.best["valid_ll"]
        out.update(best_step=p.best["step"], final_model=which, ema=self.use_ema)
        out.update(diverged_at=diverged, n_iters=n, seconds=seconds)
        out.update(time_per_iter=seconds / max(n, 1), ais_seconds=res["ais_seconds"])
        out.update(ais_temps=self.test_ais.n_temps, ais_chains=self.test_ais.n_chains)
        return {**out, "n_params": sum(q.numel() for q in p.model.parameters())}
