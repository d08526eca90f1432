"""RBM sampling (DLP Fig. 4; ACS Fig. 4, 6 and 9): log-MMD to block-Gibbs ground truth.

Protocol (PROTOCOLS.md "RBM sampling"):

1. A 784 x 500 Bernoulli RBM is trained by CD-k (``learner=cd``: CD-10, Adam 1e-3, batch 100,
   one pass in DLP) on the chosen split and cached under ``${paths.cache}`` keyed by its
   training config.
2. Ground truth: ``gt_n_ref + gt_n_floor`` (500 + 100) block-Gibbs chains from
   Bernoulli(data mean), ``gt_steps`` (10,000) sweeps each; cached too. The 100 extra samples
   give the ground-truth-vs-ground-truth floor drawn on every plot.
3. ``n_chains`` (100) test chains of the configured sampler start from one shared initial
   state: ``init=random`` draws them from Bernoulli(data mean); ``init=mode`` (ACS Fig. 6)
   takes training images of the class with the highest mean RBM log-likelihood.
4. Every ``eval_every`` steps: log MMD^2 (kernel exp(-Hamming/d), biased V-statistic) of the
   current chains against the 500 references, against steps and against wall-clock seconds
   of sampling (evaluation time excluded). Also acceptance, Hamming jump and evaluations per
   step; at the end ESS (per-dimension ESS after ``burn_in``, averaged over dimensions, for
   the first ``ess_chains`` chains) and image grids.

Samplers with a ``tune`` method (ACS) are tuned first from the same initial state; the
tuning cost is reported (``tune_steps``, ``tune_seconds``) and included in the seconds axis.

``python -m ebmlab.tasks.rbm_sampling figure SWEEP_DIR --out PNG`` draws one comparison
figure per dataset (every sampler, both initialisations, with the floor).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import tempfile
import time
from pathlib import Path

import torch
from torch import Tensor

from ebmlab.errors import ConfigError, check
from ebmlab.learning.cd import cached_rbm, config_hash, train_rbm_cd
from ebmlab.metrics.ess import ess_per_dim
from ebmlab.metrics.mmd import mmd2_exp_hamming
from ebmlab.models.rbm import BernoulliRBM, best_class_by_log_prob

log = logging.getLogger(__name__)

INITS = ("random", "mode")
TRAIN_SPLITS = ("train", "test", "available")


class CDTraining:
    """Settings of the CD-k training of the target RBM (``learner=cd``; DLP App. I.3).

    Args:
        k: block-Gibbs sweeps per negative sample (DLP 10; ACS paper text 100).
        n_epochs: passes over the training split (DLP: 1); used when ``n_iters`` is 0.
        n_iters: optimiser steps instead of epochs (ACS code: 1000); 0 = use ``n_epochs``.
        batch_size, lr: Adam mini-batch and learning rate (DLP: 100, 1e-3).
        seed: seed of the training generator (part of the cache key).
        init_visible_bias: b = logit(clamp(data mean, .01, .99)) before training.
    """

    def __init__(
        self,
        k: int = 10,
        n_epochs: int = 1,
        n_iters: int = 0,
        batch_size: int = 100,
        lr: float = 1e-3,
        seed: int = 0,
        init_visible_bias: bool = True,
    ):
        check(k >= 1, "k", f"must be >= 1 (got {k})")
        check(n_epochs >= 1, "n_epochs", f"must be >= 1 (got {n_epochs})")
        check(n_iters >= 0, "n_iters", f"must be >= 0 (0 = use n_epochs) (got {n_iters})")
        check(batch_size >= 1, "batch_size", f"must be >= 1 (got {batch_size})")
        check(lr > 0, "lr", f"must be > 0 (got {lr})")
        check(seed >= 0, "seed", f"must be >= 0 (got {seed})")
        self.k, self.n_epochs, self.n_iters = k, n_epochs, n_iters
        self.batch_size, self.lr, self.seed = batch_size, float(lr), seed
        self.init_visible_bias = init_visible_bias

    def key(self) -> dict:
        return {
            "k": self.k,
            "n_epochs": self.n_epochs if self.n_iters == 0 else None,
            "n_iters": self.n_iters or None,
            "batch_size": self.batch_size,
            "lr": self.lr,
            "seed": self.seed,
            "init_visible_bias": self.init_visible_bias,
        }

    def train(self, model: BernoulliRBM, x: Tensor, binarize: str, progress: bool) -> None:
        gen = torch.Generator(device=model.W.device).manual_seed(self.seed)
        train_rbm_cd(
            model,
            x,
            k=self.k,
            n_iters=self.n_iters or None,
            n_epochs=None if self.n_iters else self.n_epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            generator=gen,
            progress=progress,
            binarize=binarize,
            init_visible_bias=self.init_visible_bias,
        )


# ------------------------------------------------------------------------------ shared helpers


def resolve_train_split(dataset, train_split: str) -> str:
    """``train`` | ``test`` as asked; ``available``: train when its files exist, else test."""
    if train_split != "available":
        return train_split
    try:
        dataset.check_files(["train"])
        return "train"
    except FileNotFoundError:
        log.warning(
            "%s: training files absent; training the RBM on the TEST split (declared in results)",
            dataset.name,
        )
        return "test"


def binary_split(dataset, split: str, key: str = "dataset.binarize"):
    """The split, refusing dynamic (grayscale) data: RBM tasks use fixed binary images."""
    s = dataset.split(split)
    if s.binarize == "dynamic":
        raise ConfigError(
            key,
            f"RBM tasks need fixed binary images; {dataset.name} is dynamic here "
            "(use dataset.binarize=threshold)",
        )
    return s


def rbm_cache_key(ctx, dataset, split: str, cd: CDTraining) -> dict:
    m = ctx.cfg.model
    return {
        "kind": "rbm_cd",
        "dataset": dataset.name,
        "binarize": dataset.binarize,
        "n_valid": dataset.n_valid,
        "split": split,
        "n_visible": int(m.n_visible),
        "n_hidden": int(m.n_hidden),
        "init_std": float(m.init_std),
        "init_seed": int(m.init_seed),
        "cd": cd.key(),
    }


def _atomic_save(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@torch.no_grad()
def ground_truth_samples(
    model: BernoulliRBM,
    data_mean: Tensor,
    n: int,
    n_steps: int,
    seed: int,
    cache_path: Path | None,
    progress: bool = False,
) -> Tensor:
    """``n`` block-Gibbs samples after ``n_steps`` sweeps from Bernoulli(data mean), float
    [n, V]; loaded from / saved to ``cache_path`` (uint8) when given."""
    dev = model.W.device
    if cache_path is not None and cache_path.is_file():
        blob = torch.load(cache_path, map_location="cpu", weights_only=True)
        return blob["samples"].to(dev, torch.float32)
    gen = torch.Generator(device=dev).manual_seed(seed)
    p = data_mean.to(dev).expand(n, -1)
    v = (torch.rand(p.shape, generator=gen, device=dev) < p).float()
    from tqdm.auto import tqdm

    for _ in tqdm(range(n_steps), desc="ground truth (block Gibbs)", disable=not progress):
        v = model.sample_v(model.sample_h(v, gen), gen)
    if cache_path is not None:
        _atomic_save({"samples": v.to(torch.uint8).cpu(), "n_steps": n_steps}, cache_path)
    return v


def mode_init_states(
    model: BernoulliRBM, x: Tensor, labels: Tensor, n: int, generator: torch.Generator
) -> tuple[int, Tensor, Tensor]:
    """ACS mode initialisation: (class, mean log p~ per class, n images of that class drawn
    with replacement when the class has fewer than n, else without)."""
    cls, means = best_class_by_log_prob(model, x, labels)
    idx = torch.nonzero(labels == cls).flatten()
    g_dev = generator.device
    if idx.numel() >= n:
        pick = idx[torch.randperm(idx.numel(), generator=generator, device=g_dev).cpu()[:n]]
    else:
        pick = idx[torch.randint(0, idx.numel(), (n,), generator=generator, device=g_dev).cpu()]
    return cls, means, x[pick.to(x.device)]


def _log(v: float) -> float:
    return math.log(max(float(v), 1e-300))


# ------------------------------------------------------------------------------ the task


class RBMSampling:
    main_metric = "log_mmd"

    def __init__(
        self,
        n_chains: int = 100,
        n_steps: int = 5000,
        eval_every: int = 10,
        init: str = "random",
        train_split: str = "train",
        gt_steps: int = 10000,
        gt_n_ref: int = 500,
        gt_n_floor: int = 100,
        gt_seed: int = 0,
        burn_in: float = 0.1,
        ess_chains: int = 1,
        checkpoint_every: int = 1000,
        n_show: int = 100,
        cache_dir: str = ".cache/ebmlab",
    ):
        check(n_chains >= 1, "n_chains", f"must be >= 1 (got {n_chains})")
        check(n_steps >= 4, "n_steps", f"must be >= 4 (got {n_steps})")
        check(eval_every >= 1, "eval_every", f"must be >= 1 (got {eval_every})")
        check(init in INITS, "init", f"must be one of {list(INITS)} (got {init!r})")
        check(
            train_split in TRAIN_SPLITS,
            "train_split",
            f"must be one of {list(TRAIN_SPLITS)} (got {train_split!r})",
        )
        check(gt_steps >= 1, "gt_steps", f"must be >= 1 (got {gt_steps})")
        check(gt_n_ref >= 1, "gt_n_ref", f"must be >= 1 (got {gt_n_ref})")
        check(gt_n_floor >= 1, "gt_n_floor", f"must be >= 1 (got {gt_n_floor})")
        check(0 <= burn_in < 1, "burn_in", f"must be a fraction in [0, 1) (got {burn_in})")
        check(
            1 <= ess_chains <= n_chains,
            "ess_chains",
            f"must be in [1, n_chains={n_chains}] (got {ess_chains})",
        )
        check(
            n_steps - int(burn_in * n_steps) >= 4,
            "burn_in",
            f"leaves fewer than 4 steps for ESS (n_steps={n_steps}, burn_in={burn_in})",
        )
        check(checkpoint_every >= 1, "checkpoint_every", f"must be >= 1 (got {checkpoint_every})")
        check(n_show >= 0, "n_show", f"must be >= 0 (got {n_show})")
        self.n_chains, self.n_steps, self.eval_every = n_chains, n_steps, eval_every
        self.init, self.train_split = init, train_split
        self.gt_steps, self.gt_n_ref, self.gt_n_floor, self.gt_seed = (
            gt_steps,
            gt_n_ref,
            gt_n_floor,
            gt_seed,
        )
        self.burn_in, self.ess_chains = burn_in, ess_chains
        self.checkpoint_every, self.n_show = checkpoint_every, n_show
        self.cache_dir = Path(cache_dir)

    # -------------------------------------------------------------------------- setup
    def setup(self, ctx) -> None:
        for group in ("dataset", "model", "sampler", "learner"):
            if not ctx.has(group):
                raise ConfigError(group, f"rbm_sampling needs a {group}")
        self.data = ctx.build("dataset")
        if ctx.cfg.model._target_ != "ebmlab.models.rbm.BernoulliRBM":
            raise ConfigError("model", "rbm_sampling needs model=rbm")
        if int(ctx.cfg.model.n_visible) != self.data.dim:
            raise ConfigError(
                "model.n_visible",
                f"must equal the dataset dimension {self.data.dim} (got {ctx.cfg.model.n_visible})",
            )
        self.cd = ctx.build("learner")
        if not isinstance(self.cd, CDTraining):
            raise ConfigError("learner", "rbm_sampling trains its target RBM with learner=cd")
        self.split = resolve_train_split(self.data, self.train_split)
        self.data.check_files([self.split])  # missing files fail here, before compute
        self.sampler = ctx.build("sampler")
        if getattr(self.sampler, "tune_enabled", False) and hasattr(
            self.sampler, "resolve_tune_budget"
        ):
            try:
                self.sampler.resolve_tune_budget(self.n_steps)  # ACS: budget fits the run
            except ConfigError as e:
                raise e.prefixed("sampler") from None
        if self.init == "mode":
            labels = binary_split(self.data, self.split).labels
            if labels is None:
                raise ConfigError(
                    "task.init",
                    f"mode initialisation needs class labels and {self.data.name} has none; "
                    "use task.init=random or a labelled dataset (mnist_threshold, emnist, "
                    "kmnist, omniglot, caltech)",
                )

    def _target_rbm(self, ctx, train) -> BernoulliRBM:
        key = rbm_cache_key(ctx, self.data, self.split, self.cd)

        def fit() -> BernoulliRBM:
            model = ctx.build("model").to(ctx.device)
            self.cd.train(model, train.x.to(ctx.device), train.binarize, bool(ctx.cfg.progress))
            return model

        model = cached_rbm(key, fit, self.cache_dir, device=ctx.device)
        for p in model.parameters():
            p.requires_grad_(False)
        return model

    # -------------------------------------------------------------------------- run
    def run(self, ctx) -> dict:
        from ebmlab.utils.plotting import image_grid

        g, dev = ctx.generator, ctx.device
        train = binary_split(self.data, self.split)
        model = self._target_rbm(ctx, train)
        data_mean = train.x.mean(0).to(dev)
        key = rbm_cache_key(ctx, self.data, self.split, self.cd)
        gt_key = {
            "rbm": config_hash(key),
            "n": self.gt_n_ref + self.gt_n_floor,
            "steps": self.gt_steps,
            "seed": self.gt_seed,
        }
        gt = ground_truth_samples(
            model,
            data_mean,
            self.gt_n_ref + self.gt_n_floor,
            self.gt_steps,
            self.gt_seed,
            self.cache_dir / f"rbm_gt-{config_hash(gt_key)}.pt",
            bool(ctx.cfg.progress),
        )
        ref, floor_set = gt[: self.gt_n_ref], gt[self.gt_n_ref :]
        log_floor = _log(mmd2_exp_hamming(floor_set, ref))

        # shared initial state: drawn from ctx.generator before any sampler randomness
        extra: dict = {}
        if self.init == "random":
            p = data_mean.expand(self.n_chains, -1)
            x0 = (torch.rand(p.shape, generator=g, device=dev) < p).float()
        else:
            cls, means, x0 = mode_init_states(
                model, train.x.to(dev), train.labels, self.n_chains, g
            )
            extra = {"mode_class": cls, "mode_class_log_prob": float(means[cls])}
            log.info("mode init: class %d (mean log p~ %.2f)", cls, float(means[cls]))

        sampler, n, k_ess = self.sampler, self.n_steps, self.ess_chains
        check_model = getattr(sampler, "check_model", None)
        if check_model is not None:
            check_model(model)
        state = sampler.init(model, x0)
        trace = torch.zeros(n, k_ess, x0.shape[1], dtype=torch.uint8, device=dev)
        hist = {"step": [], "seconds": [], "log_mmd": []}
        totals = {"accept": 0.0, "jump": 0.0, "n_log_prob": 0, "n_grad": 0, "sample_seconds": 0.0}
        tune_info = {"tune_steps": 0, "tune_seconds": 0.0}
        start = 0
        ctx.start_clock()
        ck = ctx.load_checkpoint()
        if ck is not None:
            state = state.replace(x=ck["x"], log_prob=ck["log_prob"], grad=ck["grad"])
            state.extra = {}
            sampler.load_state_dict(ck["sampler"])
            start, trace, hist = ck["_run"]["step"], ck["trace"], ck["hist"]
            totals, tune_info = ck["totals"], ck["tune_info"]
        elif getattr(sampler, "tune_enabled", False) and hasattr(sampler, "tune"):
            t0 = _now(dev)
            state, res = sampler.tune(model, state, g, n)
            tune_info = {
                "tune_steps": int(res.n_steps),
                "tune_seconds": _now(dev) - t0,
                "alpha_max": float(res.alpha_max),
                "alpha_min": float(res.alpha_min),
            }
            totals["sample_seconds"] += tune_info["tune_seconds"]

        def evaluate(step: int, info=None) -> None:
            lm = _log(mmd2_exp_hamming(state.x, ref))
            hist["step"].append(step)
            hist["seconds"].append(totals["sample_seconds"])
            hist["log_mmd"].append(lm)
            row = {"log_mmd": lm, "log_mmd_floor": log_floor, "seconds": totals["sample_seconds"]}
            if info is not None:
                row.update(info.scalars())
            ctx.log(row, step=step)

        if start == 0:
            evaluate(0)
        bar = ctx.progress(n, initial=start, desc=f"RBM sampling ({ctx.choices.get('sampler')})")
        t0 = _now(dev)
        for t in range(start, n):
            state, info = sampler.step(model, state, g)
            trace[t] = state.x[:k_ess].to(torch.uint8)
            totals["accept"] += float(info.accept_prob.float().mean())
            totals["jump"] += float(info.jump.float().mean())
            totals["n_log_prob"] += info.n_log_prob
            totals["n_grad"] += info.n_grad
            step = t + 1
            if step % self.eval_every == 0 or step == n:
                totals["sample_seconds"] += _now(dev) - t0
                evaluate(step, info)
                bar.set_postfix(log_mmd=f"{hist['log_mmd'][-1]:.3f}")
                if step % self.checkpoint_every == 0 and step < n:
                    ctx.save_checkpoint(
                        {
                            "x": state.x,
                            "log_prob": state.log_prob,
                            "grad": state.grad,
                            "sampler": sampler.state_dict(),
                            "trace": trace,
                            "hist": hist,
                            "totals": totals,
                            "tune_info": tune_info,
                        },
                        step=step,
                    )
                t0 = _now(dev)
            bar.update(1)
            ctx.maybe_fault(step)
        bar.close()

        b = int(self.burn_in * n)
        ess = float(ess_per_dim(trace[b:].float()).mean())
        sec = totals["sample_seconds"]
        samp = max(sec - tune_info["tune_seconds"], 1e-12)  # sampling only, tuning excluded
        name = ctx.choices.get("sampler", "")
        title = f"{self.data.name} ({self.split} split), init={self.init}, {ctx.scale}"
        ctx.save_figure(
            comparison_figure(
                {name: (hist["step"], hist["seconds"], hist["log_mmd"])}, log_floor, title
            ),
            "log_mmd",
            step=n,
        )
        if self.n_show:
            shape = tuple(self.data.image_shape)
            show = state.x[: self.n_show].reshape(-1, *shape).cpu().numpy()
            ctx.save_figure(image_grid(show, title=f"{name}: final chains"), "samples", step=n)
            gts = ref[: self.n_show].reshape(-1, *shape).cpu().numpy()
            ctx.save_figure(image_grid(gts, title="block Gibbs ground truth"), "ground_truth", n)
            x0s = x0[: self.n_show].reshape(-1, *shape).cpu().numpy()
            ctx.save_figure(image_grid(x0s, title=f"initial states ({self.init})"), "init", n)
        tail = hist["log_mmd"][-max(1, len(hist["log_mmd"]) // 10) :]
        return {
            "log_mmd": hist["log_mmd"][-1],
            "log_mmd_tail_mean": sum(tail) / len(tail),  # last 10% of evaluations
            "log_mmd_floor": log_floor,
            "ess": ess,
            "ess_per_second": ess / (samp * (n - b) / n),  # post-burn-in share of the time
            "accept_rate": totals["accept"] / n,
            "jump": totals["jump"] / n,
            "log_prob_evals_per_step": totals["n_log_prob"] / n,
            "grad_evals_per_step": totals["n_grad"] / n,
            "seconds": sec,
            "seconds_per_step": samp / n,
            "train_split": self.split,
            "rbm_cached": bool(getattr(model, "loaded_from_cache", False)),
            **tune_info,
            **extra,
        }


def _now(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


# ------------------------------------------------------------------------------ figures


def comparison_figure(series: dict, log_floor: float | None, title: str = "", axes=None):
    """log-MMD against steps and seconds; series[label] = (steps, seconds, log_mmd)."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig = None
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(10.4, 3.8))
    for label, (steps, secs, lm) in series.items():
        axes[0].plot(np.asarray(steps), np.asarray(lm), label=label)
        axes[1].plot(np.asarray(secs), np.asarray(lm), label=label)
    for ax, xl in zip(axes, ("step", "seconds")):
        if log_floor is not None:
            ax.axhline(log_floor, color="k", ls="--", lw=1, label="ground truth floor")
        ax.set_xlabel(xl)
        ax.set_ylabel("log MMD$^2$")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_title(f"{title}: vs steps" if title else "vs steps", fontsize=9)
    axes[1].set_title("vs wall-clock seconds", fontsize=9)
    if fig is not None:
        fig.tight_layout()
    return fig


