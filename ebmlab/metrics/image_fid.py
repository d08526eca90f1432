"""FID of generated images for the GRBM image benchmark (GRBM Tables 1-3).

Two metrics, never mixed up: the standard Inception FID (:func:`ebmlab.metrics.fid.inception_fid`,
local weights only; :func:`check_inception` validates them before any compute) and
``fid_<dataset>_features``, the same Frechet distance on the features of a small classifier
trained by ebmlab (:mod:`ebmlab.metrics.feature_net`; NOT comparable with Inception FID).
Images are float [n, C, H, W] in [0, 1]; labelled images for the classifier are uint8.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor

from ebmlab.errors import ConfigError, check
from ebmlab.metrics.feature_net import (
    FeatureNet,
    accuracy,
    cached_feature_net,
    feature_fid,
    train_feature_net,
)
from ebmlab.metrics.fid import inception_fid


def check_inception(weights: str, key: str) -> None:
    """Config-time check of Inception FID: the weight file exists and torch-fidelity imports."""
    if not Path(weights).is_file():
        raise FileNotFoundError(
            f"{key}: {weights} does not exist (the standard FID weights are never downloaded; "
            f"set {key}=null to skip Inception FID)"
        )
    try:
        import torch_fidelity  # noqa: F401
    except ImportError:
        raise ConfigError(
            key, "Inception FID needs the torch-fidelity package (pip install torch-fidelity)"
        ) from None


def check_fid_inputs(
    data, train_split: str, reference_split: str, feature_net, inception_weights, n_fake: int
) -> None:
    """Before any compute, for a run that trains on ``train_split`` and computes FID of
    ``n_fake`` images (0: none) with ``feature_net`` (None: no feature FID): the feature FID
    has labels (ConfigError), every split read has its files (FileNotFoundError), and the
    Inception weights load (:func:`check_inception`)."""
    fid, feature = n_fake > 0, feature_net is not None
    no_labels = f"{data.name} has no labels for the feature classifier: set it to false"
    check(data.has_labels or not (fid and feature), "task.feature_fid", no_labels)
    fid_splits = [reference_split] + ([feature_net.train_split] if feature else [])
    data.check_files([train_split] + fid_splits * fid)
    if fid and inception_weights:
        check_inception(inception_weights, "task.inception_weights")


@dataclass(frozen=True)
class FeatureNetSpec:
    """How the FID feature classifier is trained: on ``train_split`` (a split spec of the
    dataset) for ``epochs`` with Adam (``lr``, ``batch_size``), :class:`FeatureNet` of ``width``
    and ``feature_dim``; ``seed`` draws its initialisation and shuffling."""

    train_split: str
    epochs: int
    seed: int
    width: int
    feature_dim: int
    lr: float
    batch_size: int

    def __post_init__(self):  # errors name the node's place in the config: task.feature_net
        ints = {"epochs": self.epochs, "width": self.width, "feature_dim": self.feature_dim}
        for k, v in {**ints, "batch_size": self.batch_size}.items():
            check(v >= 1, f"feature_net.{k}", f"an integer >= 1 (got {v})")
        check(self.lr > 0, "feature_net.lr", f"> 0 (got {self.lr})")

    def trained(
        self, images: Tensor, labels: Tensor, cache_dir: str | Path, key: dict, device
    ) -> tuple[FeatureNet, bool]:
        """The classifier trained on (uint8 ``images``, ``labels``), cached under ``key`` (what
        identifies the dataset) plus every setting here. Returns (net, loaded from cache)."""
        hp = {k: v for k, v in asdict(self).items() if k not in ("train_split", "seed")}
        x = images.float() / 255.0

        def fit():
            g = torch.Generator().manual_seed(self.seed)
            net = train_feature_net(x, labels, g, **hp, device=device)
            return net, {"train_accuracy": accuracy(net, x, labels)}

        net, _, cached = cached_feature_net(cache_dir, {**key, **asdict(self)}, fit, device)
        return net, cached


def image_fid(
    data,
    fake: Tensor,
    reference_split: str,
    n_real: int | None,
    inception_weights: str | None,
    feature_net: FeatureNetSpec | None,
    floor_split: str,
    cache_dir: str | Path,
    device,
) -> dict:
    """FID results of ``fake`` images against the first ``n_real`` (None: all) images of the
    ``reference_split`` of ``data`` (a :class:`~ebmlab.data.grayscale_images.GrayscaleImages`):
    ``fid_inception`` when ``inception_weights`` is given, and with ``feature_net``
    ``fid_<dataset>_features`` plus its floor from as many ``floor_split`` images (drawn with
    the classifier's seed) and the classifier's accuracy."""
    real_u8, labels = data.load(reference_split, "task.fid_reference_split")
    real = real_u8[:n_real].float() / 255.0
    out = {"n_fid_real": int(real.shape[0]), "fid_reference_split": reference_split}
    if inception_weights:
        out["fid_inception"] = inception_fid(real, fake, inception_weights, device=device)
    if feature_net is not None:
        x, y = data.load(feature_net.train_split, "task.feature_net.train_split")
        key = {"dataset": data.name, "n": int(x.shape[0]), "n_subset": data.n_subset}
        key["subset_seed"] = data.subset_seed
        net, cached = feature_net.trained(x, y, cache_dir, key, device)
        train_u8, _ = data.load(floor_split)
        g = torch.Generator().manual_seed(feature_net.seed)
        floor = train_u8[torch.randperm(train_u8.shape[0], generator=g)[: fake.shape[0]]]
        name = f"fid_{data.name}_features"
        out[name], backend = feature_fid(net, real, fake)
        out[f"{name}_data"], _ = feature_fid(net, real, floor.float() / 255.0)
        out["feature_net_accuracy"] = accuracy(net, real, labels[:n_real])
        out.update(feature_train_split=feature_net.train_split, feature_net_cached=cached)
        out["fid_backend"] = backend
    return out
