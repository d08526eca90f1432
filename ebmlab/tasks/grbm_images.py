"""GRBM image generation (Liao et al. 2022, Sec. 4.2, App. B.2-B.3): MNIST, FashionMNIST,
CelebA-32, CelebA-2K-64 with modified CD, samples generated from noise, FID.

1. Train a GRBM (``model=grbm``) by modified CD (``learner=grbm_cd``, which holds the batch,
   the epochs and the FashionMNIST Metropolis-off warm-up) on ``train_split``; one loop step
   is one epoch. ``anneal_step_size`` cosine-decays the sampler's alpha_0 over the epochs
   (Table 3). Evaluated: the mean / min / max natural log variance (Fig. 3a).
2. Generate ``n_fid_samples`` images from N(0, I) (``sample_steps`` steps of the training
   sampler, chains in chunks of the learner's batch), shown as the conditional mean W h + mu.
3. Against ``fid_reference_split``: ``fid_inception`` (standard FID, only from local
   ``inception_weights``) and ``fid_<dataset>_features`` (a small classifier's features,
   ``feature_net``; NOT comparable with Inception FID), see :mod:`ebmlab.metrics.image_fid`.
4. Figures: samples (Fig. 3c / 4), intermediate samples (Fig. 2), filters (Fig. 3b),
   log-variance curve (Fig. 3a).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from hydra.utils import get_object
from torch import Tensor

from ebmlab.core.loop import LoopTask, Requirement
from ebmlab.core.protocols import Kernel
from ebmlab.data.grayscale_images import GrayscaleImages, parse_split
from ebmlab.errors import ConfigError, check, check_at_least
from ebmlab.learning.epochs import run_epoch
from ebmlab.learning.grbm_cd import GRBMModifiedCD, cosine_lr
from ebmlab.learning.grbm_sampling import generate, intermediate_samples
from ebmlab.metrics.image_fid import FeatureNetSpec, check_fid_inputs, image_fid
from ebmlab.models.grbm import GRBM
from ebmlab.plotting import grbm_images as figures


@dataclass
class Parts:
    data: GrayscaleImages
    model: GRBM
    sampler: Kernel
    learner: GRBMModifiedCD
    n_train: int
    base_step: float  # the sampler's alpha_0 (annealed per epoch when anneal_step_size)
    last: dict = field(default_factory=dict)  # the last epoch's averaged update scalars


@dataclass
class GRBMImages(LoopTask):
    """``task=grbm_images`` (conf/task/grbm_images.yaml documents every key)."""

    progress_desc = "GRBM images"
    requires = {
        "dataset": Requirement(
            GrayscaleImages, "mnist_gray, fashion_mnist, celeba32 or celeba2k64"
        ),
        "model": Requirement(GRBM, "model=grbm", {"n_visible": "dataset.dim"}),
        "sampler": Requirement(),
        "learner": Requirement(GRBMModifiedCD, "learner=grbm_cd", {"n_epochs": "run.n_steps"}),
    }
    checkpoint_keys = ("model", "learner", "last")
    periods = ("sample_every",)
    train_split: str
    sample_steps: int
    n_fid_samples: int
    fid_reference_split: str
    n_fid_real: int | None
    feature_fid: bool
    feature_net: FeatureNetSpec
    inception_weights: str | None
    anneal_step_size: bool
    sample_every: int
    n_show: int
    strip_chains: int
    strip_snapshots: int
    cache_dir: str
    label: str

    def __post_init__(self):
        check_at_least(vars(self), (("sample_steps n_show strip_chains strip_snapshots", 1),))
        n, n_real = self.n_fid_samples, self.n_fid_real
        check(n == 0 or n >= 2, "n_fid_samples", f"0 (no FID) or at least 2 (got {n})")
        check(n_real is None or n_real >= 2, "n_fid_real", f"null or >= 2 (got {n_real})")
        parse_split(self.train_split, "train_split")
        parse_split(self.fid_reference_split, "fid_reference_split")
        parse_split(self.feature_net.train_split, "feature_net.train_split")

    def memory_estimate(self, cfg) -> dict[str, int]:
        d, h, lc = int(cfg.dataset.dim), int(cfg.model.n_hidden), cfg.learner
        neg, fid = int(lc.cd_steps) * int(lc.batch_size) * (d + h) * 4, self.n_fid_samples * d * 8
        return {"negatives": neg, "weights": 3 * d * h * 4, "fid_samples": fid}  # W, grad, new W

    def check_config(self, cfg) -> None:
        annealable = getattr(get_object(cfg.sampler._target_), "anneals_step_size", False)
        if self.anneal_step_size and not annealable:
            raise ConfigError("task.anneal_step_size", "the sampler has no step size (Gibbs)")

    def build(self, ctx) -> Parts:
        data, model = ctx.build("dataset"), ctx.build("model")
        sampler, learner = ctx.build("sampler"), ctx.build("learner")
        spec = self.feature_net if self.feature_fid else None
        args = (self.fid_reference_split, spec, self.inception_weights, self.n_fid_samples)
        check_fid_inputs(data, self.train_split, *args)  # FileNotFoundError: exit 2
        labelled_fid = self.feature_fid and data.has_labels
        self.main_metric = f"fid_{data.name}_features" if labelled_fid else "fid_inception"
        x_train, _ = data.load(self.train_split, "task.train_split")
        x_train = x_train.to(ctx.device)
        model.reset_parameters(torch.Generator().manual_seed(int(ctx.cfg.seed)))
        model.to(ctx.device)
        learner.setup(model, x_train, ctx.generator, sampler, lambda b, g: data.preprocess(b))
        base = sampler.step_size if getattr(sampler, "anneals_step_size", False) else 0.0
        return Parts(data, model, sampler, learner, x_train.shape[0], base)

    def step(self, p: Parts, step: int, ctx) -> dict:
        if self.anneal_step_size:
            p.sampler.step_size = cosine_lr(p.base_step, p.learner.epoch / p.learner.n_epochs)
        p.last = run_epoch(p.learner, p.model, ctx.generator)
        return p.last

    def evaluate(self, p: Parts, step: int, ctx) -> dict:
        lv = p.model.log_var.detach()  # Fig. 3a
        out = {f"log_var_{k}": float(getattr(lv, k)()) for k in ("mean", "min", "max")}
        if self.anneal_step_size:
            out["step_size"] = float(p.sampler.step_size)
        if self.sample_every and step % self.sample_every == 0 and step < p.learner.n_epochs:
            title = f"GRBM samples, {p.data.name}, epoch {step}"
            fig = figures.images_figure(self._generate(p, self.n_show, ctx), 10, title)
            ctx.save_figure(fig, f"samples_epoch{step}", step)
        return out

    def finish(self, p: Parts, history, ctx) -> dict:
        seconds, n = ctx.elapsed(), p.learner.n_epochs
        if self.anneal_step_size:
            p.sampler.step_size = p.base_step
        shown, k, to_unit = self._generate(p, self.n_show, ctx), self.strip_chains, p.data.to_unit
        args = (k, self.sample_steps, self.strip_snapshots, ctx.generator, to_unit)
        strip = intermediate_samples(p.model, p.sampler, *args)
        args = (p.model.W, p.data.image_shape, history, p.data.name, self.sample_steps)
        ctx.save_figures(figures.run_figures(shown, strip, *args), n)
        results = {
            "final_log_var": float(p.model.log_var.detach().mean()),
            "final_mean_var": float(p.model.var.detach().mean()),
            "recon_mse": float(p.last["recon_mse"]),
            "accept_rate": float(p.last["accept_rate"]),
            "seconds": seconds,
            "n_epochs": n,
            "n_updates": int(p.learner.n_updates),
            "n_train_images": p.n_train,
            "train_split": self.train_split,
        }
        if self.n_fid_samples and (self.inception_weights or self.feature_fid):
            results.update(n_fid_samples=self.n_fid_samples, sample_steps=self.sample_steps)
            fake, spec = self._generate(p, self.n_fid_samples, ctx), self.feature_fid
            results.update(image_fid(
                p.data, fake, self.fid_reference_split, self.n_fid_real, self.inception_weights,
                self.feature_net if spec else None, self.train_split, self.cache_dir, ctx.device,
            ))  # fmt: skip
        return {**results, "total_seconds": ctx.elapsed()}

    def _generate(self, p: Parts, n: int, ctx) -> Tensor:
        """``n`` images in [0, 1] on the CPU, chains run ``learner.batch_size`` at a time."""
        m, s, bs = p.model, p.sampler, p.learner.batch_size
        return generate(m, s, n, self.sample_steps, bs, ctx.generator, p.data.to_unit)
