"""Deep-EBM learning on binary images (DLP Table 1; ACS Table 2).

A ResNet energy (``model=resnet_ebm``, base term Bernoulli(train mean)) is trained by PCD with
a replay buffer, warm-up and EMA weights (``learner=pcd_buffer``) with any sampler (GWG, DULA,
DMALA, or ACS with its PCD schedule). Every ``valid_every`` iterations the EMA model's
validation log-likelihood is estimated by AIS (``valid_ais_temps`` temperatures) and the best
one is kept as ``checkpoints/best.pt``. At the end the chosen weights (``final_model``: the
best checkpoint's EMA weights by default, as the reference evaluation) get the protocol's AIS:
``ais_temps`` linear temperatures (300,000), ``ais_chains`` chains (500), one GWG transition
per temperature on the intermediate density; test LL = mean log p~(test) - log Z.

Divergence (non-finite or exploding loss/parameters) stops training with a message naming the
step; the last good and best checkpoints stay. With ``on_divergence=evaluate_best`` the run
then evaluates the best checkpoint (the papers' practice), with ``stop`` it ends with the error.
"""

from __future__ import annotations

import math
import sys
import time

import torch

from ebmlab.data.binary_images import binarize_batch
from ebmlab.errors import ConfigError, DivergenceError, check
from ebmlab.learning.pcd_buffer import deep_ebm_ais
from ebmlab.metrics.ais import linear_betas

AIS_SAMPLERS = ("gwg", "dmala")


def make_ais_sampler(name: str, step_size: float = 0.15):
    if name == "gwg":
        from ebmlab.samplers.gwg import GWG

        return GWG(n_flips=1)
    from ebmlab.samplers.dlp import DMALA

    return DMALA(step_size=step_size)


@torch.no_grad()
def mean_log_prob(model, x: torch.Tensor, chunk: int = 1000) -> float:
    return float(
        torch.cat([model.log_prob(x[i : i + chunk]).double() for i in range(0, len(x), chunk)])
        .mean()
        .item()
    )


def _spread_subset(x: torch.Tensor, n: int) -> torch.Tensor:
    """``n`` evenly spaced rows of ``x`` (all of it for n = 0): files can be ordered, so the
    first n rows need not be representative."""
    if n == 0 or n >= len(x):
        return x
    return x[torch.linspace(0, len(x) - 1, n, device=x.device).round().long()]


