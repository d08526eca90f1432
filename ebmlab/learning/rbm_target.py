"""The target RBM of the RBM sampling benchmark (DLP Sec. 7.2, App. I.3; ACS Sec. 6.1.1):
trained by CD-k and cached, its block-Gibbs ground truth (cached too), and the ACS mode
initialisation (ACS Fig. 6).

Caches live in one folder, keyed by a hash of everything that determines their content:
``rbm-<hash>.pt`` (weights) and ``rbm_gt-<hash>.pt`` (ground-truth samples as uint8). Files
are written atomically and read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ebmlab.errors import ConfigError, check
from ebmlab.learning.cd import CD
from ebmlab.metrics.mmd import log_mmd2_exp_hamming
from ebmlab.models.rbm import BernoulliRBM, best_class_by_log_prob
from ebmlab.utils.cache import load_cached, save_cached

log = logging.getLogger(__name__)

TRAIN_SPLITS = ("train", "test", "available")


def config_hash(cfg: dict) -> str:
    """Stable short hash of a JSON-serialisable config (keys sorted)."""
    blob = json.dumps(cfg, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def cached_rbm(
    cfg: dict, train_fn: Callable[[], BernoulliRBM], cache_dir: str | Path, device=None
) -> tuple[BernoulliRBM, bool]:
    """(the RBM trained under ``cfg``, whether it came from the cache): loaded from
    ``cache_dir/rbm-<hash(cfg)>.pt`` when present, else ``train_fn()`` is called and its
    result saved there. ``cfg`` must hold everything that determines the trained weights
    (model size and init, dataset name/split/binarisation, CD settings, seed)."""
    path = Path(cache_dir) / f"rbm-{config_hash(cfg)}.pt"
    blob = load_cached(path, map_location=device or "cpu")
    if blob is not None:
        # init values are placeholders: the saved state dict replaces every parameter
        model = BernoulliRBM(int(blob["n_visible"]), int(blob["n_hidden"]), 0.0, 0)
        model.load_state_dict(blob["state_dict"])
        log.info("loaded cached RBM %s", path)
        return (model.to(device) if device is not None else model), True
    model = train_fn()
    blob = {
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "n_visible": model.n_visible,
        "n_hidden": model.n_hidden,
        "config": json.dumps(cfg, sort_keys=True, default=str),
    }
    save_cached(blob, path)
    log.info("trained RBM cached at %s", path)
    return model, False


def training_split(dataset, train_split: str, need_labels: bool) -> tuple[str, object]:
    """(name, split) of the fixed binary images the target RBM is trained on: ``train`` |
    ``test`` as asked, ``available`` = train when its files exist, else test (declared in
    results). ConfigError for dynamic (grayscale) data, or when labels are needed (mode
    initialisation) and the dataset has none."""
    split = train_split
    if train_split == "available":
        try:
            dataset.check_files(["train"])
            split = "train"
        except FileNotFoundError:
            log.warning(
                "%s: training files absent; training the RBM on the TEST split", dataset.name
            )
            split = "test"
    dataset.check_files([split])  # missing files fail here, before compute
    s = dataset.split(split)
    if s.binarize == "dynamic":
        raise ConfigError(
            "dataset.binarize",
            f"RBM tasks need fixed binary images; {dataset.name} is dynamic here "
            "(use dataset.binarize=threshold)",
        )
    if need_labels and s.labels is None:
        raise ConfigError(
            "task.init",
            f"mode initialisation needs class labels and {dataset.name} has none; use "
            "task.init=random or a labelled dataset (mnist_threshold, emnist, kmnist, "
            "omniglot, caltech)",
        )
    return split, s


def rbm_cache_key(model_cfg, dataset, split: str, cd: CD) -> dict:
    """What determines the target RBM's weights: data, model size and init, CD settings."""
    return {
        "kind": "rbm_cd",
        "dataset": dataset.name,
        "binarize": dataset.binarize,
        "n_valid": dataset.n_valid,
        "split": split,
        "n_visible": int(model_cfg.n_visible),
        "n_hidden": int(model_cfg.n_hidden),
        "init_std": float(model_cfg.init_std),
        "init_seed": int(model_cfg.init_seed),
        "cd": cd.key(),
    }


@dataclass(frozen=True)
class GroundTruth:
    """Block-Gibbs ground truth: ``n_ref`` reference samples (the MMD's), ``n_floor`` more (the
    ground-truth-vs-ground-truth floor), each after ``steps`` sweeps; generator ``seed``."""

    n_ref: int
    n_floor: int
    steps: int
    seed: int

    def __post_init__(self):
        for key, v in (
            ("gt_n_ref", self.n_ref),
            ("gt_n_floor", self.n_floor),
            ("gt_steps", self.steps),
        ):
            check(v >= 1, key, f"must be >= 1 (got {v})")


