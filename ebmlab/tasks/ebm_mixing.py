"""Deep-EBM mixing (ACS Fig. 5; AB Fig. 4): how fast a sampler climbs a trained EBM's density.

From a trained ResNet EBM (``task.checkpoint``: a checkpoint file or a run directory of
``task=ebm_learning``; EMA weights by default), ``n_chains`` chains (128) start from the
Bernoulli(data mean) base and run ``n_steps`` (5,000) steps of the configured sampler. The
mean unnormalised log-density over chains is logged every ``log_every`` steps against steps
and wall-clock seconds (higher is better); the final chains are shown as an image grid.
Any sampler config works; samplers with ``tune`` (ACS) are tuned first (cost included in
the seconds axis); samplers with ``set_data_variance(var)`` (AB, diagonal variant with
W_ii = 1 / (1 + var_i)) get the per-pixel data variance m (1 - m), m = the model's base mean
(the training mean clamped to [0.01, 0.99]).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from ebmlab.errors import ConfigError, check


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def resolve_checkpoint(path: str) -> Path:
    """A checkpoint file, or a run directory (its checkpoints/best.pt, else last.pt)."""
    p = Path(path).expanduser()
    if p.is_dir():
        for name in ("best.pt", "last.pt"):
            if (p / "checkpoints" / name).is_file():
                return p / "checkpoints" / name
            if (p / name).is_file():
                return p / name
        raise FileNotFoundError(f"no checkpoints/best.pt or checkpoints/last.pt under {p}")
    if not p.is_file():
        raise FileNotFoundError(f"checkpoint {p} does not exist")
    return p


def load_ebm_weights(model, path: Path, use_ema: bool) -> str:
    """Load the EMA (or raw) weights of an ebm_learning checkpoint into ``model``."""
    ck = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(ck, dict) and "model" in ck:
        ema = ck.get("learner", {}).get("ema") if isinstance(ck.get("learner"), dict) else None
        state, which = (ema, "ema") if use_ema and ema is not None else (ck["model"], "raw")
    else:
        state, which = ck, "raw"
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        first = str(e).splitlines()[0]
        raise ConfigError(
            "model",
            f"the checkpoint {path} does not fit this model config (set model.n_channels / "
            f"model.n_blocks to the values it was trained with): {first}",
        ) from None
    return which


class EBMMixing:
    main_metric = "final_mean_log_prob"

    def __init__(
        self,
        checkpoint: str | None = None,
        use_ema: bool = True,
        n_chains: int = 128,
        n_steps: int = 5000,
        log_every: int = 10,
        checkpoint_every: int = 1000,
        n_show: int = 64,
    ):
        check(n_chains >= 1, "n_chains", f"must be >= 1 (got {n_chains})")
        check(n_steps >= 1, "n_steps", f"must be >= 1 (got {n_steps})")
        check(log_every >= 1, "log_every", f"must be >= 1 (got {log_every})")
        check(checkpoint_every >= 1, "checkpoint_every", f"must be >= 1 (got {checkpoint_every})")
        check(n_show >= 0, "n_show", f"must be >= 0 (got {n_show})")
        self.checkpoint, self.use_ema = checkpoint, use_ema
        self.n_chains, self.n_steps, self.log_every = n_chains, n_steps, log_every
        self.checkpoint_every, self.n_show = checkpoint_every, n_show

    def setup(self, ctx) -> None:
        for group in ("model", "sampler"):
            if not ctx.has(group):
                raise ConfigError(group, f"ebm_mixing needs a {group}")
        if not self.checkpoint:
            raise ConfigError(
                "task.checkpoint",
                "path of a trained EBM (a checkpoint .pt or an ebm_learning run directory) is "
                "required, e.g. task.checkpoint=outputs/runs/ebm_learning/<run>",
            )
        path = resolve_checkpoint(str(self.checkpoint))
        self.model = ctx.build("model")
        if not hasattr(self.model, "sample_base"):
            raise ConfigError("model", "ebm_mixing needs model=resnet_ebm")
        self.weights = load_ebm_weights(self.model, path, self.use_ema)
        self.model = self.model.to(ctx.device)
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.ckpt_path = path
        self.sampler = ctx.build("sampler")
        if getattr(self.sampler, "tune_enabled", False) and hasattr(
            self.sampler, "resolve_tune_budget"
        ):
            self.sampler.resolve_tune_budget(self.n_steps)  # ACS: the budget must fit the run

    def run(self, ctx) -> dict:
        from ebmlab.utils.plotting import image_grid, side_by_side

        g, dev, model, sampler = ctx.generator, ctx.device, self.model, self.sampler
        if hasattr(sampler, "set_data_variance"):
            m = model.base_mean
            sampler.set_data_variance(m * (1 - m))
        x0 = model.sample_base(self.n_chains, g)
        ctx.start_clock()
        start = 0
        hist = {"step": [], "seconds": [], "mean_log_prob": []}
        totals = {"accept": 0.0, "jump": 0.0, "tune_steps": 0, "tune_seconds": 0.0}
        ck = ctx.load_checkpoint()
        if ck is not None:
            sampler.load_state_dict(ck["sampler"])
            start, hist, totals = ck["_run"]["step"], ck["history"], ck["totals"]
            state = sampler.init(model, ck["x"].to(dev))
        else:
            state = sampler.init(model, x0)
            if getattr(sampler, "tune_enabled", False) and hasattr(sampler, "tune"):
                t0 = ctx.elapsed()
                state, res = sampler.tune(model, state, g, self.n_steps)
                _sync(dev)
                totals["tune_steps"] = int(res.n_steps)
                totals["tune_seconds"] = ctx.elapsed() - t0
            row = {
                "step": 0,
                "seconds": ctx.elapsed(),
                "mean_log_prob": float(state.log_prob.mean()),
            }
            for k in hist:
                hist[k].append(row[k])
            ctx.log(row, step=0)
        bar = ctx.progress(self.n_steps, initial=start, desc="EBM mixing")
        for it in range(start, self.n_steps):
            state, info = sampler.step(model, state, g)
            totals["accept"] += float(info.accept_prob.float().mean())
            totals["jump"] += float(info.jump.float().mean())
            step = it + 1
            if step % self.log_every == 0 or step == self.n_steps:
                _sync(dev)
                row = {
                    "step": step,
                    "seconds": ctx.elapsed(),
                    "mean_log_prob": float(state.log_prob.float().mean()),
                }
                if not math.isfinite(row["mean_log_prob"]):
                    raise RuntimeError(f"log-density is not finite at step {step}")
                for k in hist:
                    hist[k].append(row[k])
                ctx.log({**row, "accept_rate": float(info.accept_prob.float().mean())}, step=step)
                bar.set_postfix(logp=f"{row['mean_log_prob']:.1f}")
            if step % self.checkpoint_every == 0 and step < self.n_steps:
                ctx.save_checkpoint(
                    {
                        "x": state.x,
                        "sampler": sampler.state_dict(),
                        "history": hist,
                        "totals": totals,
                    },
                    step=step,
                )
            bar.update(1)
            ctx.maybe_fault(step)
        bar.close()
        seconds = ctx.elapsed()
        name = ctx.choices.get("sampler", type(sampler).__name__)
        series = {name: (hist["step"], hist["mean_log_prob"])}
        fig = side_by_side(
            [
                ("vs steps", series, "step", "mean log p~(x)"),
                ("vs seconds", {name: (hist["seconds"], hist["mean_log_prob"])}, "seconds", ""),
            ],
            title=f"EBM mixing, {ctx.choices.get('dataset', '')} ({ctx.scale})",
        )
        ctx.save_figure(fig, "mean_log_prob", step=self.n_steps)
        if self.n_show:
            show = state.x[: self.n_show].reshape(-1, *model.image_shape).float().cpu().numpy()
            ctx.save_figure(image_grid(show, n_cols=8, title=f"{name}: final chains"), "samples")
        n = self.n_steps
        return {
            "final_mean_log_prob": hist["mean_log_prob"][-1],
            "initial_mean_log_prob": hist["mean_log_prob"][0],
            "accept_rate": totals["accept"] / n,
            "jump": totals["jump"] / n,
            "seconds": seconds,
            "steps_per_second": n / max(seconds - totals["tune_seconds"], 1e-12),
            "tune_steps": totals["tune_steps"],
            "tune_seconds": totals["tune_seconds"],
            "n_steps": n,
            "n_chains": self.n_chains,
            "weights": self.weights,
        }
