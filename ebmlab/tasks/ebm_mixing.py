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
from ebmlab.plotting.sampling_runs import chain_images, vs_steps_and_seconds
from ebmlab.tasks.chains import Chains, ChainTask
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


@dataclass(eq=False)
class EBMMixing(ChainTask):
    checkpoint: str | None
    use_ema: bool
    n_chains: int
    n_show: int

    main_metric = "final_mean_log_prob"
    progress_desc = "EBM mixing"
    requires = {"model": Requirement(ResNetEBM, "model=resnet_ebm"), "sampler": Requirement()}
    checkpoint_keys = ("chains", "initial")

    def __post_init__(self):
        need = "path of a trained EBM (a checkpoint .pt or an ebm_learning run directory) is "
        need += "required, e.g. task.checkpoint=outputs/runs/ebm_learning/<run>"
        check(bool(self.checkpoint), "checkpoint", need)
        check(self.n_chains >= 1, "n_chains", f"must be >= 1 (got {self.n_chains})")
        check(self.n_show >= 0, "n_show", f"must be >= 0 (got {self.n_show})")

    def memory_estimate(self, cfg) -> dict[str, int]:
        d, c = int(cfg.model.get("dim", 0)), int(cfg.model.get("n_channels", 0))
        return {"chains": 4 * self.n_chains * d * 4, "activations": 8 * self.n_chains * c * d * 4}

    def build(self, ctx) -> Parts:
        path, model = resolve_checkpoint(self.checkpoint), ctx.build("model")
        weights = load_trained_weights(model, path, self.use_ema)
        model = model.to(ctx.device).requires_grad_(False)
        sampler = self.build_sampler(ctx)
        give_data_variance(sampler, model)
        x0 = model.sample_base(self.n_chains, ctx.generator)
        return Parts(model, self.start_chains(ctx, model, sampler, x0), weights, {})

    def warm_up(self, p: Parts, ctx) -> None:
        super().warm_up(p, ctx)
        p.initial["mean_log_prob"] = float(p.chains.state.log_prob.mean())

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        return {"mean_log_prob": float(p.chains.state.log_prob.float().mean())}

    def finish(self, p: Parts, history, ctx) -> dict:
        n, sampling_seconds, c = self.cadence.n_steps, ctx.elapsed(), p.chains
        name, dataset = ctx.choices.get("sampler", ""), ctx.choices.get("dataset", "")
        steps = [0, *history.column("step")]
        seconds = [c.tune_seconds + s for s in [0.0, *history.column("seconds")]]
        logp = [p.initial["mean_log_prob"], *history.column("mean_log_prob")]
        title, axis = f"EBM mixing, {dataset} ({ctx.scale})", ("seconds (tuning included)", "")
        fig = vs_steps_and_seconds(name, steps, seconds, logp, "mean log p~(x)", title, axis)
        ctx.save_figure(fig, "mean_log_prob", step=n)
        if self.n_show:
            title = f"{name}: final chains"
            grid = chain_images(c.x, self.n_show, p.model.image_shape, title, n_cols=8)
            ctx.save_figure(grid, "samples")
        return {
            "final_mean_log_prob": logp[-1],
            "initial_mean_log_prob": p.initial["mean_log_prob"],
            **self.chain_results(p, ctx),  # jump; seconds (tuning included)
            "steps_per_second": n / max(sampling_seconds, 1e-12),
            "tune_steps": c.tune_steps,
            "tune_seconds": c.tune_seconds,
            "n_steps": n,
            "n_chains": self.n_chains,
            "weights": p.weights,
        }
