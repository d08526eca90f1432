"""Deep-EBM mixing (ACS Fig. 5; AB Fig. 4): how fast a sampler climbs a trained EBM's density.

From a trained ResNet EBM (``checkpoint``: a checkpoint file or a ``task=ebm_learning`` run
directory; EMA weights when ``use_ema``), ``n_chains`` chains start from the Bernoulli(data
mean) base and run ``run.n_steps`` steps of the configured sampler (one loop step each). Every
``run.eval_every`` steps the mean unnormalised log-density over chains is recorded (higher is
better), plotted against steps and seconds; the final chains are shown as an image grid.

Any sampler works. A warm-up planned for the run (ACS with ``tune``, Alg. 2) runs first
(:mod:`ebmlab.tasks.chains`); its time is reported as ``tune_seconds``, included in
``seconds`` and in the figure's seconds axis (the logged ``seconds`` count sampling only).
A sampler that declares ``uses_data_variance`` (:class:`ebmlab.core.protocols.UsesDataVariance`:
AB-diag, W_ii = 1 / (1 + var_i)) gets the per-pixel data variance m (1 - m), m = the model's
base mean (the training mean clamped to [base_eps, 1 - base_eps]).
"""

from __future__ import annotations

from dataclasses import dataclass

from ebmlab.core.loop import Requirement
from ebmlab.errors import check
from ebmlab.models.resnet_ebm import ResNetEBM
from ebmlab.tasks.chains import Chains, ChainTask
from ebmlab.utils.plotting import image_grid, side_by_side
from ebmlab.utils.trained_weights import load_trained_weights, resolve_checkpoint


def give_data_variance(sampler, model) -> None:
    """Hand m (1 - m), m the model's base mean, to a sampler that declares it uses the data's
    variance (``uses_data_variance``); other samplers are left as they are."""
    if getattr(sampler, "uses_data_variance", False):
        m = model.base_mean
        sampler.set_data_variance(m * (1 - m))


@dataclass
class Parts:
    model: ResNetEBM
    chains: Chains
    weights: str  # "ema" or "raw"
    initial: dict  # {"mean_log_prob": at step 0, after the warm-up}


class EBMMixing(ChainTask):
    main_metric = "final_mean_log_prob"
    progress_desc = "EBM mixing"
    requires = {"model": Requirement(ResNetEBM, "model=resnet_ebm"), "sampler": Requirement()}
    checkpoint_keys = ("chains", "initial")

    def __init__(
        self,
        checkpoint: str | None,
        use_ema: bool,
        n_chains: int,
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
        self.checkpoint, self.use_ema = checkpoint, use_ema
        self.n_chains, self.n_show = n_chains, n_show

    def memory_estimate(self, cfg) -> dict[str, int]:
        d, c = int(cfg.model.get("dim", 0)), int(cfg.model.get("n_channels", 0))
        return {"chains": 4 * self.n_chains * d * 4, "activations": 8 * self.n_chains * c * d * 4}

    def build(self, ctx) -> Parts:
        path = resolve_checkpoint(self.checkpoint)
        model = ctx.build("model")
        weights = load_trained_weights(model, path, self.use_ema)
        model = model.to(ctx.device).requires_grad_(False)
        sampler = self.build_sampler(ctx)
        give_data_variance(sampler, model)
        x0 = model.sample_base(self.n_chains, ctx.generator)
        return Parts(model, self.start_chains(ctx, model, sampler, x0), weights, {})

    def warm_up(self, p: Parts, ctx) -> None:
        super().warm_up(p, ctx)
        p.initial["mean_log_prob"] = float(p.chains.state.log_prob.mean())

    def step(self, p: Parts, step: int, ctx) -> dict:
        return self.advance(p, step, ctx).totals()

    def steps(self, p: Parts, first: int, n: int, ctx) -> dict:  # blocks of steps on CUDA
        return self.advance_block(p, first, n, ctx)

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        return {"mean_log_prob": float(p.chains.state.log_prob.float().mean())}

    def finish(self, p: Parts, history, ctx) -> dict:
        n, sampling_seconds, c = self.cadence.n_steps, ctx.elapsed(), p.chains
        name = ctx.choices.get("sampler", "")
        steps = [0, *history.column("step")]
        seconds = [c.tune_seconds + s for s in [0.0, *history.column("seconds")]]
        logp = [p.initial["mean_log_prob"], *history.column("mean_log_prob")]
        fig = side_by_side(
            [
                ("vs steps", {name: (steps, logp)}, "step", "mean log p~(x)"),
                ("vs seconds", {name: (seconds, logp)}, "seconds (tuning included)", ""),
            ],
            title=f"EBM mixing, {ctx.choices.get('dataset', '')} ({ctx.scale})",
        )
        ctx.save_figure(fig, "mean_log_prob", step=n)
        if self.n_show:
            x = c.x[: self.n_show].reshape(-1, *p.model.image_shape)
            grid = image_grid(x.float().cpu().numpy(), n_cols=8, title=f"{name}: final chains")
            ctx.save_figure(grid, "samples")
        return {
            "final_mean_log_prob": logp[-1],
            "initial_mean_log_prob": p.initial["mean_log_prob"],
            "jump": ctx.totals.mean("jump"),  # the sampler-cost block has the rest
            "seconds": sampling_seconds + c.tune_seconds,
            "steps_per_second": n / max(sampling_seconds, 1e-12),
            "tune_steps": c.tune_steps,
            "tune_seconds": c.tune_seconds,
            "n_steps": n,
            "n_chains": self.n_chains,
            "weights": p.weights,
        }