def sweep_figure(sweep_dirs: list[Path], title: str = ""):
    """One row per initialisation, every sampler's mean curve (over seeds), floor dashed."""
    import matplotlib.pyplot as plt
    import numpy as np

    from ebmlab.report import collect, group_runs
    from ebmlab.utils.logging import read_metrics

    runs = [r for d in sweep_dirs for r in collect(d)]
    if not runs:
        raise SystemExit(f"no results.json under {', '.join(map(str, sweep_dirs))}")
    inits = sorted({r["overrides"].get("task.init", "random") for r in runs})
    fig, axes = plt.subplots(len(inits), 2, figsize=(10.4, 3.8 * len(inits)), squeeze=False)
    for row, init in zip(axes, inits):
        sub = [r for r in runs if r["overrides"].get("task.init", "random") == init]
        series, floors = {}, []
        for (sampler,), members in group_runs(sub, ["sampler"]).items():
            curves = []
            for r in members:
                rows = [m for m in read_metrics(r["run_dir"] / "metrics.jsonl") if "log_mmd" in m]
                curves.append([(m["step"], m["seconds"], m["log_mmd"]) for m in rows])
                floors.append(r["metrics"]["log_mmd_floor"])
            m = min(len(c) for c in curves)
            arr = np.array([c[:m] for c in curves], float).mean(0)
            series[sampler] = (arr[:, 0], arr[:, 1], arr[:, 2])
        split = sorted({str(r["metrics"].get("train_split")) for r in sub})
        t = f"{title} init={init} (RBM trained on {'/'.join(split)})"
        comparison_figure(series, float(np.mean(floors)) if floors else None, t, axes=row)
    fig.tight_layout()
    return fig


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="RBM sampling comparison figure from a sweep")
    ap.add_argument("command", choices=["figure"])
    ap.add_argument("sweep_dir", type=Path, nargs="+")
    ap.add_argument("--title", default="")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    import matplotlib.pyplot as plt

    fig = sweep_figure(a.sweep_dir, a.title)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    print(f"figure: {a.out}")


if __name__ == "__main__":
    main()