def target_and_ground_truth(
    key: dict,
    build_model: Callable[[], BernoulliRBM],
    cd: CD,
    train,
    gt: GroundTruth,
    cache_dir: Path,
    device: torch.device,
    progress: bool,
) -> tuple[BernoulliRBM, Tensor, Tensor, bool]:
    """(the frozen CD-trained RBM under ``key`` (see :func:`rbm_cache_key`) on ``train``, its
    ``gt.n_ref`` reference and ``gt.n_floor`` floor samples (:func:`ground_truth_samples`),
    whether the RBM came from the cache). All cached; CD uses the learner's own generator."""

    def fit() -> BernoulliRBM:
        model = build_model().to(device)
        cd.train(model, train.x.to(device), train.binarize, progress)
        return model

    model, cached = cached_rbm(key, fit, cache_dir, device=device)
    for p in model.parameters():
        p.requires_grad_(False)
    n = gt.n_ref + gt.n_floor
    gt_key = {"rbm": config_hash(key), "n": n, "steps": gt.steps, "seed": gt.seed}
    path = Path(cache_dir) / f"rbm_gt-{config_hash(gt_key)}.pt"
    mean = train.x.mean(0).to(device)
    x = ground_truth_samples(model, mean, n, gt.steps, gt.seed, path, progress)
    return model, x[: gt.n_ref], x[gt.n_ref :], cached


@dataclass(frozen=True)
class SamplingTarget:
    """How the RBM sampling benchmark's target is made: the CD-trained RBM on ``train_split``
    (:func:`training_split`), its ``gt`` ground truth, cached in ``cache_dir``
    (:func:`target_and_ground_truth`), and the ``n_chains`` chains' shared start ``init``
    (:func:`initial_states`)."""

    train_split: str
    init: str
    n_chains: int
    gt: GroundTruth
    cache_dir: str

    def __post_init__(self):
        init, splits = self.init, list(TRAIN_SPLITS)
        check(init in ("random", "mode"), "init", f"must be random or mode (got {init!r})")
        check(self.train_split in splits, "train_split", f"one of {splits}")

    def build(self, dataset, model_cfg, build_model, cd: CD, device, generator, progress: bool):
        """(target RBM, references [gt.n_ref, V], initial states, what to report:
        [mode_class, mode_class_log_prob], ``train_split``, ``rbm_cached``, ``log_mmd_floor``
        = log MMD^2 of the floor set to the references). The initial states are drawn from
        ``generator`` (the run's, before any sampler draw)."""
        split, train = training_split(dataset, self.train_split, self.init == "mode")
        key = rbm_cache_key(model_cfg, dataset, split, cd)
        model, ref, floor, cached = target_and_ground_truth(
            key, build_model, cd, train, self.gt, Path(self.cache_dir), device, progress
        )
        x0, info = initial_states(model, train, self.init, self.n_chains, generator)
        info.update(train_split=split, rbm_cached=cached)
        return model, ref, x0, {**info, "log_mmd_floor": log_mmd2_exp_hamming(floor, ref)}


@torch.no_grad()
def ground_truth_samples(
    model: BernoulliRBM,
    data_mean: Tensor,
    n: int,
    n_steps: int,
    seed: int,
    cache_path: Path | None,
    progress: bool,
) -> Tensor:
    """``n`` block-Gibbs samples after ``n_steps`` sweeps from Bernoulli(data mean), float
    [n, V], with a generator seeded by ``seed``; loaded from / saved to ``cache_path``
    (uint8) when given."""
    dev = model.W.device
    blob = load_cached(cache_path) if cache_path is not None else None
    if blob is not None:
        return blob["samples"].to(dev, torch.float32)
    gen = torch.Generator(device=dev).manual_seed(seed)
    p = data_mean.to(dev).expand(n, -1)
    v = (torch.rand(p.shape, generator=gen, device=dev) < p).float()
    for _ in tqdm(range(n_steps), desc="ground truth (block Gibbs)", disable=not progress):
        v = model.sample_v(model.sample_h(v, gen), gen)
    if cache_path is not None:
        save_cached({"samples": v.to(torch.uint8).cpu(), "n_steps": n_steps}, cache_path)
    return v


def mode_init_states(
    model: BernoulliRBM, x: Tensor, labels: Tensor, n: int, generator: torch.Generator
) -> tuple[int, Tensor, Tensor]:
    """ACS mode initialisation (Fig. 6): (class with the highest mean log p~, mean log p~ per
    class, ``n`` images of that class: drawn without replacement when the class has at
    least ``n``, else with replacement)."""
    cls, means = best_class_by_log_prob(model, x, labels)
    idx = torch.nonzero(labels == cls).flatten()
    g_dev = generator.device
    if idx.numel() >= n:
        pick = idx[torch.randperm(idx.numel(), generator=generator, device=g_dev).cpu()[:n]]
    else:
        pick = idx[torch.randint(0, idx.numel(), (n,), generator=generator, device=g_dev).cpu()]
    return cls, means, x[pick.to(x.device)]


def initial_states(
    model: BernoulliRBM, train, init: str, n: int, generator: torch.Generator
) -> tuple[Tensor, dict]:
    """The ``n`` chains' initial states and what to report about them: ``random`` draws them
    from Bernoulli(training data mean); ``mode`` (ACS Fig. 6) see :func:`mode_init_states`."""
    dev = model.W.device
    if init == "random":
        p = train.x.mean(0).to(dev).expand(n, -1)
        return (torch.rand(p.shape, generator=generator, device=dev) < p).float(), {}
    cls, means, x0 = mode_init_states(model, train.x.to(dev), train.labels, n, generator)
    return x0, {"mode_class": cls, "mode_class_log_prob": float(means[cls])}
