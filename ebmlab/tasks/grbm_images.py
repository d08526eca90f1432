"""GRBM image generation (Liao et al. 2022, Sec. 4.2, App. B.2-B.3): MNIST, FashionMNIST,
CelebA-32, CelebA-2K-64 with modified CD, samples generated from noise, FID.

Protocol:

1. Train a GRBM (``model=grbm``) by modified CD (``learner=grbm_cd``) on ``train_split`` for
   ``n_epochs`` epochs of shuffled mini-batches of ``batch_size`` (last partial batch dropped),
   the SGD learning rate cosine-decayed over epochs. ``anneal_step_size`` also cosine-decays the
   sampler's initial step size alpha_0 over epochs ("Anneal alpha_0", Table 3);
   ``mh_off_epochs`` switches the Metropolis test off for the first epochs (FashionMNIST: 1000).
   Logged every epoch: the mean / min / max natural log variance (Fig. 3a), reconstruction
   error, gradient norm, acceptance rate, learning rate.
2. Generate ``n_fid_samples`` images from N(0, I) noise with the training sampler for
   ``sample_steps`` steps (default: the learner's CD steps), displayed as the conditional mean
   W h + mu (App. B), mapped back to pixels in [0, 1].
3. Metrics: ``fid_inception`` (standard FID, only when ``inception_weights`` points to
   torch-fidelity's weight file) and ``fid_<dataset>_features`` (same Frechet distance on the
   features of a small classifier trained by ebmlab on ``feature_train_split`` and cached; NOT
   comparable with Inception FID), both against ``fid_reference_split``; plus
   ``fid_<dataset>_features_data`` (training images vs the reference: the floor at this sample
   size) and the classifier's accuracy on the reference split.
4. Figures: samples (Fig. 3c / 4), intermediate samples of a few chains (Fig. 2), learned
   filters (Fig. 3b), log-variance learning curve (Fig. 3a).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import Tensor

from ebmlab.data.grayscale_images import GrayscaleImages, parse_split
from ebmlab.errors import ConfigError, check
from ebmlab.learning.grbm_cd import sample_from_noise
from ebmlab.metrics.feature_net import (
    accuracy,
    cached_feature_net,
    feature_fid,
    train_feature_net,
)
from ebmlab.metrics.fid import inception_fid
from ebmlab.utils.plotting import curves, image_grid


def _pos_int(v, key: str, allow_zero: bool = False) -> None:
    ok = isinstance(v, int) and not isinstance(v, bool) and (v >= 0 if allow_zero else v >= 1)
    check(ok, key, f"an integer >= {0 if allow_zero else 1} (got {v!r})")


class GRBMImages:
    """Config schema of ``task=grbm_images`` (see the module docstring).

    Args:
        n_epochs, batch_size: training length and mini-batch (MNIST 3000 / 512).
        train_split: images the GRBM learns from ("train", or a slice such as "test[:5000]").
        sample_steps: sampler steps from noise for the generated images (null = cd_steps).
        n_fid_samples: generated images for the FID metrics (0 = no FID).
        fid_reference_split: real images the generated ones are compared with.
        n_fid_real: use the first n reference images (null = all).
        feature_fid: compute ``fid_<dataset>_features`` (needs a labelled dataset).
        feature_train_split: labelled images the feature classifier is trained on.
        feature_epochs, feature_seed: classifier training length and seed (part of its cache key).
        inception_weights: path of ``pt_inception-2015-12-05-6726825d.pth`` (null = skip).
        anneal_step_size: cosine-decay the sampler's alpha_0 to 0 over the epochs (Table 3).
        mh_off_epochs: epochs without the Metropolis test at the start (FashionMNIST 1000).
        checkpoint_every: epochs between checkpoints.
        sample_every: epochs between sample-grid figures during training (0 = only at the end).
        n_show, strip_chains, strip_snapshots: sizes of the sample grid and of Fig. 2's strip.
        cache_dir: where the feature classifier is cached.
        label: free-form row label for tables (e.g. "gl_wo_adjust").
    """

    main_metric = "fid_features"

    def __init__(
        self,
        n_epochs: int = 3000,
        batch_size: int = 512,
        train_split: str = "train",
        sample_steps: int | None = None,
        n_fid_samples: int = 10000,
        fid_reference_split: str = "test",
        n_fid_real: int | None = None,
        feature_fid: bool = True,
        feature_train_split: str = "train",
        feature_epochs: int = 5,
        feature_seed: int = 0,
        inception_weights: str | None = None,
        anneal_step_size: bool = False,
        mh_off_epochs: int = 0,
        checkpoint_every: int = 10,
        sample_every: int = 0,
        n_show: int = 100,
        strip_chains: int = 8,
        strip_snapshots: int = 10,
        cache_dir: str = ".cache/ebmlab",
        label: str = "",
    ):
        for k, v in (
            ("n_epochs", n_epochs),
            ("batch_size", batch_size),
            ("feature_epochs", feature_epochs),
            ("checkpoint_every", checkpoint_every),
            ("n_show", n_show),
            ("strip_chains", strip_chains),
            ("strip_snapshots", strip_snapshots),
        ):
            _pos_int(v, k)
        for k, v in (
            ("n_fid_samples", n_fid_samples),
            ("mh_off_epochs", mh_off_epochs),
            ("sample_every", sample_every),
            ("feature_seed", feature_seed),
        ):
            _pos_int(v, k, allow_zero=True)
        if sample_steps is not None:
            _pos_int(sample_steps, "sample_steps")
        if n_fid_real is not None:
            _pos_int(n_fid_real, "n_fid_real")
            check(n_fid_real >= 2, "n_fid_real", f"at least 2 images (got {n_fid_real})")
        check(
            n_fid_samples == 0 or n_fid_samples >= 2,
            "n_fid_samples",
            f"0 (no FID) or at least 2 (got {n_fid_samples})",
        )
        for k, v in (
            ("train_split", train_split),
            ("fid_reference_split", fid_reference_split),
            ("feature_train_split", feature_train_split),
        ):
            parse_split(v, k)
        self.n_epochs, self.batch_size = n_epochs, batch_size
        self.train_split = train_split
        self.sample_steps = sample_steps
        self.n_fid_samples, self.n_fid_real = n_fid_samples, n_fid_real
        self.fid_reference_split = fid_reference_split
        self.feature_fid = bool(feature_fid)
        self.feature_train_split = feature_train_split
        self.feature_epochs, self.feature_seed = feature_epochs, feature_seed
        self.inception_weights = inception_weights
        self.anneal_step_size = bool(anneal_step_size)
        self.mh_off_epochs = mh_off_epochs
        self.checkpoint_every, self.sample_every = checkpoint_every, sample_every
        self.n_show, self.strip_chains, self.strip_snapshots = n_show, strip_chains, strip_snapshots
        self.cache_dir = Path(cache_dir)
        self.label = label

    # ------------------------------------------------------------------------ setup
    def setup(self, ctx) -> None:
        for group in ("model", "dataset", "sampler", "learner"):
            if not ctx.has(group):
                raise ConfigError(group, f"task grbm_images needs a {group}")
        self.data = ctx.build("dataset")
        if not isinstance(self.data, GrayscaleImages):
            raise ConfigError(
                "dataset",
                "grbm_images needs an image dataset: mnist_gray, fashion_mnist, "
                "celeba32 or celeba2k64",
            )
        self.model = ctx.build("model")
        if not hasattr(self.model, "mean_v_given_h"):
            raise ConfigError("model", "grbm_images needs model=grbm")
        if self.model.n_visible != self.data.dim:
            raise ConfigError(
                "model.n_visible",
                f"{self.model.n_visible} does not match the dataset's dim {self.data.dim} "
                "(model.n_visible defaults to ${dataset.dim})",
            )
        self.sampler = ctx.build("sampler")
        self.learner = ctx.build("learner")
        if not hasattr(self.learner, "negative_samples"):
            raise ConfigError("learner", "grbm_images needs learner=grbm_cd")
        if self.anneal_step_size and not hasattr(self.sampler, "step_size"):
            raise ConfigError("task.anneal_step_size", "the sampler has no step size (Gibbs)")
        if self.n_fid_samples and self.feature_fid and not self.data.has_labels:
            raise ConfigError(
                "task.feature_fid",
                f"needs a labelled dataset to train the feature classifier; {self.data.name} has "
                "no labels: set task.feature_fid=false",
            )
        specs = [self.train_split]
        if self.n_fid_samples:
            specs.append(self.fid_reference_split)
            if self.feature_fid:
                specs.append(self.feature_train_split)
        self.data.check_files(specs)  # FileNotFoundError -> exit 2 with the message
        if self.n_fid_samples and self.inception_weights:
            if not Path(self.inception_weights).is_file():
                raise FileNotFoundError(
                    f"task.inception_weights: {self.inception_weights} does not exist (the "
                    "standard FID weights are never downloaded; set task.inception_weights=null "
                    "to skip Inception FID)"
                )
            try:
                import torch_fidelity  # noqa: F401
            except ImportError:
                raise ConfigError(
                    "task.inception_weights",
                    "Inception FID needs the torch-fidelity package (pip install torch-fidelity)",
                ) from None
        self.main_metric = (
            f"fid_{self.data.name}_features"
            if self.feature_fid and self.data.has_labels
            else "fid_inception"
        )

    # -------------------------------------------------------------------------- run
    def run(self, ctx) -> dict:
        data, model, sampler, learner = self.data, self.model, self.sampler, self.learner
        x_train, _ = data.load(self.train_split, "task.train_split")
        x_train = x_train.to(ctx.device)
        n = x_train.shape[0]
        check(
            n >= self.batch_size,
            "task.batch_size",
            f"{self.batch_size} is larger than the {n} training images",
        )
        init_gen = torch.Generator().manual_seed(int(ctx.cfg.seed))
        model.reset_parameters(init_gen)
        model.to(ctx.device)
        base_step = getattr(sampler, "step_size", None)
        ctx.start_clock()
        start, history = 0, []
        state = ctx.resume(model=model, learner=learner)
        if state is not None:
            start = int(state["_run"]["step"])
            history = list(state.get("history", []))
        bar = ctx.progress(self.n_epochs, initial=start, desc=f"GRBM {data.name}")
        stats: dict[str, float] = {}
        for epoch in range(start, self.n_epochs):
            progress = epoch / self.n_epochs
            if self.anneal_step_size:
                sampler.step_size = base_step * (1.0 + math.cos(math.pi * progress)) / 2.0
            adjust = epoch >= self.mh_off_epochs
            stats = learner.train_epoch(
                model,
                x_train,
                self.batch_size,
                sampler,
                ctx.generator,
                progress,
                adjust,
                preprocess=data.preprocess,
            )
            lv = model.log_var.detach()
            stats.update(
                log_var_mean=float(lv.mean()),
                log_var_min=float(lv.min()),
                log_var_max=float(lv.max()),
                seconds=ctx.elapsed(),
            )
            if self.anneal_step_size:
                stats["step_size"] = float(sampler.step_size)
            step = epoch + 1
            ctx.log(stats, step=step)
            history.append(
                {
                    "epoch": step,
                    "log_var_mean": stats["log_var_mean"],
                    "log_var_min": stats["log_var_min"],
                    "log_var_max": stats["log_var_max"],
                }
            )
            bar.set_postfix(
                log_var=f"{stats['log_var_mean']:.2f}", recon=f"{stats['recon_mse']:.3f}"
            )
            if self.sample_every and step % self.sample_every == 0 and step < self.n_epochs:
                self._sample_grid(ctx, step)
            if step % self.checkpoint_every == 0 or step == self.n_epochs:
                ctx.save_checkpoint(
                    {
                        "model": model.state_dict(),
                        "learner": learner.state_dict(),
                        "history": history,
                    },
                    step=step,
                )
            bar.update(1)
            ctx.maybe_fault(step)
        bar.close()
        if self.anneal_step_size:
            sampler.step_size = base_step
        train_seconds = ctx.elapsed()
        self._figures(ctx, history)
        results = {
            "final_log_var": float(model.log_var.detach().mean()),
            "final_mean_var": float(model.var.detach().mean()),
            "recon_mse": stats.get("recon_mse", float("nan")),
            "accept_rate": stats.get("accept_rate", float("nan")),
            "seconds": train_seconds,
            "n_epochs": self.n_epochs,
            "n_updates": int(learner.n_updates),
            "n_train_images": n,
            "train_split": self.train_split,
        }
        if self.n_fid_samples and (self.inception_weights or self.feature_fid):
            results.update(self._fid(ctx))
        results["total_seconds"] = ctx.elapsed()
        return results

    # ---------------------------------------------------------------------- sampling
    @property
    def _steps(self) -> int:
        return self.sample_steps or self.learner.cd_steps

    def _generate(self, ctx, n: int) -> Tensor:
        """n generated images in [0, 1], [n, C, H, W], in chunks of batch_size chains."""
        out = []
        for s in range(0, n, self.batch_size):
            m = min(self.batch_size, n - s)
            _, shown = sample_from_noise(self.model, self.sampler, m, self._steps, ctx.generator)
            out.append(self.data.to_unit(shown).cpu())
        return torch.cat(out)

    @torch.no_grad()
    def _strip(self, ctx) -> Tensor:
        """Fig. 2: displayed samples of ``strip_chains`` chains at ``strip_snapshots`` steps."""
        model, sampler, steps = self.model, self.sampler, self._steps
        at = sorted(
            {
                max(1, round(steps * (k + 1) / self.strip_snapshots))
                for k in range(self.strip_snapshots)
            }
        )
        v0 = torch.randn(
            (self.strip_chains, model.n_visible), generator=ctx.generator, device=model.W.device
        )
        state = sampler.init(model, v0, horizon=steps)
        snaps = []
        for t in range(1, steps + 1):
            state, _ = sampler.step(model, state, ctx.generator)
            if t in at:
                h = model.sample_h_given_v(state.x, ctx.generator)
                snaps.append(self.data.to_unit(model.mean_v_given_h(h)).cpu())
        return torch.stack(snaps, 1).reshape(-1, *self.data.image_shape)  # row = chain

    def _imgs(self, x: Tensor):
        x = x.cpu()
        return x[:, 0].numpy() if x.shape[1] == 1 else x.permute(0, 2, 3, 1).numpy()

    def _sample_grid(self, ctx, step: int) -> None:
        imgs = self._generate(ctx, self.n_show)
        name = self.data.name
        fig = image_grid(self._imgs(imgs), n_cols=10, title=f"GRBM samples, {name}, epoch {step}")
        ctx.save_figure(fig, f"samples_epoch{step}", step=step)

    def _figures(self, ctx, history: list[dict]) -> None:
        name, step = self.data.name, self.n_epochs
        fig = image_grid(self._imgs(self._generate(ctx, self.n_show)), 10, f"GRBM samples, {name}")
        ctx.save_figure(fig, "samples", step=step)
        strip = self._strip(ctx)
        fig = image_grid(
            self._imgs(strip),
            n_cols=strip.shape[0] // self.strip_chains,
            title=f"Intermediate samples ({self._steps} steps), {name}",
        )
        ctx.save_figure(fig, "intermediate_samples", step=step)
        w = self.model.W.detach().T[: self.n_show].cpu()  # [k, D]
        lo, hi = w.min(1, keepdim=True).values, w.max(1, keepdim=True).values
        filt = ((w - lo) / (hi - lo).clamp_min(1e-12)).reshape(-1, *self.data.image_shape)
        ctx.save_figure(
            image_grid(self._imgs(filt), 10, f"Learned filters, {name}"), "filters", step
        )
        if history:
            ep = [r["epoch"] for r in history]
            series = {
                k.replace("log_var_", ""): (ep, [r[k] for r in history])
                for k in ("log_var_mean", "log_var_min", "log_var_max")
            }
            fig = curves(series, "epoch", "log variance", f"Learning curve of log variance, {name}")
            ctx.save_figure(fig, "log_var", step=step)

    # --------------------------------------------------------------------------- FID
    def _fid(self, ctx) -> dict:
        data = self.data
        real_u8, _ = data.load(self.fid_reference_split, "task.fid_reference_split")
        if self.n_fid_real is not None:
            real_u8 = real_u8[: self.n_fid_real]
        real = real_u8.float() / 255.0
        fake = self._generate(ctx, self.n_fid_samples)
        out = {
            "n_fid_samples": self.n_fid_samples,
            "n_fid_real": int(real.shape[0]),
            "fid_reference_split": self.fid_reference_split,
            "sample_steps": self._steps,
        }
        if self.inception_weights:
            out["fid_inception"] = inception_fid(
                real, fake, self.inception_weights, device=ctx.device
            )
        if self.feature_fid and data.has_labels:
            net, info, cached = self._feature_net(ctx)
            name = f"fid_{data.name}_features"
            out[name], backend = feature_fid(net, real, fake)
            train_u8, _ = data.load(self.train_split)
            g = torch.Generator().manual_seed(self.feature_seed)
            pick = torch.randperm(train_u8.shape[0], generator=g)[: self.n_fid_samples]
            out[f"{name}_data"], _ = feature_fid(net, real, train_u8[pick].float() / 255.0)
            _, real_labels = data.load(self.fid_reference_split)
            if self.n_fid_real is not None:
                real_labels = real_labels[: self.n_fid_real]
            out["feature_net_accuracy"] = accuracy(net, real, real_labels)
            out["feature_train_split"] = self.feature_train_split
            out["feature_net_cached"] = cached
            out["fid_backend"] = backend
        return out

    def _feature_net(self, ctx):
        data = self.data
        x, y = data.load(self.feature_train_split, "task.feature_train_split")
        key = {
            "dataset": data.name,
            "split": self.feature_train_split,
            "n": int(x.shape[0]),
            "n_subset": data.n_subset,
            "subset_seed": data.subset_seed,
            "epochs": self.feature_epochs,
            "seed": self.feature_seed,
            "arch": "FeatureNet(width=16, feature_dim=128)",
            "optim": "adam 1e-3 batch 128",
        }

        def fit():
            g = torch.Generator().manual_seed(self.feature_seed)
            net = train_feature_net(
                x.float() / 255.0, y, g, epochs=self.feature_epochs, device=ctx.device
            )
            return net, {"train_accuracy": accuracy(net, x.float() / 255.0, y)}

        return cached_feature_net(self.cache_dir, key, fit, device=ctx.device)
