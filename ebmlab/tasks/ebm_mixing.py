"""Deep-EBM mixing (ACS Fig. 5; AB Fig. 4): how fast a sampler climbs a trained EBM's density.

From a trained ResNet EBM (``checkpoint``: a checkpoint file or a ``task=ebm_learning`` run
directory; EMA weights when ``use_ema``), ``n_chains`` chains start from the Bernoulli(data
mean) base and run ``n_steps`` steps of the configured sampler (one loop step each). Every
``log_every`` steps the mean unnormalised log-density over chains is recorded (higher is
better), plotted against steps and seconds; the final chains are shown as an image grid.

Any sampler works. ACS with ``tune`` is tuned first (Alg. 2, in ``build``); the tuning time
is reported as ``tune_seconds``, included in ``seconds`` and in the figure's seconds axis
(the logged ``seconds`` count sampling only). The AB diagonal variant gets the per-pixel
data variance m (1 - m), W_ii = 1 / (1 + var_i), m = the model's base mean (the training
mean clamped to [base_eps, 1 - base_eps]).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ebmlab.core.loop import Cadence, LoopTask
from ebmlab.core.protocols import Kernel
from ebmlab.core.state import ChainState
from ebmlab.errors import ConfigError, check
from ebmlab.models.resnet_ebm import ResNetEBM
from ebmlab.samplers.ab import ABDiag
from ebmlab.samplers.acs import ACS
from ebmlab.utils.plotting import image_grid, side_by_side
from ebmlab.utils.trained_weights import load_trained_weights, resolve_checkpoint


@dataclass
class Parts:
    model: ResNetEBM
    sampler: Kernel
    state: ChainState
    weights: str  # "ema" or "raw"
    initial_mean_log_prob: float  # at step 0 (after tuning)
    tune_steps: int
    tune_seconds: float


def _now(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


class EBMMixing(LoopTask):
    main_metric = "final_mean_log_prob"
    progress_desc = "EBM mixing"

    def __init__(
        self,
        checkpoint: str | None,
        use_ema: bool,
        n_chains: int,
        n_steps: int,
        log_every: int,
        checkpoint_every: int,
        n_show: int,
    ):
        check(
            bool(checkpoint),
            "checkpoint",
            "path of a trained EBM (a checkpoint .pt or an ebm_learning run directory) is "
            "required, e.g. task.checkpoint=outputs/runs/ebm_learning/<run>",
        )
        check(n_chains >= 1, "n_chains", f"must be >= 1 (got {n_chains})")
        check(n_show >= 0, "n_show", f"must be >= 0 (got {n_show})")
        self.cad = Cadence(n_steps, log_every, checkpoint_every)
        self.checkpoint, self.use_ema = checkpoint, use_ema
        self.n_chains, self.n_show = n_chains, n_show

    def memory_estimate(self, cfg) -> dict[str, int]:
        d, c = int(cfg.model.get("dim", 0)), int(cfg.model.get("n_channels", 0))
        return {"chains": 4 * self.n_chains * d * 4, "activations": 8 * self.n_chains * c * d * 4}

    def build(self, ctx) -> Parts:
        path = resolve_checkpoint(self.checkpoint)
        model = ctx.build("model")
        if not isinstance(model, ResNetEBM):
            raise ConfigError("model", "ebm_mixing needs model=resnet_ebm")
        weights = load_trained_weights(model, path, self.use_ema)
        model = model.to(ctx.device).requires_grad_(False)
        sampler = ctx.build("sampler")
        tune = isinstance(sampler, ACS) and sampler.tune_enabled
        if tune:
            sampler.resolve_tune_budget(self.cad.n_steps)  # the budget must fit the run
        if isinstance(sampler, ABDiag):
            m = model.base_mean
            sampler.set_data_variance(m * (1 - m))
        x0 = model.sample_base(self.n_chains, ctx.generator)
        state = sampler.init(model, x0)
        tune_steps, tune_seconds = 0, 0.0
        if tune:  # ACS Alg. 2, once before sampling
            t0 = _now(ctx.device)
            state, res = sampler.tune(model, state, ctx.generator, self.cad.n_steps)
            tune_steps, tune_seconds = int(res.n_steps), _now(ctx.device) - t0
        initial = float(state.log_prob.mean())
        return Parts(model, sampler, state, weights, initial, tune_steps, tune_seconds)

    def cadence(self, parts: Parts) -> Cadence:
        return self.cad

    def step(self, p: Parts, step: int, ctx) -> dict:
        p.state, info = p.sampler.step(p.model, p.state, ctx.generator)
        return info.totals()

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        return {"mean_log_prob": float(p.state.log_prob.float().mean())}

    def state_dict(self, p: Parts) -> dict:
        return {
            **p.state.state_dict(),
            "sampler": p.sampler.state_dict(),
            "tune_seconds": p.tune_seconds,
        }

    def load_state_dict(self, p: Parts, d: dict) -> None:
        p.state = p.state.restored(d)
        p.sampler.load_state_dict(d["sampler"])
        p.tune_seconds = float(d["tune_seconds"])

    def finish(self, p: Parts, history, ctx) -> dict:
        n, sampling_seconds = self.cad.n_steps, ctx.elapsed()
        name = ctx.choices.get("sampler", type(p.sampler).__name__)
        steps = [0, *history.column("step")]
        seconds = [p.tune_seconds + s for s in [0.0, *history.column("seconds")]]
        logp = [p.initial_mean_log_prob, *history.column("mean_log_prob")]
        fig = side_by_side(
            [
                ("vs steps", {name: (steps, logp)}, "step", "mean log p~(x)"),
                ("vs seconds", {name: (seconds, logp)}, "seconds (tuning included)", ""),
            ],
            title=f"EBM mixing, {ctx.choices.get('dataset', '')} ({ctx.scale})",
        )
        ctx.save_figure(fig, "mean_log_prob", step=n)
        if self.n_show:
            x = p.state.x[: self.n_show].reshape(-1, *p.model.image_shape)
            grid = image_grid(x.float().cpu().numpy(), n_cols=8, title=f"{name}: final chains")
            ctx.save_figure(grid, "samples")
        return {
            "final_mean_log_prob": logp[-1],
            "initial_mean_log_prob": p.initial_mean_log_prob,
            "accept_rate": ctx.totals.mean("accept_rate"),
            "jump": ctx.totals.mean("jump"),
            "seconds": sampling_seconds + p.tune_seconds,
            "steps_per_second": n / max(sampling_seconds, 1e-12),
            "tune_steps": p.tune_steps,
            "tune_seconds": p.tune_seconds,
            "n_steps": n,
            "n_chains": self.n_chains,
            "weights": p.weights,
        }