class EBMLearning:
    main_metric = "test_ll"

    def __init__(
        self,
        n_iters: int = 50000,
        log_every: int = 100,
        checkpoint_every: int = 1000,
        valid_every: int = 5000,
        valid_ais_temps: int = 10000,
        valid_ais_chains: int = 100,
        valid_n: int = 0,
        ais_temps: int = 300000,
        ais_chains: int = 500,
        ais_sampler: str = "gwg",
        test_n: int = 0,
        final_model: str = "best",
        use_ema: bool = True,
        on_divergence: str = "evaluate_best",
        n_show: int = 100,
    ):
        check(n_iters >= 1, "n_iters", f"must be >= 1 (got {n_iters})")
        check(log_every >= 1, "log_every", f"must be >= 1 (got {log_every})")
        check(checkpoint_every >= 1, "checkpoint_every", f"must be >= 1 (got {checkpoint_every})")
        check(valid_every >= 0, "valid_every", f"must be >= 0 (0 = never) (got {valid_every})")
        check(valid_ais_temps >= 2, "valid_ais_temps", f"must be >= 2 (got {valid_ais_temps})")
        check(valid_ais_chains >= 1, "valid_ais_chains", f"must be >= 1 (got {valid_ais_chains})")
        check(valid_n >= 0, "valid_n", f"must be >= 0 (0 = the whole split) (got {valid_n})")
        check(ais_temps >= 2, "ais_temps", f"must be >= 2 (got {ais_temps})")
        check(ais_chains >= 1, "ais_chains", f"must be >= 1 (got {ais_chains})")
        check(
            ais_sampler in AIS_SAMPLERS,
            "ais_sampler",
            f"one of {list(AIS_SAMPLERS)} (got {ais_sampler!r})",
        )
        check(test_n >= 0, "test_n", f"must be >= 0 (0 = the whole split) (got {test_n})")
        check(
            final_model in ("best", "last"),
            "final_model",
            f"best or last (got {final_model!r})",
        )
        check(
            on_divergence in ("evaluate_best", "stop"),
            "on_divergence",
            f"evaluate_best or stop (got {on_divergence!r})",
        )
        check(n_show >= 0, "n_show", f"must be >= 0 (got {n_show})")
        self.n_iters, self.log_every, self.checkpoint_every = n_iters, log_every, checkpoint_every
        self.valid_every, self.valid_ais_temps = valid_every, valid_ais_temps
        self.valid_ais_chains, self.valid_n = valid_ais_chains, valid_n
        self.ais_temps, self.ais_chains, self.ais_sampler = ais_temps, ais_chains, ais_sampler
        self.test_n, self.final_model, self.use_ema = test_n, final_model, use_ema
        self.on_divergence, self.n_show = on_divergence, n_show

    # -- setup ----------------------------------------------------------------------------
    def setup(self, ctx) -> None:
        for group in ("dataset", "model", "sampler", "learner"):
            if not ctx.has(group):
                raise ConfigError(group, f"ebm_learning needs a {group}")
        self.data = ctx.build("dataset")
        if not hasattr(self.data, "split"):
            raise ConfigError("dataset", "ebm_learning needs a binary image dataset")
        splits = ["train", "test"] + (["valid"] if self.valid_every else [])
        self.data.check_files(splits)
        self.model = ctx.build("model").to(ctx.device)
        if not hasattr(self.model, "sample_base"):
            raise ConfigError("model", "ebm_learning needs model=resnet_ebm")
        if self.model.dim != self.data.dim:
            raise ConfigError(
                "model.dim", f"must equal the dataset dimension {self.data.dim} ({self.model.dim})"
            )
        self.sampler = ctx.build("sampler")
        self.learner = ctx.build("learner")
        if not hasattr(self.learner, "ema_model"):
            raise ConfigError("learner", "ebm_learning needs learner=pcd_buffer")

    # -- evaluation -----------------------------------------------------------------------
    def _ll(self, model, x, n_temps: int, n_chains: int, g, progress: bool) -> dict:
        sampler = make_ais_sampler(self.ais_sampler)
        res = deep_ebm_ais(model, sampler, linear_betas(n_temps), n_chains, g, progress)
        mean_lp = mean_log_prob(model, x)
        return {"ll": mean_lp - res.log_z, "log_z": res.log_z, "log_z_stderr": res.log_z_stderr}

    # -- run ------------------------------------------------------------------------------
    def run(self, ctx) -> dict:
        from ebmlab.utils.plotting import curves, image_grid

        g, dev = ctx.generator, ctx.device
        train = self.data.split("train")
        x_train = train.x.to(dev)
        test_x = self.data.split("test").binarized().to(dev)
        test_x = _spread_subset(test_x, self.test_n)
        valid_x = None
        if self.valid_every:
            valid_x = self.data.split("valid").binarized().to(dev)
            valid_x = _spread_subset(valid_x, self.valid_n)
        model, learner = self.model, self.learner
        model.set_base_mean(x_train.mean(0))  # dynamic data: grayscale mean = binary mean
        learner.setup(model, self.sampler, g)
        n_params = sum(p.numel() for p in model.parameters())
        ctx.start_clock()
        start = 0
        hist = {"step": [], "loss": [], "valid_step": [], "valid_ll": []}
        best = {"valid_ll": -math.inf, "step": 0}
        totals = {"accept": 0.0, "n_acc": 0, "n_log_prob": 0.0}
        ck = ctx.resume(model=model, learner=learner)
        if ck is not None:
            start, hist, best, totals = ck["_run"]["step"], ck["history"], ck["best"], ck["totals"]
        last_saved = start

        def save(step: int, name: str = "last") -> None:
            state = {"model": model.state_dict(), "learner": learner.state_dict()}
            state.update(history=hist, best=best, totals=totals)
            ctx.save_checkpoint(state, step=step, name=name)

        diverged = 0
        bar = ctx.progress(self.n_iters, initial=start, desc="EBM learning")
        for it in range(start, self.n_iters):
            idx = torch.randint(0, x_train.shape[0], (learner.batch_size,), generator=g, device=dev)
            batch = binarize_batch(x_train[idx], train.binarize, g)
            try:
                info = learner.step(model, batch, g)
            except DivergenceError as e:
                diverged = e.step
                print(
                    f"ebmlab: {e}; training stopped. Last good checkpoint: step {last_saved} "
                    f"(checkpoints/last.pt); best: step {best['step']} (checkpoints/best.pt)",
                    file=sys.stderr,
                )
                ctx.log({"diverged_at": float(e.step)}, step=e.step)
                if self.on_divergence == "stop" or best["step"] == 0:
                    raise
                break
            step = it + 1
            if math.isfinite(info["accept_rate"]):
                totals["accept"] += info["accept_rate"]
                totals["n_acc"] += 1
            totals["n_log_prob"] += info["n_log_prob"]
            if step % self.log_every == 0 or step == self.n_iters:
                row = {k: float(v) for k, v in info.items()}
                row["seconds"] = ctx.elapsed()
                ctx.log(row, step=step)
                hist["step"].append(step)
                hist["loss"].append(row["loss"])
                bar.set_postfix(loss=f"{row['loss']:.3g}", acc=f"{row['accept_rate']:.2f}")
            if self.valid_every and (step % self.valid_every == 0 or step == self.n_iters):
                ev = learner.ema_model if self.use_ema else model
                v = self._ll(ev, valid_x, self.valid_ais_temps, self.valid_ais_chains, g, False)
                hist["valid_step"].append(step)
                hist["valid_ll"].append(v["ll"])
                ctx.log({"valid_ll": v["ll"], "valid_log_z": v["log_z"]}, step=step)
                if v["ll"] > best["valid_ll"]:
                    best = {"valid_ll": v["ll"], "step": step}
                    save(step, "best")
            if step % self.checkpoint_every == 0 or step == self.n_iters:
                save(step)
                last_saved = step
            bar.update(1)
            ctx.maybe_fault(step)
        bar.close()
        train_seconds = ctx.elapsed()
        n_done = diverged - 1 if diverged else self.n_iters

        # final weights: best checkpoint (if any validation ran) or the current ones
        which = "last"
        if (self.final_model == "best" or diverged) and best["step"] > 0:
            ckb = ctx.workspace.load("best")
            model.load_state_dict(ckb["model"])
            learner.ema_model.load_state_dict(ckb["learner"]["ema"])
            which = "best"
        ev = learner.ema_model if self.use_ema else model
        t0 = time.perf_counter()
        res = self._ll(ev, test_x, self.ais_temps, self.ais_chains, g, bool(ctx.cfg.progress))
        ais_seconds = time.perf_counter() - t0
        ctx.log({"test_ll": res["ll"], "log_z": res["log_z"]}, step=max(n_done, 1))

        name = ctx.choices.get("sampler", "")
        title = f"{self.data.name}, {name} ({ctx.scale})"
        ctx.save_figure(
            curves({"PCD loss": (hist["step"], hist["loss"])}, "iteration", "loss", title=title),
            "loss",
            step=n_done,
        )
        if hist["valid_step"]:
            ctx.save_figure(
                curves(
                    {"valid LL (AIS)": (hist["valid_step"], hist["valid_ll"])},
                    "iteration",
                    "nats",
                    title=title,
                ),
                "valid_ll",
                step=n_done,
            )
        if self.n_show:
            show = learner.buffer[: self.n_show].reshape(-1, *model.image_shape)
            ctx.save_figure(
                image_grid(show.float().cpu().numpy(), title=f"{title}: replay buffer"),
                "buffer",
                step=n_done,
            )
        return {
            "test_ll": res["ll"],
            "log_z": res["log_z"],
            "log_z_stderr": res["log_z_stderr"],
            "best_valid_ll": best["valid_ll"] if best["step"] else float("nan"),
            "best_step": best["step"],
            "final_model": which,
            "ema": self.use_ema,
            "diverged_at": diverged,
            "n_iters": n_done,
            "accept_rate": totals["accept"] / max(totals["n_acc"], 1),
            "evals_per_iter": totals["n_log_prob"] / max(n_done, 1),
            "seconds": train_seconds,
            "time_per_iter": train_seconds / max(n_done, 1),
            "ais_seconds": ais_seconds,
            "ais_temps": self.ais_temps,
            "ais_chains": self.ais_chains,
            "n_params": n_params,
        }
